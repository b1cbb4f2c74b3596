"""Rules of attention: SDPA's backends in (batch, heads, length, E) and the fused kernels in
(batch, length, heads, E), with causal and windowed masks."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.utils.flop_counter import sdpa_flop_count

from ..trace.aten_ops import aten
from ..trace.refs import TracedOp
from ._core import (
    Category,
    FlopCount,
    FlopFormula,
    MatmulKind,
    register,
)


@register(
    # the intercepted call, and the backends it decomposes into where interception cannot reach
    # (SDPA called inside another torch function such as F.multi_head_attention_forward)
    [aten.scaled_dot_product_attention, aten._scaled_dot_product_efficient_attention,
     aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_cudnn_attention,
     aten._scaled_dot_product_flash_attention_for_cpu,
     aten._scaled_dot_product_fused_attention_overrideable],
    Category.COMPUTE,
    fusible=False,
)
def attention_flops(op: TracedOp) -> FlopCount:
    """The two matmuls of attention (flop_counter's ``sdpa_flop_count``, query heads a multiple
    of key/value heads); with ``is_causal`` only the unmasked score entries (top-left aligned,
    as SDPA documents ``is_causal``)."""
    query, key, value = (_as_4d(t.shape) for t in op.args[:3])
    flops = sdpa_flop_count(query, key, value)
    if op.argument("is_causal"):
        query_len, key_len = query[2], key[2]
        # integer arithmetic: both matmuls' FLOPs are a multiple of L·S, so this is exact
        flops = flops * kept_pairs(query_len, key_len, high=0) // (query_len * key_len)
    return FlopCount(tensor=int(flops), kind=MatmulKind.ATTENTION)


def _as_4d(shape: torch.Size) -> tuple[int, int, int, int]:
    """(…, L, E) → (batch, heads, L, E): leading dims fold into the batch."""
    *lead, length, embed = shape
    if len(lead) >= 2:
        return (math.prod(lead[:-1]), lead[-1], length, embed)
    return (1, lead[0] if lead else 1, length, embed)


def kept_pairs(queries: int, keys: int, low: int | None = None, high: int | None = None) -> int:
    """Score entries (query i, key j), 0 ≤ i < ``queries``, 0 ≤ j < ``keys``, that a banded mask
    keeps: row i keeps the keys i + ``low`` ≤ j ≤ i + ``high`` (None: no limit on that side).
    A causal mask aligned top-left is ``high=0``; aligned bottom-right, ``high=keys − queries``.
    In closed form: row i keeps clamp(i + high + 1, 0, keys) − clamp(i + low, 0, keys)."""
    reach = queries + keys  # a shift past every key: no limit on that side
    high = reach if high is None else high
    low = -reach if low is None else low
    return _clamped_sum(high + 1, queries, keys) - _clamped_sum(low, queries, keys)


def _clamped_sum(start: int, count: int, limit: int) -> int:
    """Σ clamp(x, 0, limit) over x = start … start + count − 1."""
    return _ramp(max(start + count, 0), limit) - _ramp(max(start, 0), limit)


def _ramp(n: int, limit: int) -> int:
    """Σ min(x, limit) over x = 0 … n − 1."""
    if n <= limit + 1:
        return n * (n - 1) // 2
    return limit * (limit + 1) // 2 + (n - limit - 1) * limit


# The fused kernels SDPA dispatches to on CUDA take (batch, length, heads, E), not SDPA's
# (batch, heads, length, E), and spell their masks their own way, so flop_counter's formulas for
# them (which read the shapes as (batch, heads, length, E)) do not apply.


def flash_band(op: TracedOp, queries: int, keys: int) -> tuple[int | None, int | None]:
    """(low, high) of the keys row i of ``_flash_attention_*`` attends, relative to i (see
    :func:`kept_pairs`). FlashAttention-2 aligns its mask bottom-right: query i attends keys
    i + S − L − window_size_left … i + S − L + window_size_right (−1 or None: unlimited), and
    ``is_causal`` sets window_size_right to 0 (flash_api.cpp, ``mha_fwd``)."""
    shift = keys - queries
    left, right = op.argument("window_size_left"), op.argument("window_size_right")
    if op.argument("is_causal"):
        right = 0
    low = None if left is None or left < 0 else shift - left
    high = None if right is None or right < 0 else shift + right
    return low, high


#: ``custom_mask_type`` of ``_efficient_attention_*`` (xformers' MaskType): the shift of the causal
#: diagonal, top-left (1: key j ≤ query i) or bottom-right (2: j ≤ i + S − L); 0 is no mask.
EFFICIENT_CAUSAL_SHIFT: dict[int, Callable[[int, int], int]] = {
    1: lambda queries, keys: 0,
    2: lambda queries, keys: keys - queries,
}


def efficient_band(op: TracedOp, queries: int, keys: int) -> tuple[int | None, int | None]:
    """(low, high) for ``_efficient_attention_*``: the causal mask of ``custom_mask_type``, and
    a local ``window_size`` w > 0 keeps at least the w keys that end at the diagonal (xformers'
    local masks; fewer when the kind of window is not known, as a bound must)."""
    shift_of = EFFICIENT_CAUSAL_SHIFT.get(op.argument("custom_mask_type") or 0)
    shift = shift_of(queries, keys) if shift_of else 0
    window = op.argument("window_size")
    low = shift - (window - 1) if window and window > 0 else None
    high = shift if shift_of or low is not None else None
    return low, high


Band = Callable[[TracedOp, int, int], tuple[int | None, int | None]]


def _sequence_lengths(op: TracedOp) -> list[tuple[int, int]]:
    """(query length, key length) of each sequence: B of (L, S) for (B, L, H, E) inputs; for
    packed variable-length ones (the cumulative offsets ``cum_seq_q``/``cu_seqlens_q`` given),
    the lengths the offsets hold, none when their values are not known (a bound then charges
    nothing for the sequences it cannot see)."""
    query, key = op.argument("query"), op.argument("key")
    offsets = [op.argument(name) for name in ("cum_seq_q", "cum_seq_k", "cu_seqlens_q",
                                              "cu_seqlens_k")]
    offsets = [t for t in offsets if t is not None]
    if not offsets:
        return [(query.shape[1], key.shape[1])] * query.shape[0]
    if any(t.is_meta or is_fake(t) for t in offsets):
        return []
    query_offsets, key_offsets = (t.tolist() for t in offsets)
    return [(q1 - q0, k1 - k0) for q0, q1, k0, k1 in zip(
        query_offsets, query_offsets[1:], key_offsets, key_offsets[1:], strict=False)]


def _fused_attention_flops(band: Band, matmuls: Callable[[int, int], int]) -> FlopFormula:
    """FLOPs of a (batch, length, heads, E) attention kernel: for each sequence and query head,
    ``matmuls(E, Ev)`` FLOPs per score entry the mask keeps (grouped-query key/value heads are
    shared, their products are not)."""

    def formula(op: TracedOp) -> FlopCount:
        query, value = op.argument("query"), op.argument("value")
        heads, embed, value_embed = query.shape[-2], query.shape[-1], value.shape[-1]
        pairs = sum(kept_pairs(queries, keys, *band(op, queries, keys))
                    for queries, keys in _sequence_lengths(op))
        return FlopCount(tensor=heads * pairs * matmuls(embed, value_embed),
                         kind=MatmulKind.ATTENTION)

    return formula


def forward_flops_per_entry(embed: int, value_embed: int) -> int:
    """Per kept score entry: its dot product S = Q·Kᵀ (2·E) and its share of O = P·V (2·Ev)."""
    return 2 * (embed + value_embed)


def backward_flops_per_entry(embed: int, value_embed: int) -> int:
    """Per kept score entry, flop_counter's ``sdpa_backward_flop_count`` terms: S = Q·Kᵀ
    recomputed (2·E), dP = dO·Vᵀ (2·Ev), dV = Pᵀ·dO (2·Ev), dQ = dS·K (2·E), dK = dSᵀ·Q
    (2·E): 2.5× the forward when E = Ev."""
    return 2 * (3 * embed + 2 * value_embed)


register([aten._flash_attention_forward], Category.COMPUTE, fusible=False)(
    _fused_attention_flops(flash_band, forward_flops_per_entry)
)
register([aten._efficient_attention_forward], Category.COMPUTE, fusible=False)(
    _fused_attention_flops(efficient_band, forward_flops_per_entry)
)
