"""The Triton kernels behind :mod:`astune.losses.as_softmax_triton` and
:mod:`astune.losses.multilabel_triton` (imported only from there, on first use, so that astune
imports without triton).

Checked with triton 3.6 and 3.9. ``TRITON_INTERPRET=1`` must be set before this module is
imported: ``triton.jit`` decides at decoration whether a kernel compiles or is interpreted.

A program handles ``BLOCK_M`` rows of ``BLOCK_C`` columns. ``SINGLE``: the row fits one block,
and one read of it gives every output. Otherwise three passes over column blocks: the online
max and sum, then the kept mass (it needs the threshold, which needs the whole row's sum), then
the gradient. The multi-label kernel takes rows that fit one block.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
# Below this threshold a row masks nothing (as_softmax.py's _MIN_THRESHOLD); FLOAT32_TINY then
# stands in for it, masking only probabilities that underflowed, as the torch path does.
MIN_THRESHOLD: tl.constexpr = tl.constexpr(1e-30)
FLOAT32_TINY: tl.constexpr = tl.constexpr(1.1754943508222875e-38)


@triton.jit
def _threshold(p_t, delta):
    c = p_t - delta
    return tl.where(c > MIN_THRESHOLD, c, FLOAT32_TINY)


@triton.jit
def _load_tile(base, cols, n_cols, row_ok):
    """Logits of ``cols`` as float32, ``-inf`` past the row's end, 0 in rows past the last."""
    col_ok = cols < n_cols
    # Read in the input dtype and computed in float32 in registers: fp16/bf16 probabilities
    # underflow and their sums lose the kept mass, while an upcast copy would double the bytes.
    x = tl.load(base + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    return tl.where(col_ok[None, :], x.to(tl.float32), float("-inf"))


@triton.jit
def _store_grad(grad_base, cols, ok, keep, is_t, e, rest, inv_kept):
    """``z_i p_i / K - [i = t]`` times ``inv_kept = row_scale / K`` (0 for dead rows), stored in
    the gradient buffer's dtype; at the target ``-rest / K``, the same without the cancellation
    of ``p_t / K - 1`` when little mass besides the target is kept."""
    grad = tl.where(keep, e * inv_kept[:, None], 0.0)
    grad = tl.where(is_t, -rest[:, None] * inv_kept[:, None], grad)
    tl.store(grad_base + cols[None, :], grad.to(grad_base.dtype.element_ty), mask=ok)


@triton.jit
def _row_loss(kept, rest, e_t, x_t, m):
    """``log(K / e_t)``: ``log1p(rest / e_t)`` while that ratio is at most 1 (Goldberg's log1p:
    exact for a small ratio, where ``log(K) - log(e_t)`` would lose float32's 6e-8), else the
    plain difference (also when ``e_t`` underflowed)."""
    ratio = rest / e_t
    u = 1.0 + ratio
    small = tl.where(u == 1.0, ratio, tl.log(u) * (ratio / tl.where(u == 1.0, 1.0, u - 1.0)))
    return tl.maximum(tl.where(ratio <= 1.0, small, tl.log(kept) - (x_t - m)), 0.0)


@triton.jit(do_not_specialize=["n_rows"])  # one compile for every batch size
def as_softmax_forward(
    logits_ptr,
    grad_ptr,
    labels_ptr,
    loss_ptr,
    masked_ptr,
    margin_ptr,
    count_ptr,
    n_rows,
    n_cols,
    logits_stride,
    grad_stride,
    delta,
    ignore_index,
    BLOCK_M: tl.constexpr,
    BLOCK_C: tl.constexpr,
    SINGLE: tl.constexpr,
    STORE_GRAD: tl.constexpr,
    MEAN: tl.constexpr,
):
    """Per row: loss (in the dtype of ``loss_ptr``), fully-masked flag (int8), p-margin
    ``p_t - max_{i!=t} p_i`` (float32); with ``STORE_GRAD`` the gradient of the row's loss, in
    the gradient's dtype, over ``count_ptr[0]`` (the active rows, float32: :func:`count_active`)
    when ``MEAN``."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    labels = tl.load(labels_ptr + rows, mask=row_ok, other=ignore_index)
    active = row_ok & (labels != ignore_index)
    valid = (labels >= 0) & (labels < n_cols)
    base = logits_ptr + rows.to(tl.int64)[:, None] * logits_stride
    grad_base = grad_ptr + rows.to(tl.int64)[:, None] * grad_stride
    if SINGLE:
        cols = tl.arange(0, BLOCK_C)
        col_ok = cols[None, :] < n_cols
        x = _load_tile(base, cols, n_cols, row_ok)
        m = tl.max(x, axis=1)
        e = tl.exp(x - m[:, None])
        s = tl.sum(e, axis=1)
        is_t = cols[None, :] == labels[:, None]
        x_t = tl.sum(tl.where(is_t, x, 0.0), axis=1)
        p = e / s[:, None]
        p_t = tl.sum(tl.where(is_t, p, 0.0), axis=1)
        keep = ((p >= _threshold(p_t, delta)[:, None]) & col_ok) | is_t
        e_t = tl.sum(tl.where(is_t, e, 0.0), axis=1)
        rest = tl.sum(tl.where(keep & ~is_t, e, 0.0), axis=1)
        others = tl.sum(tl.where(keep & ~is_t, 1, 0), axis=1)
        p_rest = tl.max(tl.where(is_t | ~col_ok, float("-inf"), p), axis=1)
    else:
        m = tl.full([BLOCK_M], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK_M], tl.float32)
        for start in range(0, n_cols, BLOCK_C):
            x = _load_tile(base, start + tl.arange(0, BLOCK_C), n_cols, row_ok)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
            m = m_new
        t_ok = row_ok & valid
        x_t = tl.load(base + tl.where(t_ok, labels, 0)[:, None], mask=t_ok[:, None], other=0.0)
        x_t = tl.sum(x_t.to(tl.float32), axis=1)
        e_t = tl.where(t_ok, tl.exp(x_t - m), 0.0)
        p_t = e_t / s
        c = _threshold(p_t, delta)
        rest = tl.zeros([BLOCK_M], tl.float32)
        others = tl.zeros([BLOCK_M], tl.int32)
        p_rest = tl.full([BLOCK_M], float("-inf"), tl.float32)
        for start in range(0, n_cols, BLOCK_C):
            cols = start + tl.arange(0, BLOCK_C)
            col_ok = cols[None, :] < n_cols
            x = _load_tile(base, cols, n_cols, row_ok)
            e = tl.exp(x - m[:, None])
            p = e / s[:, None]
            is_t = cols[None, :] == labels[:, None]
            keep = ((p >= c[:, None]) & col_ok) | is_t
            rest += tl.sum(tl.where(keep & ~is_t, e, 0.0), axis=1)
            others += tl.sum(tl.where(keep & ~is_t, 1, 0), axis=1)
            p_rest = tl.maximum(p_rest, tl.max(tl.where(is_t | ~col_ok, float("-inf"), p), axis=1))
    fully = others == 0
    dead = fully | ~active
    kept = e_t + rest
    loss = _row_loss(kept, rest, e_t, x_t, m)
    loss = tl.where(dead, 0.0, tl.where(valid, loss, float("nan")))
    tl.store(loss_ptr + rows, loss.to(loss_ptr.dtype.element_ty), mask=row_ok)
    tl.store(masked_ptr + rows, fully.to(tl.int8), mask=row_ok)
    tl.store(margin_ptr + rows, p_t - p_rest, mask=row_ok)
    if STORE_GRAD:
        row_scale = tl.full([BLOCK_M], 1.0, tl.float32)
        if MEAN:
            row_scale = row_scale / tl.load(count_ptr)
        row_scale = tl.where(dead, 0.0, row_scale)  # dead rows: exactly 0, even over 0 rows
        inv_kept = tl.where(dead, 0.0, row_scale / kept)
        if SINGLE:
            _store_grad(grad_base, cols, row_ok[:, None] & col_ok, keep, is_t, e, rest, inv_kept)
        else:
            for start in range(0, n_cols, BLOCK_C):
                cols = start + tl.arange(0, BLOCK_C)
                col_ok = cols[None, :] < n_cols
                x = _load_tile(base, cols, n_cols, row_ok)
                e = tl.exp(x - m[:, None])
                is_t = cols[None, :] == labels[:, None]
                keep = ((e / s[:, None] >= c[:, None]) & col_ok) | is_t
                ok = row_ok[:, None] & col_ok
                _store_grad(grad_base, cols, ok, keep, is_t, e, rest, inv_kept)


@triton.jit(do_not_specialize=["n_rows"])
def count_active(labels_ptr, count_ptr, n_rows, ignore_index, BLOCK: tl.constexpr):
    """One program: ``count_ptr[0]`` (float32) = the labels other than ``ignore_index``, the
    divisor of a mean, computed on the device so that the forward needs no host sync and no
    torch glue (a compare, a sum and a cast)."""
    total = tl.zeros([BLOCK], tl.int32)
    for start in range(0, n_rows, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        labels = tl.load(labels_ptr + idx, mask=idx < n_rows, other=ignore_index)
        total += tl.where(labels != ignore_index, 1, 0)
    tl.store(count_ptr, tl.sum(total, axis=0).to(tl.float32))


@triton.jit(do_not_specialize=["n_rows"])
def reduce_rows(
    rows_ptr, count_ptr, out_ptr, n_rows, scale, USE_COUNT: tl.constexpr, BLOCK: tl.constexpr
):
    """One program, a fixed order (deterministic): ``out_ptr[0]`` = the float32 sum of the
    per-row losses times ``scale``, over ``count_ptr[0]`` when ``USE_COUNT`` (0 rows: NaN, as
    torch's mean), written in the dtype of ``out_ptr`` (the loss's: no cast kernel after it)."""
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        idx = start + tl.arange(0, BLOCK)
        total += tl.load(rows_ptr + idx, mask=idx < n_rows, other=0.0).to(tl.float32)
    loss = tl.sum(total, axis=0) * scale
    if USE_COUNT:
        loss = loss / tl.load(count_ptr)
    tl.store(out_ptr, loss.to(out_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["n_rows"])
def scale_rows(
    grad_ptr,
    scale_ptr,
    scale_stride,
    n_rows,
    n_cols,
    grad_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """In place: row ``r`` of the gradient times ``scale[r * scale_stride]``. A block whose scales
    are all 1 (the usual ``loss.backward()`` of a reduced loss) neither reads nor writes."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    scale = tl.load(scale_ptr + rows * scale_stride, mask=row_ok, other=1.0).to(tl.float32)
    if tl.min(tl.where(scale == 1.0, 1, 0)) == 0:
        base = grad_ptr + rows.to(tl.int64)[:, None] * grad_stride
        for start in range(0, n_cols, BLOCK_C):
            cols = start + tl.arange(0, BLOCK_C)
            ok = row_ok[:, None] & (cols[None, :] < n_cols)
            grad = tl.load(base + cols[None, :], mask=ok, other=0.0).to(tl.float32)
            grad = (grad * scale[:, None]).to(grad_ptr.dtype.element_ty)
            tl.store(base + cols[None, :], grad, mask=ok)


@triton.jit
def _softplus_lse(x, keep):
    """``log(1 + sum_{j kept} e^{x_j})`` per row and ``e^{x_j} / (1 + sum)`` per kept entry
    (0 elsewhere): the softplus of the kept entries' logsumexp. ``log1p(e^y)`` for ``y < 0`` by
    Goldberg's log1p, so a row with little kept mass keeps its digits; exactly 0 (loss and
    gradient) where nothing is kept."""
    top = tl.max(tl.where(keep, x, float("-inf")), axis=1)
    top = tl.where(top == float("-inf"), 0.0, top)
    e = tl.where(keep, tl.exp(x - top[:, None]), 0.0)
    total = tl.sum(e, axis=1)
    lse = top + tl.log(total)  # -inf where nothing is kept
    small = tl.exp(-tl.abs(lse))
    u = 1.0 + small
    log1p = tl.where(u == 1.0, small, tl.log(u) * (small / tl.where(u == 1.0, 1.0, u - 1.0)))
    loss = tl.maximum(lse, 0.0) + log1p
    sigmoid = tl.where(lse >= 0.0, 1.0 / u, small / u)  # e^lse / (1 + e^lse)
    coef = tl.where(total > 0.0, sigmoid / total, 0.0)
    return loss, e * coef[:, None]


@triton.jit(do_not_specialize=["n_rows"])
def multilabel_as_forward(
    logits_ptr,
    grad_ptr,
    positive_ptr,
    loss_ptr,
    masked_ptr,
    gap_ptr,
    n_rows,
    n_cols,
    logits_stride,
    grad_stride,
    positive_stride,
    delta,
    row_scale,
    BLOCK_M: tl.constexpr,
    BLOCK_C: tl.constexpr,
    STORE_GRAD: tl.constexpr,
):
    """Multi-label AS-Softmax (multilabel.py's math) for rows that fit one block. Per row: the
    loss ``log(1 + sum_{kept i in Q} e^{o_i}) + log(1 + sum_{kept t in P} e^{-o_t})`` (float32),
    the fully-masked flag (int8) and the gap ``p_t^min - p_i^max`` (float32); with
    ``STORE_GRAD`` its gradient times ``row_scale`` (``1/N`` for a mean), in the gradient's
    dtype. ``positive_ptr``: the 0/1 targets as int8."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    cols = tl.arange(0, BLOCK_C)
    ok = row_ok[:, None] & (cols[None, :] < n_cols)
    offsets = rows.to(tl.int64)[:, None]
    x = _load_tile(logits_ptr + offsets * logits_stride, cols, n_cols, row_ok)
    pos = tl.load(positive_ptr + offsets * positive_stride + cols[None, :], mask=ok, other=0) != 0
    neg = ok & ~pos
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    p = e / tl.sum(e, axis=1)[:, None]
    p_pos_min = tl.min(tl.where(pos, p, float("inf")), axis=1)
    p_neg_max = tl.max(tl.where(neg, p, float("-inf")), axis=1)
    # Without a positive (or a negative) there is no p_t^min (p_i^max): nothing is masked.
    decidable = (tl.max(pos.to(tl.int32), axis=1) > 0) & (tl.max(neg.to(tl.int32), axis=1) > 0)
    keep_neg = neg & ~(decidable[:, None] & (p_pos_min[:, None] - p > delta))
    keep_pos = pos & ~(decidable[:, None] & (p - p_neg_max[:, None] > delta))
    loss_neg, grad_neg = _softplus_lse(x, keep_neg)
    loss_pos, grad_pos = _softplus_lse(-x, keep_pos)
    fully = (tl.max(keep_neg.to(tl.int32), axis=1) + tl.max(keep_pos.to(tl.int32), axis=1)) == 0
    loss = (loss_neg + loss_pos).to(loss_ptr.dtype.element_ty)
    tl.store(loss_ptr + rows, loss, mask=row_ok)
    tl.store(masked_ptr + rows, fully.to(tl.int8), mask=row_ok)
    tl.store(gap_ptr + rows, p_pos_min - p_neg_max, mask=row_ok)
    if STORE_GRAD:
        grad = (grad_neg - grad_pos) * row_scale
        grad_base = grad_ptr + offsets * grad_stride
        tl.store(grad_base + cols[None, :], grad.to(grad_ptr.dtype.element_ty), mask=ok)
