"""YAML search spaces: validation, conditional define-by-run sampling, seed points first."""

from __future__ import annotations

import importlib.resources
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
import pytest

from astune.config import TrainConfig
from astune.losses.catalogue import AS_LOSSES, loss_info
from astune.space.space import (
    SearchSpace,
    SpaceError,
    available_spaces,
    load_space,
    space_dir,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS = (
    "sst5",
    "clinc_oos",
    "conll2003",
    "go_emotions",
    "sighan2015",
    "eurlex",
    "wos",
    "mnli",
    "mrpc",
    "qnli",
    "qqp",
    "rte",
    "sst2",
    "cola",
    "wikiart",
    "chest_falsetto",
)
SINGLE_LABEL = (
    "softmax",
    "t_softmax",
    "label_smoothing",
    "sparse_softmax",
    "sparsemax",
    "entmax15",
    "am_softmax",
    "as_variant",
    "as_softmax",
)

# tab:universal_parameter and tab:parameter_results of the paper:
# dataset -> (epochs, batch, lr, delta, r, lambda, s)
PAPER = {
    "sst5": (7, 16, 2e-5, 0.30, 0.00, 1.5, 4),
    "clinc_oos": (10, 32, 2e-5, 0.30, 0.15, 0.5, 5),
    "conll2003": (20, 32, 2e-5, 0.35, 0.25, 0.5, 5),
    "sighan2015": (15, 128, 5e-5, 0.30, 0.00, 0.5, 2),
    "eurlex": (20, 16, 3e-5, 0.05, 0.00, 0.5, 2),
    "wos": (10, 12, 3e-5, 0.35, 0.00, 1.0, 2),
}


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def write(tmp_path: Path, text: str, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def config_of(space: SearchSpace, trial: optuna.Trial) -> dict:
    """The config OptunaSearch builds: the suggested values, then the returned constants."""
    constants = space.define_by_run(trial)
    return {**trial.params, **constants}


def expected_keys(space: SearchSpace, config: dict) -> set[str]:
    keys = {"loss", "as_speed", *space.params, *space.loss_params.get(config["loss"], {})}
    if config["loss"] in AS_LOSSES and config["as_speed"]:
        keys |= {"lam", "max_accum_steps"}
    return keys


def check_config(space: SearchSpace, config: dict) -> None:
    loss = config["loss"]
    assert set(config) == expected_keys(space, config)
    for name, value in config.items():
        if name == "loss":
            assert value in space.losses
        elif name == "as_speed" and loss not in AS_LOSSES:
            assert value is False
        else:
            assert space.param(name, loss).contains(value), (name, value)


# ------------------------------------------------------------------------ shipped spaces
def test_every_dataset_has_a_space_and_all_validate() -> None:
    names = available_spaces()
    assert set(DATASETS) | {"default"} <= set(names)
    for name in names:
        space = load_space(name)
        assert space.metric == "objective" and space.mode == "max"
        assert space.seed_points, name
        multi = name in ("go_emotions", "eurlex", "wos")
        assert all(
            (loss in ("multilabel_softmax", "multilabel_as_softmax")) == multi
            for loss in space.losses
        ), name


@pytest.mark.parametrize("dataset", sorted(PAPER))
def test_dataset_space_holds_the_papers_settings(dataset: str) -> None:
    epochs, batch, lr, delta, r, lam, steps = PAPER[dataset]
    space = load_space(dataset=dataset)
    assert Path(space.source).name == f"{dataset}.yaml"
    assert space.params["epochs"].value == epochs
    loss = space.losses[0]
    assert loss in AS_LOSSES
    speed_points = [p for p in space.seed_points if p.get("as_speed") is True]
    assert speed_points == [
        {
            "loss": loss,
            "lr": lr,
            "batch_size": batch,
            "delta": delta,
            "warmup_ratio": r,
            "as_speed": True,
            "lam": lam,
            "max_accum_steps": steps,
        }
    ]
    plain = {k: v for k, v in speed_points[0].items() if k not in ("lam", "max_accum_steps")}
    assert space.seed_points[0] == {**plain, "as_speed": False}


def test_sst5_seed_point_is_the_papers() -> None:
    space = load_space("sst5")
    assert {
        "loss": "as_softmax",
        "lr": 2e-5,
        "batch_size": 16,
        "delta": 0.3,
        "warmup_ratio": 0.0,
        "as_speed": True,
        "lam": 1.5,
        "max_accum_steps": 4,
    } in space.seed_points
    baselines = {p["loss"]: p for p in space.with_losses(SINGLE_LABEL).seed_points}
    assert baselines["t_softmax"]["tau"] == 5.0 and baselines["sparse_softmax"]["k"] == 4
    assert baselines["label_smoothing"]["epsilon"] == 0.3
    assert (baselines["am_softmax"]["s"], baselines["am_softmax"]["m"]) == (10.0, 0.3)


def test_dataset_without_a_file_gets_default() -> None:
    assert Path(load_space(dataset="my_own_data").source).name == "default.yaml"
    assert Path(load_space(dataset="path/to/folder").source).name == "default.yaml"
    assert Path(load_space().source).name == "default.yaml"
    with pytest.raises(SpaceError, match="no packaged search space"):
        load_space("no_such_space")


def test_packaged_files_are_found_from_the_package_and_the_repo_root() -> None:
    packaged = importlib.resources.files("astune") / "search_spaces"
    assert (packaged / "default.yaml").is_file()
    assert Path(str(packaged)).resolve() == space_dir().resolve()
    root = REPO_ROOT / "search_spaces"
    assert root.resolve() == space_dir().resolve()
    assert sorted(p.name for p in root.glob("*.yaml")) == sorted(
        f"{n}.yaml" for n in available_spaces()
    )


def test_import_is_light() -> None:
    code = (
        "import sys, astune.tuning, astune.space.space; "
        "print(sorted(m for m in ('ray', 'mlflow', 'optuna', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- validation
BAD = {
    "unknown kind": (
        "params:\n  lr: {type: uniform, low: 1.0e-5, high: 1.0e-4}",
        "params.lr",
        "unknown kind 'uniform'",
    ),
    "missing key": ("params:\n  lr: {type: float, low: 1.0e-5}", "params.lr", "missing key 'high'"),
    "extra key": (
        "params:\n  lr: {type: float, low: 1.0e-5, high: 1.0e-4, choices: [1]}",
        "params.lr",
        "unexpected key 'choices'",
    ),
    "extra key fixed": (
        "params:\n  epochs: {type: fixed, value: 3, low: 1}",
        "params.epochs",
        "unexpected key 'low'",
    ),
    "missing choices": (
        "params:\n  batch_size: {type: categorical}",
        "params.batch_size",
        "missing key 'choices'",
    ),
    "low > high": (
        "params:\n  lr: {type: float, low: 1.0e-4, high: 1.0e-5}",
        "params.lr",
        "must be <= high",
    ),
    "log low <= 0": (
        "params:\n  weight_decay: {type: float, low: 0.0, high: 0.1, log: true}",
        "params.weight_decay",
        "log: true needs low > 0",
    ),
    "log with step": (
        "params:\n  lr: {type: float, low: 1.0e-5, high: 1.0e-4, log: true, step: 1.0e-5}",
        "params.lr",
        "cannot be combined",
    ),
    "step not dividing": (
        "loss_params:\n  as_softmax:\n    delta: {type: float, low: 0.05, high: 0.5, step: 0.07}",
        "loss_params.as_softmax.delta",
        "does not divide",
    ),
    "int step not dividing": (
        "speed_params:\n  max_accum_steps: {type: int, low: 2, high: 7, step: 2}",
        "speed_params.max_accum_steps",
        "does not divide",
    ),
    "delta > 1": (
        "loss_params:\n  as_softmax:\n    delta: {type: float, low: 0.1, high: 1.5}",
        "loss_params.as_softmax.delta",
        "delta must be in (0.0, 1.0]",
    ),
    "delta low 0": (
        "loss_params:\n  as_softmax:\n    delta: {type: float, low: 0.0, high: 0.5}",
        "loss_params.as_softmax.delta",
        "delta must be in (0.0, 1.0], but got 0.0",
    ),
    "delta < 0 multilabel": (
        "loss_params:\n  multilabel_as_softmax:\n    delta: {type: fixed, value: -0.1}",
        "loss_params.multilabel_as_softmax.delta",
        "delta must be in",
    ),
    "warmup_ratio": (
        "loss_params:\n  as_softmax:\n    warmup_ratio: {type: float, low: -0.1, high: 0.3}",
        "loss_params.as_softmax.warmup_ratio",
        "warmup_ratio must be in [0.0, 1.0]",
    ),
    "lam <= 0": (
        "speed_params:\n  lam: {type: float, low: 0.0, high: 2.0}",
        "speed_params.lam",
        "lam must be in (0.0, inf)",
    ),
    "max_accum_steps < 1": (
        "speed_params:\n  max_accum_steps: {type: int, low: 0, high: 4}",
        "speed_params.max_accum_steps",
        "max_accum_steps must be an integer in [1, inf)",
    ),
    "int param as float": (
        "params:\n  batch_size: {type: float, low: 8, high: 64}",
        "params.batch_size",
        "takes integers",
    ),
    "as_speed not bool": (
        "speed_params:\n  as_speed: {type: categorical, choices: [1, 0]}",
        "speed_params.as_speed",
        "true or false",
    ),
    "unknown loss": ("losses: [as_softmaxx]", "losses", "unknown loss 'as_softmaxx'"),
    "unknown loss in loss_params": (
        "loss_params:\n  focal:\n    gamma: 2.0",
        "loss_params.focal",
        "unknown loss 'focal'",
    ),
    "param of another loss": (
        "loss_params:\n  as_softmax:\n    tau: {type: float, low: 0.5, high: 5.0}",
        "loss_params.as_softmax.tau",
        "'tau' is a loss parameter",
    ),
    "unknown loss param": (
        "loss_params:\n  t_softmax:\n    temperature: 2.0",
        "loss_params.t_softmax.temperature",
        "unknown parameter 'temperature'",
    ),
    "loss param under params": (
        "params:\n  delta: 0.3",
        "params.delta",
        "put it under loss_params",
    ),
    "unknown top-level key": ("sampler: tpe", "sampler", "unknown top-level key"),
    "mixed families": (
        "losses: [as_softmax, multilabel_as_softmax]",
        "losses",
        "mixes single-label",
    ),
    "bad mode": ("mode: maximize", "mode", "mode must be one of"),
    "bad scheduler": (
        "scheduler: {type: median}",
        "scheduler.type",
        "must be one of 'auto', 'asha', 'hyperband', 'none'",
    ),
    "seed point unknown param": (
        "seed_points:\n  - {loss: as_softmax, gamma: 2.0}",
        "seed_points[0].gamma",
        "unknown parameter 'gamma'",
    ),
    "seed point out of range": (
        "seed_points:\n  - {loss: as_softmax, delta: 0.9}",
        "seed_points[0].delta",
        "outside the space",
    ),
    "seed point off the step grid": (
        "seed_points:\n  - {loss: as_softmax, delta: 0.33}",
        "seed_points[0].delta",
        "outside the space",
    ),
    "seed point not a choice": (
        "seed_points:\n  - {loss: softmax, batch_size: 24}",
        "seed_points[0].batch_size",
        "outside the space",
    ),
    "seed point fixed value": (
        "seed_points:\n  - {loss: softmax, epochs: 9}",
        "seed_points[0].epochs",
        "outside the space",
    ),
    "seed point wrong loss param": (
        "seed_points:\n  - {loss: softmax, delta: 0.3}",
        "seed_points[0].delta",
        "not a parameter of loss 'softmax'",
    ),
    "seed point speed on baseline": (
        "seed_points:\n  - {loss: softmax, lam: 1.0}",
        "seed_points[0].lam",
        "AS losses only",
    ),
    "seed point lam without as_speed": (
        "seed_points:\n  - {loss: as_softmax, lam: 1.0}",
        "seed_points[0].lam",
        "add as_speed: true",
    ),
    "seed point without loss": (
        "seed_points:\n  - {lr: 2.0e-5}",
        "seed_points[0].loss",
        "missing 'loss'",
    ),
    "seed point unknown loss": (
        "seed_points:\n  - {loss: focal}",
        "seed_points[0].loss",
        "unknown loss 'focal'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_space_raises_one_line_naming_file_and_parameter(tmp_path: Path, case: str) -> None:
    body, where, problem = BAD[case]
    path = write(tmp_path, "extends: default\n" + body + "\n")
    with pytest.raises(SpaceError) as info:
        load_space(path)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert info.value.where == where, message
    assert problem in message
    assert pickle.loads(pickle.dumps(info.value)).args == info.value.args


def test_missing_parameters_of_a_searched_loss(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        losses: [as_softmax]
        loss_params:
          as_softmax:
            delta: {type: float, low: 0.1, high: 0.5}
        speed_params:
          as_speed: false
        """,
    )
    with pytest.raises(SpaceError, match=r"loss_params\.as_softmax\.warmup_ratio: missing"):
        load_space(path)
    path.write_text(
        path.read_text()
        .replace("speed_params:\n  as_speed: false\n", "")
        .replace("delta:", "warmup_ratio: 0.0\n    delta:")
    )
    with pytest.raises(SpaceError, match=r"speed_params\.as_speed: missing"):
        load_space(path)
    path.write_text(path.read_text() + "speed_params:\n  as_speed: {type: fixed, value: true}\n")
    with pytest.raises(SpaceError, match=r"speed_params\.lam: missing"):
        load_space(path)


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "losses: [as_softmax]\nparams:\n  lr: {type: float, low: 1\n")
    with pytest.raises(SpaceError, match=r"bad\.yaml: line \d+: malformed YAML") as info:
        load_space(path)
    assert "\n" not in str(info.value)
    dup = write(tmp_path, "losses: [as_softmax]\nlosses: [softmax]\n", "dup.yaml")
    with pytest.raises(
        SpaceError, match=r"dup\.yaml: line 2: malformed YAML: duplicate key 'losses'"
    ):
        load_space(dup)


@pytest.mark.parametrize("text", ["- softmax\n- as_softmax\n", "just a string\n", ""])
def test_non_mapping_top_level(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpaceError, match=r"bad\.yaml: the top level must be a mapping"):
        load_space(path)


def test_extends_errors_name_the_file_at_fault(tmp_path: Path) -> None:
    write(
        tmp_path, "extends: default\nparams:\n  lr: {type: float, low: 2, high: 1}\n", "base.yaml"
    )
    child = write(tmp_path, "extends: base\n", "child.yaml")
    with pytest.raises(SpaceError, match=r"base\.yaml: params\.lr: low 2 must be <= high 1"):
        load_space(child)
    loop = write(tmp_path, "extends: child.yaml\n", "base.yaml")
    with pytest.raises(SpaceError, match=r"circular extends"):
        load_space(loop)
    missing = write(tmp_path, "extends: nowhere\n", "orphan.yaml")
    with pytest.raises(SpaceError, match=r"orphan\.yaml: extends: no search space 'nowhere'"):
        load_space(missing)


def test_extends_merges_and_exponent_floats_parse(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        extends: default
        num_samples: 7
        params:
          lr: {type: float, low: 1e-5, high: 3e-5, log: true}
        loss_params:
          as_softmax:
            delta: {type: fixed, value: 0.25}
        seed_points: []
        """,
    )
    space = load_space(path)
    assert (space.params["lr"].low, space.params["lr"].high) == (1e-5, 3e-5)
    assert space.params["epochs"].value == 5 and space.num_samples == 7
    assert space.loss_params["as_softmax"]["delta"].value == 0.25
    assert space.loss_params["as_softmax"]["warmup_ratio"] == load_space().param("warmup_ratio")
    assert space.seed_points == []


# ------------------------------------------------------------------------------- sampling
def test_define_by_run_is_conditional_with_tpe() -> None:
    space = load_space("default").with_losses(
        "softmax,t_softmax,label_smoothing,am_softmax,as_softmax"
    )
    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=8)
    )
    seen = set()
    for _ in range(30):
        trial = study.ask()
        config = config_of(space, trial)
        check_config(space, config)
        loss = config["loss"]
        assert ("tau" in config) == (loss == "t_softmax")
        assert ("epsilon" in config) == (loss == "label_smoothing")
        assert ("s" in config and "m" in config) == (loss == "am_softmax")
        assert ("delta" in config) == ("warmup_ratio" in config) == (loss == "as_softmax")
        speed = loss == "as_softmax" and config["as_speed"]
        for name in ("delta", "warmup_ratio", "m", "epsilon", "lam"):  # on a 0.05 / 0.5 grid
            assert name not in config or config[name] == round(config[name], 2)
        assert ("lam" in config) == ("max_accum_steps" in config) == speed
        seen.add((loss, config["as_speed"]))
        study.tell(trial, config["lr"] * 1e4 + (loss == "as_softmax"))
    assert {("as_softmax", True), ("as_softmax", False)} <= seen
    assert len({loss for loss, _ in seen}) >= 4


def test_define_by_run_multilabel() -> None:
    space = load_space("go_emotions").with_losses(["multilabel_softmax", "multilabel_as_softmax"])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    losses = set()
    for _ in range(12):
        config = config_of(space, study.ask())
        check_config(space, config)
        assert ("delta" in config) == (config["loss"] == "multilabel_as_softmax")
        losses.add(config["loss"])
    assert losses == {"multilabel_softmax", "multilabel_as_softmax"}


def test_seed_points_come_first_from_ray_optuna_search() -> None:
    import ray
    from ray.tune.search.optuna import OptunaSearch

    space = load_space("sst5").with_losses("softmax,t_softmax,as_softmax")
    points = space.seed_points
    assert [p["loss"] for p in points] == ["as_softmax", "as_softmax", "softmax", "t_softmax"]
    searcher = OptunaSearch(
        space=space.define_by_run, metric="objective", mode="max", points_to_evaluate=points, seed=0
    )
    configs = [searcher.suggest(f"trial_{i}") for i in range(len(points) + 3)]
    for point, config in zip(points, configs[: len(points)], strict=True):
        assert {k: config[k] for k in point} == point
        assert config["epochs"] == 7 and config["seed"] == 42
    for config in configs:
        check_config(space, config)
    assert configs[len(points)] not in configs[: len(points)]
    assert not ray.is_initialized()


# ------------------------------------------------------------------------------- variants
def test_with_losses_keeps_each_losses_parameters_and_rejects_unknown() -> None:
    sst5 = load_space("sst5")
    space = sst5.with_losses("softmax, entmax15,as_softmax")
    assert space.losses == ("softmax", "entmax15", "as_softmax")
    assert space.loss_params["as_softmax"] == sst5.loss_params["as_softmax"]
    assert {p["loss"] for p in space.seed_points} == {"softmax", "entmax15", "as_softmax"}
    with pytest.raises(SpaceError, match=r"sst5\.yaml: losses: unknown loss 'nope'"):
        sst5.with_losses("softmax,nope")
    with pytest.raises(SpaceError, match="mixes single-label"):
        sst5.with_losses(["as_softmax", "multilabel_as_softmax"])


def test_with_losses_falls_back_to_default_entries(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        losses: [softmax]
        params:
          lr: 3.0e-5
        """,
        "own.yaml",
    )
    space = load_space(path).with_losses(["t_softmax", "as_softmax"])
    default = load_space("default")
    assert space.loss_params["t_softmax"] == default.loss_params["t_softmax"]
    assert space.speed_params == default.speed_params
    info = loss_info("as_softmax")  # the delta schedule's keys are optional (its defaults)
    assert set(info.config_keys) - set(info.optional_keys) == set(space.loss_params["as_softmax"])


def test_for_task_swaps_the_loss_family() -> None:
    assert load_space("default").for_task("multi_label").losses == ("multilabel_as_softmax",)
    assert load_space("go_emotions").for_task("single_label").losses == ("as_softmax",)
    sst5 = load_space("sst5")
    assert sst5.for_task("token") is sst5
    with pytest.raises(SpaceError, match="'t_softmax' does not apply to multi_label"):
        sst5.with_losses("t_softmax,as_softmax").for_task("multi_label")


def test_with_fixed_and_settings() -> None:
    space = load_space("sst5").with_fixed(epochs=2, batch_size=8)
    assert space.params["epochs"].value == 2
    assert all("batch_size" not in p for p in space.seed_points)
    study = optuna.create_study()
    config = config_of(space, study.ask())
    assert (config["epochs"], config["batch_size"]) == (2, 8)
    with pytest.raises(SpaceError, match=r"params\.epochs: epochs must be in \(0.0, inf\)"):
        space.with_fixed(epochs=0)
    with pytest.raises(SpaceError, match=r"params\.delta: 'delta' is a loss parameter"):
        space.with_fixed(delta=0.3)
    changed = space.with_settings(num_samples=3, scheduler="none")
    assert (changed.num_samples, changed.scheduler["type"]) == (3, "none")
    with pytest.raises(SpaceError, match="num_samples"):
        space.with_settings(num_samples=0)


def test_narrowed_and_dump_round_trip(tmp_path: Path) -> None:
    sst5 = load_space("sst5")
    narrow = sst5.narrowed("delta", 0.25, 0.35)
    delta = narrow.param("delta")
    assert (delta.low, delta.high, delta.step) == (0.25, 0.35, 0.05)
    assert narrow.param("delta", "multilabel_as_softmax") == sst5.param(
        "delta", "multilabel_as_softmax"
    )
    assert narrow.seed_points == sst5.seed_points  # 0.3 stays inside
    tight = sst5.narrowed("delta", 0.32, 0.34)
    assert tight.param("delta").step is None
    assert all(p["loss"] != "as_softmax" for p in tight.seed_points)
    assert sst5.narrowed("lr", 1e-5, 1.5e-5).param("lr").log
    with pytest.raises(
        SpaceError, match=r"loss_params\.as_softmax\.delta: low 0.6 must be <= high 0.4"
    ):
        sst5.narrowed("delta", 0.6, 0.4)
    with pytest.raises(SpaceError, match=r"delta must be in \(0.0, 1.0\]"):
        sst5.narrowed("delta", 0.5, 1.2)
    written = narrow.dump(tmp_path / "narrow.yaml")
    again = load_space(written)
    assert again.to_dict() == narrow.to_dict()
    assert again.source == str(written)


# ------------------------------------------------------------------------------- AS-Skip
SKIP_SPACE = """
extends: default
losses: [softmax, as_softmax]
speed_params:
  as_skip: {type: categorical, choices: [true, false]}
  skip_keep: {type: float, low: 0.1, high: 0.5}
  skip_anneal: {type: fixed, value: 0.2}
  skip_probe: {type: categorical, choices: [true, false]}
  skip_backoff: {type: float, low: 1.0, high: 16.0, log: true}
  skip_policy: {type: categorical, choices: [zero, soft]}
  skip_prune: {type: float, low: 0.3, high: 0.7}
"""


def test_as_skip_and_its_parameters_are_sampled_only_for_an_as_loss_with_as_skip(
    tmp_path: Path,
) -> None:
    space = load_space(write(tmp_path, SKIP_SPACE, "skip.yaml"))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen, probes, policies = set(), set(), set()
    for _ in range(30):
        config = config_of(space, study.ask())
        skip = config.get("as_skip", False)
        assert skip is False or config["loss"] == "as_softmax"
        assert ("skip_keep" in config) == ("skip_anneal" in config) == skip
        assert ("skip_probe" in config) == ("skip_backoff" in config) == skip
        assert ("skip_policy" in config) == ("skip_prune" in config) == skip
        if skip:
            assert 0.1 <= config["skip_keep"] <= 0.5 and config["skip_anneal"] == 0.2
            assert 1.0 <= config["skip_backoff"] <= 16.0 and 0.3 <= config["skip_prune"] <= 0.7
            probes.add(config["skip_probe"])
            policies.add(config["skip_policy"])
        seen.add((config["loss"], skip))
        TrainConfig.from_dict({**config, "dataset": "sst5"}).validate()  # every sample is valid
    assert {("as_softmax", True), ("as_softmax", False), ("softmax", False)} <= seen
    assert probes == {True, False} and policies == {"zero", "soft"}


@pytest.mark.parametrize(
    "text, where, problem",
    [
        ("speed_params:\n  skip_keep: 0.3", "speed_params.skip_keep", "only when as_skip"),
        ("speed_params:\n  skip_keep: {type: float, low: 0.0, high: 1.5}", "skip_keep", "1.0"),
        ("speed_params:\n  skip_probe: {type: fixed, value: 2}", "skip_probe", "true or false"),
        ("speed_params:\n  skip_backoff: {type: float, low: 0.5, high: 4}", "skip_backoff", "1.0"),
        (
            "speed_params:\n  skip_policy: {type: float, low: 0, high: 1}",
            "skip_policy",
            "zero, soft",
        ),
        (
            "speed_params:\n  as_skip: true\n  skip_policy: {type: categorical, choices: [hard]}",
            "speed_params.skip_policy",
            "skip_policy must be one of 'zero', 'soft', but got 'hard'",
        ),
        ("speed_params:\n  skip_prune: {type: float, low: 0.5, high: 1.0}", "skip_prune", "1.0)"),
        (
            "params:\n  infobatch: {type: categorical, choices: [true, false]}\n"
            "speed_params:\n  as_skip: {type: categorical, choices: [true, false]}",
            "params.infobatch",
            "fix one of them to false",
        ),
        ("params:\n  infobatch_prune: {type: float, low: 0, high: 1}", "infobatch_prune", "1.0)"),
        (
            "speed_params:\n  as_skip: {type: categorical, choices: [true, false]}\n"
            "  skip_keep: {type: float, low: 0.1, high: 0.5}\n"
            "seed_points:\n  - {loss: as_softmax, as_speed: false, skip_keep: 0.2}",
            "seed_points[0].skip_keep",
            "add as_skip: true",
        ),
    ],
)
def test_bad_skip_params_name_where_and_why(tmp_path: Path, text: str, where: str, problem: str):
    body = "extends: default\nlosses: [as_softmax]\n" + text
    with pytest.raises(SpaceError) as err:
        load_space(write(tmp_path, body + "\n"))
    assert where in str(err.value) and problem in str(err.value)
