"""examples/cluster.yaml is a config Ray's cluster launcher accepts, for the recipe the README
gives: Ray's own schema of launcher configs, and the rules its launcher checks beyond it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import ray.autoscaler
import yaml

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cluster.yaml"


def load() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def test_the_cluster_example_follows_the_launchers_schema():
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    config = load()
    jsonschema.validate(config, schema)  # raises naming the first bad field
    for key in ("cluster_name", "provider", "available_node_types", "head_node_type"):
        assert key in config, key
    assert config["provider"]["type"] and config["provider"]["region"]


def test_the_cluster_example_has_the_node_types_and_commands_a_search_needs():
    config = load()
    types = config["available_node_types"]
    assert config["head_node_type"] in types
    assert sum(t.get("min_workers", 0) for t in types.values()) <= config["max_workers"]
    assert types[config["head_node_type"]]["resources"] == {"CPU": 0}  # trials go to workers
    head = " ".join(config["head_start_ray_commands"])
    workers = " ".join(config["worker_start_ray_commands"])
    port = re.search(r"ray start --head --port=(\d+)", head).group(1)
    assert f"--address=$RAY_HEAD_IP:{port}" in workers
    for command in config["head_start_ray_commands"] + config["worker_start_ray_commands"]:
        if "ray start" in command:  # Ray 2.60: every node shares the token
            assert command.startswith("RAY_AUTH_MODE=token "), command
    assert "/home/ubuntu/.ray/auth_token" in config["file_mounts"]
    assert any("[cluster]" in c for c in config["setup_commands"])  # the job server
