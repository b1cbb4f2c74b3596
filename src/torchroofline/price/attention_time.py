"""Flash attention's parallelism: one thread block per (batch × head) and block of
:data:`ATTENTION_QUERY_ROWS` query rows, each a serial loop over every key computing its rows'
whole head dimension.

The blocks run in waves, one block per SM at a time (:func:`attention_waves`); a wave takes at
least one block's serial loop (``EstimateParams.attention_wave_s``, applied in
:func:`~.estimate.kernel_gpu_s`), and the MMAs spread over the blocks only, never over the head
dimension or the keys (:func:`attention_wave_efficiency`, a share of the SMs). Counts are thread
blocks and waves.
"""


from __future__ import annotations

import math

from .kernel_load import GemmShape

#: Query rows per flash-attention thread block (FlashAttention-2's and CK's forward tile).
ATTENTION_QUERY_ROWS = 128


def attention_blocks(gemm: GemmShape) -> int:
    """Thread blocks of a flash-attention kernel: one per (batch × head) and block of
    :data:`ATTENTION_QUERY_ROWS` query rows; each computes its rows' whole head dimension over
    every key in a serial loop, so neither the head dimension nor the keys spread over SMs."""
    return gemm.batch * math.ceil(gemm.m / ATTENTION_QUERY_ROWS)


def attention_waves(gemm: GemmShape, sm_count: int) -> int:
    """Waves of a flash-attention kernel's :func:`attention_blocks`, one block per SM at a
    time."""
    return math.ceil(attention_blocks(gemm) / sm_count)


def attention_wave_efficiency(gemm: GemmShape, sm_count: int) -> float:
    """Share of the GPU a flash-attention kernel keeps busy: its blocks over its waves' SMs
    (a head of 512 over 4,500 queries: 36 blocks, 36 of 304 CUs). Not
    :func:`~.gemm_time.wave_efficiency`, whose tiles split the output's columns (the head
    dimension)."""
    return attention_blocks(gemm) / (attention_waves(gemm, sm_count) * sm_count)
