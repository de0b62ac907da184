"""Links into MLflow's UI. MLflow 3 opens an experiment on its GenAI overview (traces) unless the
URL names the runs view, so every link astune prints names it."""

from __future__ import annotations

from astune.store.uri import mlflow_ui_command, resolve_tracking_uri

LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves by default


def runs_view_url(tracking_uri: str | None, experiment_id: str) -> str:
    """``<server>/#/experiments/<id>/runs``; for a local store, the address `mlflow ui` serves."""
    uri = resolve_tracking_uri(tracking_uri)
    server = uri if uri.startswith(("http://", "https://")) else LOCAL_UI
    return f"{server}/#/experiments/{experiment_id}/runs"


def review_lines(tracking_uri: str | None, experiment_id: str) -> list[str]:
    """How to see a search's runs: the link, preceded by the `mlflow ui` command for a store
    that no server serves yet."""
    uri = resolve_tracking_uri(tracking_uri)
    link = runs_view_url(uri, experiment_id)
    if uri.startswith(("http://", "https://")):
        return [link]
    return [mlflow_ui_command(uri), link]
