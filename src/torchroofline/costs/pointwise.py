"""Rules of the pointwise ops: FLOPs per output element, the minimum a kernel must do."""

from __future__ import annotations

from ..trace.aten_ops import aten
from ._core import (
    Category,
    OpKey,
    _per_output_element,
    _template_reads,
    register,
)

# --- Pointwise: FLOPs per output element, the minimum a kernel must do ------------------------
# 1 FLOP for each basic arithmetic, comparison or transcendental instruction; composites are
# the sum of their parts. A bound needs the minimum, so nothing is counted twice.

POINTWISE_FLOPS_PER_ELEMENT: dict[OpKey, int] = {
    # casts, copies and fills move data and do no arithmetic
    aten._to_copy: 0, aten.to: 0, aten.copy: 0, aten.clone: 0, aten.contiguous: 0, aten.fill: 0,
    aten.zero: 0, aten.zeros: 0, aten.ones: 0, aten.full: 0, aten.zeros_like: 0,
    aten.ones_like: 0, aten.full_like: 0, aten.new_zeros: 0, aten.new_ones: 0, aten.new_full: 0,
    aten.scalar_tensor: 0, aten.arange: 0,
    aten.masked_fill: 0, aten.where: 0, aten.tril: 0, aten.triu: 0, aten.lift: 0,
    # generators, like arange
    aten.triu_indices: 0, aten.tril_indices: 0, aten.eye: 0, aten.range: 0,
    aten.fft_fftfreq: 0, aten.fft_rfftfreq: 0, aten.complex: 0,
    aten._add_relu: 2,
    aten.linalg_cross: 3,  # each component a·b − c·d
    aten.polar: 4,  # r·cos θ, r·sin θ per complex output
    aten.linspace: 2,  # start + i·step: one multiply-add
    aten.logspace: 3,  # base ** (start + i·step): a multiply-add and a power
    # one instruction each
    aten.add: 1, aten.sub: 1, aten.rsub: 1, aten.mul: 1, aten.div: 1, aten.neg: 1, aten.abs: 1,
    aten.relu: 1,
    aten.exp: 1, aten.exp2: 1, aten.log: 1, aten.log2: 1, aten.log10: 1, aten.sqrt: 1,
    aten.rsqrt: 1, aten.tanh: 1,
    aten.erf: 1, aten.erfc: 1, aten.sin: 1, aten.cos: 1, aten.tan: 1, aten.reciprocal: 1,
    aten.pow: 1, aten.square: 1,
    aten.sign: 1, aten.floor: 1, aten.ceil: 1, aten.round: 1,
    aten.round.decimals: 3,  # x·10^d, round, ÷10^d
    aten.div.Tensor_mode: 2, aten.div.Scalar_mode: 2,  # divide, then floor or trunc
    aten.trunc: 1, aten.frac: 1, aten.maximum: 1,
    aten.minimum: 1, aten.clamp: 1, aten.clamp_min: 1, aten.clamp_max: 1, aten.remainder: 1,
    aten.fmod: 1,
    aten.eq: 1, aten.ne: 1, aten.lt: 1, aten.le: 1, aten.gt: 1, aten.ge: 1, aten.logical_not: 1,
    aten.logical_and: 1,
    aten.logical_or: 1, aten.bitwise_and: 1, aten.bitwise_or: 1, aten.bitwise_not: 1, aten.isnan: 1,
    aten.threshold: 1, aten.hardtanh: 1, aten.relu6: 1, aten.expm1: 1, aten.log1p: 1, aten.atan: 1,
    aten.floor_divide: 1,
    # composites: sum of parts
    aten.sigmoid: 3,  # exp + add + div
    aten.silu: 4,  # x · sigmoid(x)
    aten.hardsigmoid: 3,  # add, div, clamp
    aten.hardswish: 4,  # hardsigmoid + mul
    aten.softplus: 3,  # exp, add, log
    aten.mish: 6,  # softplus + tanh + mul
    aten.elu: 3,  # compare, exp, sub·mul (one select)
    aten.selu: 4,
    aten.celu: 3,
    aten.leaky_relu: 2,  # compare + mul
    aten.prelu: 2,
    aten._prelu_kernel: 2,
    aten.gelu: 4,  # erf form: x · 0.5 · (1 + erf(x/√2)) → mul, erf, add, mul (constants folded)
    aten.lerp: 2,
    aten.addcmul: 2,
    aten.addcdiv: 2,
    aten.logit: 3,
    aten.hardshrink: 2,
    aten.softshrink: 2,
    aten.log_sigmoid_forward: 4,
    aten.glu: 4,  # sigmoid of one half times the other, per output element
    aten.xlogy: 2,
    aten.sigmoid_backward: 2,
    # random number generation (Philox): counted as one FLOP per element, the minimal figure
    aten.rand: 1, aten.randn: 1, aten.rand_like: 1, aten.randn_like: 1, aten.normal: 1,
    aten.uniform: 1,
    aten.bernoulli: 1, aten.randint: 1, aten.randint_like: 1, aten.native_dropout: 2,
    aten.dropout: 2,
    aten.exponential: 1, aten.random: 1, aten.cauchy: 1, aten.log_normal: 1, aten.geometric: 1,
    aten._fused_dropout: 2, aten._masked_scale: 1,
}

for _name, _flops in POINTWISE_FLOPS_PER_ELEMENT.items():
    register([_name], Category.POINTWISE, fusible=True, reads=_template_reads(_name))(
        _per_output_element(_flops)
    )
