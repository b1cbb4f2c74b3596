"""Normalised values summed over their normalised dims are constants (or the shift).

Over the reals, for finite inputs:

- a softmax's rows sum to 1: Σ_D softmax(x, d) = |D| / n_d for any summed dims D that hold
  d (so ``softmax(x, -1).sum((-2, -1))`` is the row count), and ``log_softmax(x).exp()`` is
  the softmax;
- a normalised value has mean 0 over its normalised dims: Σ (x − μ)/√(σ² + ε) = 0, so with a
  shift β and a scale γ constant along those dims, Σ_D (γ·n + β) = Σ_D β for D holding them
  (LayerNorm without a weight, GroupNorm without a weight or with one channel a group, which
  InstanceNorm and BatchNorm with batch statistics are: γ is per channel).

The sum reaches the normalising op through :mod:`.sums`' walk (views, scales, shifts: ``(2 *
softmax(x)).sum(-1)`` is 2), and the normalising op may be read by others (it stays; the sum is
the constant anyway).

**Finite values.** The identities need a finite row: a softmax row masked to −∞ throughout is
NaN (0 for ``_safe_softmax``), not 1. The inputs a tolerance check draws are finite, so only a
−∞ (or ∞, NaN) the program writes itself matters: a softmax whose input may hold one (a
``masked_fill`` or ``where`` with a non-finite fill, an added constant with non-finite
values, within a few ops upstream) takes the rule only where that mask is a known constant
(:func:`..demand.known_values`: a causal mask from ``tril`` or a buffer) with no fully masked
row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ...costs import aten
from ...trace.refs import TensorRef, TracedOp
from ._core import Graph, folded
from .linear import _summed
from .sums import BATCH_NORMS, Summed, tensor_arguments, terminal

SOFTMAX_RULE = "softmax rows sum to 1"
_SOFTMAXES = [aten._softmax, aten.softmax, aten._safe_softmax]
#: how many ops above a softmax are searched for a non-finite fill
_MASK_DEPTH = 8


def _keep_shape(shape: Sequence[int], dims: Sequence[int]) -> tuple[int, ...]:
    return tuple(1 if d in dims else n for d, n in enumerate(shape))


def _constant(rule: str, shape: Sequence[int], dims: Sequence[int], value: float,
              dtype: str) -> Summed:
    keep, kind = _keep_shape(shape, dims), getattr(torch, dtype)
    return Summed(rule, (), lambda: torch.full(keep, value, dtype=kind), shared=True,
                  value=value)


def _softmax_sum(graph: Graph, softmax: TracedOp, dims: tuple[int, ...],
                 out: TensorRef) -> Summed | None:
    """The row count Σ_D softmax sums to, where D holds the softmax's dim and no row of its
    input may be masked throughout."""
    rank = len(out.shape)
    dim = softmax.argument("dim") % rank
    source = softmax.reads[0]
    if (dim not in dims and out.shape[dim] > 1) or _may_mask_a_row(graph, source, dim):
        return None
    rows = folded(out.shape, dims) / out.shape[dim]
    return _constant(SOFTMAX_RULE, out.shape, dims, rows, out.dtype)


@terminal(_SOFTMAXES)
def softmax_rows(graph: Graph, index: int, dims: tuple[int, ...]) -> Summed | None:
    op = graph.op(index)
    return _softmax_sum(graph, op, dims, op.writes[0])


@terminal([aten.exp])
def exp_of_log_softmax(graph: Graph, index: int, dims: tuple[int, ...]) -> Summed | None:
    """exp(log_softmax(x)) = softmax(x)."""
    op = graph.op(index)
    found = graph.producer(op.reads[0])
    if found is None or found[1].func is None or (
        found[1].func.overloadpacket not in (aten._log_softmax, aten.log_softmax)
    ) or op.reads[0] != found[1].writes[0]:
        return None
    return _softmax_sum(graph, found[1], dims, op.writes[0])


# --- a −∞ the program writes itself -------------------------------------------------------------


def _non_finite(value: object) -> bool:
    if isinstance(value, torch.Tensor):
        return not bool(torch.isfinite(value).all())
    return isinstance(value, float) and not math.isfinite(value)


def _full_row(mask: torch.Tensor | None, shape: Sequence[int], dim: int) -> bool:
    """Whether ``mask`` (None: unknown) may be true along a whole line of ``dim``."""
    if mask is None or not torch.broadcast_shapes(tuple(mask.shape), tuple(shape)) == tuple(
        shape
    ):
        return True
    return bool(mask.expand(tuple(shape)).all(dim).any())


def _masks_a_row(graph: Graph, op: TracedOp, shape: Sequence[int], dim: int) -> bool:
    """Whether ``op`` writes a non-finite value that may fill a whole line along ``dim`` of its
    output (``shape``, the softmax input's)."""
    packet = op.func.overloadpacket if op.func is not None else None
    if packet is aten.masked_fill:
        mask = graph.value(op.reads[1])
        return _full_row(None if mask is None else mask.bool(), shape, dim)
    if packet is aten.where and len(op.reads) == 3:
        condition = graph.value(op.reads[0])
        chosen = [None, None] if condition is None else [condition.bool(), ~condition.bool()]
        return any(
            _non_finite_read(graph, ref) and _full_row(mask, shape, dim)
            for ref, mask in zip(op.reads[1:], chosen, strict=True)
        )
    if any(_non_finite(a) for a in op.args if not isinstance(a, torch.Tensor)):
        return True
    for ref in op.reads:
        value = graph.value(ref)
        if value is not None and _non_finite(value):
            return _full_row(~torch.isfinite(value), shape, dim)
    return any(_non_finite_read(graph, ref) for ref in op.reads)


def _non_finite_read(graph: Graph, ref: TensorRef) -> bool:
    """Whether the value ``ref`` reads may hold a non-finite constant: known with one, or
    written by an op with a non-finite number among its arguments (``scalar_tensor(-inf)``)."""
    value = graph.value(ref)
    if value is not None:
        return _non_finite(value)
    found = graph.producer(ref)
    return found is not None and any(
        _non_finite(a) for a in found[1].args if not isinstance(a, torch.Tensor)
    )


def _may_mask_a_row(graph: Graph, source: TensorRef, dim: int) -> bool:
    """Whether a row along ``dim`` of the softmax input ``source`` may be non-finite
    throughout: an op up to :data:`_MASK_DEPTH` above it writes a non-finite value where the
    mask that places it is unknown or covers a whole row (see the module doc). A mask on a
    value of another shape than the softmax input is taken as unknown. Constants (known
    values) are judged where they are used, not searched."""
    known = graph.value(source)
    if known is not None:
        return _full_row(~torch.isfinite(known), source.shape, dim)
    seen: set[int] = set()
    frontier = [source]
    for _ in range(_MASK_DEPTH):
        above = []
        for ref in frontier:
            found = graph.producer(ref)
            if found is None or found[0] in seen or graph.value(ref) is not None:
                continue
            index, op = found
            seen.add(index)
            if _writes_non_finite(graph, op) and (
                op.writes[0].shape != source.shape or _masks_a_row(graph, op, source.shape, dim)
            ):
                return True
            above.extend(op.reads)
        frontier = above
    return False


def _writes_non_finite(graph: Graph, op: TracedOp) -> bool:
    """Whether ``op`` may place a non-finite constant: a non-finite number among its arguments
    or a read that may hold one."""
    return any(_non_finite(a) for a in op.args if not isinstance(a, torch.Tensor)) or any(
        _non_finite_read(graph, ref) for ref in op.reads
    )


# --- normalisations have mean 0 over their normalised dims --------------------------------------


def _shift_sum(rule: str, graph: Graph, index: int, dims: tuple[int, ...],
               bias: TensorRef | None, channel: bool) -> Summed:
    """Σ_D β (0 without a shift) in the keep shape of the op's output; ``channel``: β is per
    channel (dim 1), else it spans the trailing dims."""
    out = graph.op(index).writes[0]
    if bias is None:
        return _constant(f"{rule} sum to 0", out.shape, dims, 0, out.dtype)
    keep, shape = _keep_shape(out.shape, dims), out.shape

    def build(b: torch.Tensor) -> torch.Tensor:
        if channel:
            b = b.reshape(-1, *(1,) * (len(shape) - 2))
        return _summed(b.to(getattr(torch, out.dtype)), shape, dims).expand(keep).contiguous()

    return Summed(f"{rule} sum to the shift", (bias,), build, shared=True)


def _covers(dims: Sequence[int], normalised: Sequence[int], shape: Sequence[int]) -> bool:
    return all(d in dims for d in normalised if shape[d] > 1)


@terminal([aten.native_layer_norm])
def layer_norm_rows(graph: Graph, index: int, dims: tuple[int, ...]) -> Summed | None:
    """Σ_D layer_norm(x) = Σ_D β without a weight, D holding the normalised dims."""
    op = graph.op(index)
    tensors, shape = tensor_arguments(op), op.writes[0].shape
    normalised = range(len(shape) - len(op.argument("normalized_shape")), len(shape))
    if "weight" in tensors or not _covers(dims, normalised, shape):
        return None
    return _shift_sum("normalised rows", graph, index, dims, tensors.get("bias"), False)


@terminal([aten.native_group_norm])
def group_norm_rows(graph: Graph, index: int, dims: tuple[int, ...]) -> Summed | None:
    """Σ_D group_norm(x) = Σ_D β, D holding the spatial dims and (more than one channel a
    group) the channels, with no weight there (γ varies along a group's channels)."""
    op = graph.op(index)
    tensors, shape = tensor_arguments(op), op.writes[0].shape
    per_group = shape[1] // op.argument("group")
    normalised = [*range(2, len(shape)), *([1] if per_group > 1 else [])]
    if not _covers(dims, normalised, shape) or (per_group > 1 and "weight" in tensors):
        return None
    return _shift_sum("normalised groups", graph, index, dims, tensors.get("bias"), True)


@terminal(BATCH_NORMS)
def batch_norm_channels(graph: Graph, index: int, dims: tuple[int, ...]) -> Summed | None:
    """Σ_D batch_norm(x) = Σ_D β with batch statistics (training mode; InstanceNorm is one
    on a (1, N·C, …) view), D holding the batch and spatial dims: γ is per channel."""
    op = graph.op(index)
    tensors, shape = tensor_arguments(op), op.writes[0].shape
    if not op.argument("training", False) or not _covers(
        dims, [0, *range(2, len(shape))], shape
    ):
        return None
    return _shift_sum("normalised channels", graph, index, dims, tensors.get("bias"), True)
