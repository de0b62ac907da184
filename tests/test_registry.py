"""build_loss, the loss specs, and the losses that apply to each task."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from astune.losses import (
    LOSSES,
    TASKS,
    AMSoftmaxLoss,
    ASSoftmaxLoss,
    ASVariantLoss,
    Entmax15Loss,
    LabelSmoothingLoss,
    MultiLabelASSoftmaxLoss,
    MultiLabelCategoricalCrossEntropy,
    SoftmaxLoss,
    SparsemaxLoss,
    SparseSoftmaxLoss,
    TSoftmaxLoss,
    build_loss,
    loss_names,
    loss_spec,
)

# The public contract (docs/contract.md): name -> (module, parameters with the paper's SST5
# defaults).
EXPECTED = {
    "softmax": (SoftmaxLoss, {}),
    "t_softmax": (TSoftmaxLoss, {"tau": 5.0}),
    "label_smoothing": (LabelSmoothingLoss, {"epsilon": 0.3}),
    "sparse_softmax": (SparseSoftmaxLoss, {"k": 4}),
    "sparsemax": (SparsemaxLoss, {}),
    "entmax15": (Entmax15Loss, {}),
    "am_softmax": (AMSoftmaxLoss, {"s": 10.0, "m": 0.3}),
    "as_variant": (ASVariantLoss, {"margin": 1.0}),
    "as_softmax": (ASSoftmaxLoss, {"delta": 0.3}),
    "multilabel_softmax": (MultiLabelCategoricalCrossEntropy, {}),
    "multilabel_as_softmax": (MultiLabelASSoftmaxLoss, {"delta": 0.3}),
}
MULTI_LABEL = {"multilabel_softmax", "multilabel_as_softmax"}


def test_the_registry_holds_exactly_the_contract_names():
    assert set(loss_names()) == set(EXPECTED) == set(LOSSES)


@pytest.mark.parametrize("task", ["single_label", "pair", "token", "image", "audio"])
def test_single_label_and_token_tasks_get_the_single_label_losses(task):
    assert set(loss_names(task)) == set(EXPECTED) - MULTI_LABEL


def test_multi_label_tasks_get_the_multi_label_losses():
    assert set(loss_names("multi_label")) == MULTI_LABEL
    assert set(TASKS) == {"single_label", "pair", "token", "multi_label", "image", "audio"}


def test_unknown_task_is_rejected():
    with pytest.raises(ValueError, match="task must be one of .*'multi_label'.*'images'"):
        loss_names("images")


@pytest.mark.parametrize("name", list(EXPECTED))
def test_build_loss_gives_the_module_with_the_paper_defaults(name):
    module_cls, defaults = EXPECTED[name]
    module = build_loss(name)
    assert type(module) is module_cls
    assert {key: getattr(module, key) for key in defaults} == defaults
    assert loss_spec(name).defaults() == defaults


@pytest.mark.parametrize("name", list(EXPECTED))
def test_spec_defaults_are_the_constructor_defaults(name):
    spec = loss_spec(name)
    signature = inspect.signature(spec.factory)
    for param in spec.params:
        assert signature.parameters[param.name].default == param.default
    assert set(spec.options) <= set(signature.parameters)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_spec_ranges_agree_with_the_constructors(name):
    for param in loss_spec(name).params:
        candidates = [param.default, param.default + 1]
        for bound in (param.low, param.high):
            if bound is not None:
                candidates += [bound, bound - 1e-9, bound + 1e-9]
        if param.kind is int:
            candidates = [int(c) for c in candidates] + [float(param.default)]
        for value in candidates:

            def build(v, name=name, param=param):
                return build_loss(name, **{param.name: v})

            assert _accepts(param.check, value) == _accepts(build, value), (name, param.name, value)


def _accepts(fn, value) -> bool:
    try:
        fn(value)
    except ValueError:
        return False
    return True


def test_intervals_describe_the_accepted_ranges():
    intervals = {p.name: p.interval for spec in LOSSES.values() for p in spec.params}
    assert intervals == {
        "tau": "(0.0, inf)",
        "epsilon": "[0.0, 1.0)",
        "k": "[1, inf)",
        "s": "(0.0, inf)",
        "m": "[0.0, inf)",
        "margin": "(0.0, inf)",
        "delta": "(0.0, 1.0]",
    }
    assert loss_spec("sparse_softmax").params[0].kind is int


def test_build_loss_passes_parameters_and_options():
    assert build_loss("t_softmax", tau=0.5).tau == 0.5
    assert build_loss("am_softmax", m=0.35).s == 10.0
    as_softmax = build_loss("as_softmax", delta=0.2, ignore_index=-1, reduction="sum")
    assert (as_softmax.delta, as_softmax.ignore_index, as_softmax.reduction) == (0.2, -1, "sum")
    assert build_loss("multilabel_as_softmax", delta=0.05, reduction="none").delta == 0.05


def test_built_losses_compute_their_losses():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 5, generator=gen)
    labels = torch.tensor([0, 1, 2, -100, 4, 3])
    expected = F.cross_entropy(logits, labels)
    assert_close(build_loss("softmax")(logits, labels), expected)
    assert_close(build_loss("as_softmax", delta=1.0)(logits, labels), expected)
    t_softmax = build_loss("t_softmax", tau=2.0)
    assert_close(t_softmax(logits, labels), F.cross_entropy(logits / 2, labels))
    targets = torch.zeros(6, 5)
    targets[:, 0] = 1
    plain = build_loss("multilabel_softmax", reduction="none")(logits, targets)
    expected_plain = torch.log1p(logits[:, 1:].exp().sum(1)) + torch.log1p((-logits[:, 0]).exp())
    assert_close(plain, expected_plain)


def test_unknown_loss_names_the_value_and_the_known_losses():
    with pytest.raises(ValueError, match="loss must be one of 'softmax', .*'as_softmax'.*'focal'"):
        build_loss("focal")


@pytest.mark.parametrize(
    "name, params, match",
    [
        (
            "softmax",
            {"delta": 0.3},
            r"unknown parameter 'delta' for loss 'softmax'; it accepts: "
            r"ignore_index, reduction",
        ),
        ("t_softmax", {"temperature": 2}, r"'temperature' for loss 't_softmax'; it accepts: tau, "),
        ("multilabel_softmax", {"ignore_index": -100}, r"'ignore_index' .* accepts: reduction\."),
        (
            "multilabel_as_softmax",
            {"margin": 1},
            r"'margin' .* accepts: delta, reduction, kernel, overwrite_logits\.",
        ),
    ],
)
def test_unknown_parameter_names_it_and_the_accepted_ones(name, params, match):
    with pytest.raises(ValueError, match=match):
        build_loss(name, **params)


@pytest.mark.parametrize(
    "name, params, match",
    [
        ("as_softmax", {"delta": 1.5}, r"delta must be in \(0\.0, 1\.0\], but got 1\.5"),
        ("as_softmax", {"delta": 0.0}, r"delta must be in \(0\.0, 1\.0\], but got 0\.0"),
        ("multilabel_as_softmax", {"delta": -0.1}, r"delta .* got -0\.1"),
        ("sparse_softmax", {"k": 0}, r"k must be an integer in \[1, inf\), but got 0"),
        ("am_softmax", {"s": -1.0}, r"s must be in \(0\.0, inf\), but got -1\.0"),
        ("softmax", {"reduction": "avg"}, r"reduction must be one of .* got 'avg'"),
    ],
)
def test_out_of_range_values_are_rejected(name, params, match):
    with pytest.raises(ValueError, match=match):
        build_loss(name, **params)
    spec_params = {p.name: p for p in loss_spec(name).params}
    for key, value in params.items():
        if key in spec_params:
            with pytest.raises(ValueError, match=match):
                spec_params[key].check(value)


def test_the_registry_is_read_only():
    with pytest.raises(TypeError):
        LOSSES["mine"] = LOSSES["softmax"]  # type: ignore[index]


def test_the_registry_reads_the_catalogue():
    from astune.losses import catalogue

    assert tuple(LOSSES) == tuple(catalogue.CATALOGUE)
    for name, spec in LOSSES.items():
        assert spec.info is catalogue.CATALOGUE[name]
    assert loss_spec("as_softmax").params == (catalogue.DELTA,)
    assert TASKS is catalogue.TASKS
