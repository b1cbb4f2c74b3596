"""Rules of the FFTs (cuFFT): the lowest published operation counts."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..trace.aten_ops import aten
from ..trace.refs import TracedOp
from ._core import (
    Category,
    FlopCount,
    FlopFormula,
    register,
)

# --- FFTs: cuFFT, vector work ------------------------------------------------------------------


def complex_fft_flops(points: int) -> int:
    """FLOPs of one complex FFT of ``points`` points, kept below every published count. The
    radix-2 Cooley–Tukey count, 5·N·log2 N (Cooley & Tukey 1965; the figure FFTW's benchmarks
    report, fftw.org/speed/method.html), is not the least: split radix needs 4·N·log2 N − 6·N + 8
    (Yavne 1968) and the lowest known count is (34/9)·N·log2 N − (124/27)·N − O(log N) (Johnson &
    Frigo, IEEE Trans. Signal Process. 55(1), 2007). A bound takes the lowest, with the linear
    term rounded to −5·N so the charge stays below it at every size. Below 4 points that count
    is under the plain floor of any linear transform whose outputs each read every input: the
    N complex outputs are 2N distinct real linear forms, each of at least N real inputs (of
    each input its real or its imaginary part: |w| = 1), so N − 1 adds for the first and one
    more for each other, 3N − 2 (a 2-point DFT, (a + b, a − b), is exactly 4 real adds)."""
    if points < 2:
        return 0
    return max(3 * points - 2,
               math.floor(34 / 9 * points * math.log2(points)) - 5 * points)


def real_fft_flops(points: int) -> int:
    """FLOPs of one real-input (or real-output) FFT of ``points`` points: half the complex
    count's leading term, (17/9)·N·log2 N (Johnson & Frigo 2007 give the real-data count with
    this leading term), with the linear term rounded down to −4·N. Below 7 points, at least
    the plain floor of its N + ⌊N/2⌋ − 1 real ops: a c2r's N outputs are distinct real forms,
    the first of the ⌊N/2⌋ + 1 real parts of its input (N − 1 for an r2c's N inputs, its
    N distinct non-constant real output parts: more)."""
    if points < 2:
        return 0
    return max(points + points // 2 - 1,
               math.floor(17 / 9 * points * math.log2(points)) - 4 * points)


def _fft_flops(
    per_signal: Callable[[int], int], signal_shape: Callable[[TracedOp], Any]
) -> FlopFormula:
    """A multi-dimensional FFT is a 1-D FFT along each transformed dimension in turn: along
    dimension d of length n, numel/n transforms of n points. Real transforms are charged as
    real along every dimension, below what the complex passes over the half spectrum cost."""

    def formula(op: TracedOp) -> FlopCount:
        shape = signal_shape(op)
        total = math.prod(shape)
        flops = sum(total // shape[d] * per_signal(shape[d]) for d in op.args[1] if shape[d])
        return FlopCount(vector=flops)

    return formula


# c2r transforms the output's real signal (last dim ``last_dim_size``); the others their input
register([aten._fft_c2c], Category.COMPUTE, fusible=False)(
    _fft_flops(complex_fft_flops, lambda op: op.args[0].shape)
)
register([aten._fft_r2c], Category.COMPUTE, fusible=False)(
    _fft_flops(real_fft_flops, lambda op: op.args[0].shape)
)
register([aten._fft_c2r], Category.COMPUTE, fusible=False)(
    _fft_flops(real_fft_flops, lambda op: op.output.shape)
)
