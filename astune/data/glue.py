"""The GLUE tasks of the registry: the paper's GLUE table (it tunes delta in [0.05, 0.35] and
gives no other per-task settings)."""

from __future__ import annotations

from astune.data.hub import HUB_DATA_FILES
from astune.data.paper_tables import results
from astune.data.spec import DatasetSpec


def _glue(
    name: str,
    config: str,
    columns: tuple[str, str | None],
    num_labels: int,
    column: tuple[float, ...],
    *,
    metric: str = "accuracy",
    test: str = "validation",
    note: str = "",
) -> DatasetSpec:
    """A GLUE task: the hub's test labels are hidden, so its dev set is our test split and our
    validation split is 10 % of train (fixed seed)."""
    text, pair = columns
    return DatasetSpec(
        name=name,
        task="pair" if pair else "single_label",
        num_labels=num_labels,
        hub_id="nyu-mll/glue",
        hub_config=config,
        hub_status=HUB_DATA_FILES,
        text_column=text,
        text_pair_column=pair,
        metric=metric,
        split_names={"train": "train", "validation": None, "test": test},
        paper_results=results(metric, (column[0], column[1], None, *column[2:])),
        notes=(
            "GLUE: the paper tunes delta in [0.05, 0.35] and takes the other settings from "
            "its reference [45]; it gives no per-task numbers. " + note
        ).strip(),
    )


# GLUE table columns: softmax, t_softmax, sparsemax, entmax15, label_smoothing, am_softmax,
# as_softmax, as_speed (no sparse_softmax: too few classes).
GLUE_SPECS = [
    _glue(
        "mnli",
        "mnli",
        ("premise", "hypothesis"),
        3,
        (84.18, 83.75, 83.59, 83.98, 83.53, 81.88, 84.19, 83.73),
        test="validation_matched",
    ),
    _glue(
        "mrpc",
        "mrpc",
        ("sentence1", "sentence2"),
        2,
        (89.41, 89.77, 89.50, 88.70, 88.81, 90.38, 90.72, 90.43),
        note="The paper does not say whether its MRPC number is accuracy or F1.",
    ),
    _glue(
        "qnli",
        "qnli",
        ("question", "sentence"),
        2,
        (90.49, 90.54, 90.68, 90.72, 90.85, 90.76, 91.12, 90.99),
        note="The paper's header says QNLI:3; the task has 2 classes.",
    ),
    _glue(
        "qqp",
        "qqp",
        ("question1", "question2"),
        2,
        (91.00, 90.99, 91.12, 91.00, 91.03, 89.29, 90.95, 90.67),
        note="The paper does not say whether its QQP number is accuracy or F1.",
    ),
    _glue(
        "rte",
        "rte",
        ("sentence1", "sentence2"),
        2,
        (68.23, 67.51, 67.51, 67.51, 68.59, 68.23, 69.31, 68.95),
        note="The paper's header says RTE:3; the task has 2 classes.",
    ),
    _glue(
        "sst2",
        "sst2",
        ("sentence", None),
        2,
        (92.54, 92.43, 92.32, 92.66, 92.78, 92.78, 93.23, 92.78),
    ),
    _glue(
        "cola",
        "cola",
        ("sentence", None),
        2,
        (62.44, 62.10, 61.83, 62.63, 63.33, 63.48, 64.55, 62.91),
        metric="matthews",
        note="Scored with Matthews correlation (x100 in the paper).",
    ),
]
