"""Calls of every overload in the cost registry, for the standing sweep (test_sweep.py).

A call is built from the overload's schema (:func:`schema_call`: a tensor of the drawn shape for
each tensor argument, index and mask arguments as int64 and bool, schema defaults elsewhere),
or, where an op needs shapes of its own (a matrix product, a convolution, a pool), by its entry
in :data:`CALLS`. Tensors are meta tensors, except for ops with no meta kernel
(:data:`NEEDS_DATA`), which run on small CPU tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._ops import OpOverload, OpOverloadPacket

aten = torch.ops.aten


@dataclass(frozen=True)
class Maker:
    """Tensors of one float dtype, on meta (or on the CPU, zero-filled, for ``data``)."""

    dtype: torch.dtype
    data: bool = False

    @property
    def device(self) -> str:
        return "cpu" if self.data else "meta"

    def f(self, *shape: int) -> torch.Tensor:
        return torch.zeros(shape, dtype=self.dtype, device=self.device)

    def c(self, *shape: int) -> torch.Tensor:
        complex_dtype = torch.complex64 if self.dtype == torch.float32 else torch.complex32
        return torch.zeros(shape, dtype=complex_dtype, device=self.device)

    def i(self, *shape: int, dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, device=self.device)

    def b(self, *shape: int) -> torch.Tensor:
        return torch.ones(shape, dtype=torch.bool, device=self.device)


Call = tuple[tuple, dict]
#: (maker, n) → a call; n (2 … 5) is the drawn size
Builder = Callable[[Maker, int], Call]

_INDEX_NAMES = frozenset({"index", "indices", "target"})
_MASK_NAMES = frozenset({"mask", "condition"})


class Unbuildable(Exception):
    """The schema has an argument no generic value fits."""


def _generic_value(argument: Any, shape: tuple[int, ...], make: Maker) -> Any:
    kind = str(argument.type)
    name = argument.name
    if argument.has_default_value():
        return ...
    if kind.startswith("Optional["):
        return None
    if kind == "Tensor":
        if name in _INDEX_NAMES:
            return make.i(*shape)
        if name in _MASK_NAMES:
            return make.b(*shape)
        return make.f(*shape)
    if kind == "List[Tensor]":
        return [make.f(*shape), make.f(*shape)]
    if kind in ("number", "Scalar"):
        return 2
    if kind in ("int", "SymInt"):
        return -1 if name == "dim" else 1
    if kind in ("List[int]", "List[SymInt]"):
        if name in ("dim", "dims"):
            return [-1]
        if name in ("size", "shape", "output_size"):
            return list(shape)
        return [1] * len(shape)
    if kind == "bool":
        return False
    if kind == "float":
        return 0.5
    if kind == "str":
        return "sum"
    if kind == "ScalarType":
        return make.dtype
    raise Unbuildable(kind)


def schema_call(func: OpOverload, make: Maker, n: int) -> Call:
    """A call of ``func`` on (2, n, n + 1) tensors, every argument without a default filled."""
    shape = (2, n, n + 1)
    args, kwargs = [], {}
    for argument in func._schema.arguments:
        value = _generic_value(argument, shape, make)
        if value is ...:
            continue
        if argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    return tuple(args), kwargs


def _attention_bhle(make: Maker, n: int) -> Call:
    return (make.f(2, 4, n, 8), make.f(2, 2, n + 2, 8), make.f(2, 2, n + 2, 8)), {}


def _pool(dims: int) -> Builder:
    return lambda make, n: ((make.f(2, 3, *[2 * n] * dims), [2] * dims), {})


def _square(make: Maker, n: int) -> Call:
    return (make.f(2, n, n),), {}


def _pad(dims: int) -> Builder:
    return lambda make, n: ((make.f(2, 3, *[n + 1] * dims), [1] * 2 * dims), {})


def _resample(dims: int) -> Builder:
    return lambda make, n: ((make.f(2, 3, *[n] * dims), [2 * n] * dims, False), {})


def _nearest(dims: int) -> Builder:
    return lambda make, n: ((make.f(2, 3, *[n] * dims), [2 * n] * dims), {})


def _direct_conv(dims: int, depthwise: bool = False, dilation: bool = True) -> Builder:
    def build(make: Maker, n: int) -> Call:
        channels = 3
        weight = make.f(channels if depthwise else 4, 1 if depthwise else channels, *[3] * dims)
        args = [make.f(2, channels, *[n + 3] * dims), weight, [3] * dims, None, [1] * dims,
                [1] * dims]
        if dilation:
            args.append([1] * dims)
        return tuple(args), {}

    return build


def _transposed_conv(dims: int) -> Builder:
    return lambda make, n: ((make.f(2, 3, *[n] * dims), make.f(3, 4, *[3] * dims), [3] * dims),
                            {})


#: Calls of the ops :func:`schema_call` cannot build, by packet name.
CALLS: dict[str, Builder] = {
    "permute": lambda m, n: ((m.f(2, n, 3), [2, 0, 1]), {}),
    "t": lambda m, n: ((m.f(n, 3),), {}),
    "split_with_sizes": lambda m, n: ((m.f(2, n + 1), [1, n]), {"dim": 1}),
    "permute_copy": lambda m, n: ((m.f(2, n, 3), [2, 0, 1]), {}),
    "t_copy": lambda m, n: ((m.f(n, 3),), {}),
    "split_with_sizes_copy": lambda m, n: ((m.f(2, n + 1), [1, n]), {"dim": 1}),
    "unsafe_split_with_sizes": lambda m, n: ((m.f(2, n + 1), [1, n]), {"dim": 1}),
    "view_as_real": lambda m, n: ((m.c(2, n),), {}),
    "view_as_complex": lambda m, n: ((m.f(n, 2),), {}),
    "unflatten": lambda m, n: ((m.f(2, 2 * n), 1, [2, n]), {}),
    "empty_permuted": lambda m, n: (([2, n], [1, 0]), {}),
    "linalg_cross": lambda m, n: ((m.f(n, 3), m.f(n, 3)), {}),
    "clamp": lambda m, n: ((m.f(2, n), 0.0, 1.0), {}),
    "prelu": lambda m, n: ((m.f(2, 3, n), m.f(3)), {}),
    "multi_margin_loss": lambda m, n: ((m.f(n, 4), m.i(n)), {}),
    "multilabel_margin_loss_forward": lambda m, n: ((m.f(n, 4), m.i(n, 4), 1), {}),
    "linalg_vector_norm": lambda m, n: ((m.f(2, n), 2), {}),
    "native_group_norm": lambda m, n: ((m.f(2, 4, n), m.f(4), m.f(4), 2, 4, n, 2, 1e-5), {}),
    "instance_norm": lambda m, n: ((m.f(2, 3, n), None, None, None, None, True, 0.1, 1e-5,
                                    False), {}),
    "binary_cross_entropy_with_logits": lambda m, n: ((m.f(2, n), m.f(2, n)), {}),
    "kl_div": lambda m, n: ((m.f(2, n), m.f(2, n)), {}),
    "_adaptive_avg_pool3d": lambda m, n: ((m.f(2, 3, n, n, n), [1, 1, 1]), {}),
    "adaptive_avg_pool1d": lambda m, n: ((m.f(2, 3, 2 * n), [2]), {}),
    "adaptive_avg_pool2d": lambda m, n: ((m.f(2, 3, 2 * n, 2 * n), [2, 2]), {}),
    "adaptive_avg_pool3d": lambda m, n: ((m.f(2, 3, n, n, n), [1, 1, 1]), {}),
    "adaptive_max_pool1d": lambda m, n: ((m.f(2, 3, 2 * n), [2]), {}),
    "adaptive_max_pool2d": lambda m, n: ((m.f(2, 3, 2 * n, 2 * n), [2, 2]), {}),
    "adaptive_max_pool3d": lambda m, n: ((m.f(2, 3, n, n, n), [1, 1, 1]), {}),
    "nll_loss_forward": lambda m, n: ((m.f(n, 4), m.i(n), None, 1, -100), {}),
    "nll_loss": lambda m, n: ((m.f(n, 4), m.i(n)), {}),
    "nll_loss2d_forward": lambda m, n: ((m.f(2, 4, n, n), m.i(2, n, n), None, 1, -100), {}),
    "trace": lambda m, n: ((m.f(n, n + 1),), {}),
    "native_batch_norm": lambda m, n: ((m.f(2, 3, n), m.f(3), m.f(3), m.f(3), m.f(3), True, 0.1,
                                        1e-5), {}),
    "max_pool1d": _pool(1), "max_pool2d": _pool(2), "max_pool3d": _pool(3),
    "max_pool2d_with_indices": _pool(2), "max_pool3d_with_indices": _pool(3),
    "avg_pool1d": _pool(1), "avg_pool2d": _pool(2), "avg_pool3d": _pool(3),
    "mm": lambda m, n: ((m.f(n, 3), m.f(3, n + 1)), {}),
    "addmm": lambda m, n: ((m.f(n, n + 1), m.f(n, 3), m.f(3, n + 1)), {}),
    "bmm": lambda m, n: ((m.f(2, n, 3), m.f(2, 3, n + 1)), {}),
    "baddbmm": lambda m, n: ((m.f(2, n, n + 1), m.f(2, n, 3), m.f(2, 3, n + 1)), {}),
    "addbmm": lambda m, n: ((m.f(n, n + 1), m.f(2, n, 3), m.f(2, 3, n + 1)), {}),
    "mv": lambda m, n: ((m.f(n, 3), m.f(3)), {}),
    "addmv": lambda m, n: ((m.f(n), m.f(n, 3), m.f(3)), {}),
    "dot": lambda m, n: ((m.f(n), m.f(n)), {}),
    "vdot": lambda m, n: ((m.f(n), m.f(n)), {}),
    "addr": lambda m, n: ((m.f(n, 3), m.f(n), m.f(3)), {}),
    "_trilinear": lambda m, n: ((m.f(n, 3, 1), m.f(1, 3, 4), m.f(n, 1, 4), [], [], [], [1, 2]),
                                {}),
    "_scaled_dot_product_flash_attention": _attention_bhle,
    "_scaled_dot_product_cudnn_attention": lambda m, n: (_attention_bhle(m, n)[0] + (None, True),
                                                         {}),
    # FFTs of 16·n points: the charged count (below every published one) is 0 for a few points
    "_fft_c2c": lambda m, n: ((m.c(2, 16 * n), [1], 0, True), {}),
    "_fft_r2c": lambda m, n: ((m.f(2, 16 * n), [1], 0, True), {}),
    "_fft_c2r": lambda m, n: ((m.c(2, 16 * n), [1], 0, 32 * n - 2), {}),
    "_flash_attention_backward": lambda m, n: (
        (m.f(2, n, 4, 8), m.f(2, n, 4, 8), m.f(2, n + 2, 2, 8), m.f(2, n + 2, 2, 8),
         m.f(2, n, 4, 8), m.f(2, 4, n), None, None, n, n + 2, 0.0, True, m.i(2), m.i(0)), {}),
    "_linalg_det": _square, "_linalg_slogdet": _square, "linalg_eig": _square,
    "linalg_inv_ex": _square, "linalg_cholesky_ex": _square, "cholesky": _square,
    "cholesky_inverse": _square, "_linalg_eigh": _square, "geqrf": _square,
    "_linalg_solve_ex": lambda m, n: ((m.f(2, n, n), m.f(2, n, 3)), {}),
    "cholesky_solve": lambda m, n: ((m.f(2, n, 3), m.f(2, n, n)), {}),
    "triangular_solve": lambda m, n: ((m.f(2, n, 3), m.f(2, n, n)), {}),
    "linalg_solve_triangular": lambda m, n: ((m.f(2, n, n), m.f(2, n, 3)), {"upper": True}),
    "linalg_lu_solve": lambda m, n: ((m.f(2, n, n), m.i(2, n, dtype=torch.int32),
                                      m.f(2, n, 3)), {}),
    "linalg_lstsq": lambda m, n: ((m.f(n + 1, n), m.f(n + 1, 2)), {}),
    "affine_grid_generator": lambda m, n: ((m.f(2, 2, 3), [2, 3, n, n], False), {}),
    "index": lambda m, n: ((m.f(n, 4), [m.i(3)]), {}),
    "_unsafe_index": lambda m, n: ((m.f(n, 4), [m.i(3)]), {}),
    "_index_put_impl": lambda m, n: ((m.f(n, 4), [m.i(3)], m.f(3, 4)), {}),
    "embedding": lambda m, n: ((m.f(10, n), m.i(2, 3)), {}),
    "upsample_nearest1d": _nearest(1), "upsample_nearest2d": _nearest(2),
    "upsample_nearest3d": _nearest(3), "_upsample_nearest_exact1d": _nearest(1),
    "_upsample_nearest_exact2d": _nearest(2), "_upsample_nearest_exact3d": _nearest(3),
    "_upsample_bilinear2d_aa": _resample(2), "upsample_bicubic2d": _resample(2),
    "_upsample_bicubic2d_aa": _resample(2), "_upsample_lanczos2d_aa": _resample(2),
    "grid_sampler_2d": lambda m, n: ((m.f(2, 3, n, n), m.f(2, 4, 5, 2), 0, 0, False), {}),
    "grid_sampler_3d": lambda m, n: ((m.f(2, 3, n, n, n), m.f(2, 4, 5, 3, 3), 0, 0, False), {}),
    "lu_unpack": lambda m, n: ((m.f(n, n), m.i(n, dtype=torch.int32) + 1), {}),
    "constant_pad_nd": _pad(1), "pad": _pad(1),
    "reflection_pad1d": _pad(1), "reflection_pad2d": _pad(2), "reflection_pad3d": _pad(3),
    "replication_pad1d": _pad(1), "replication_pad2d": _pad(2), "replication_pad3d": _pad(3),
    "roll": lambda m, n: ((m.f(2, n), [1], [1]), {}),
    "im2col": lambda m, n: ((m.f(2, 3, n + 2, n + 2), [3, 3], [1, 1], [1, 1], [1, 1]), {}),
    "col2im": lambda m, n: ((m.f(2, 27, n * n), [n, n], [3, 3], [1, 1], [1, 1], [1, 1]), {}),
    "diag": lambda m, n: ((m.f(n, n + 1),), {}),
    "block_diag": lambda m, n: (([m.f(n, 2), m.f(2, n)],), {}),
    "index_copy": lambda m, n: ((m.f(n, 4), 0, m.i(2), m.f(2, 4)), {}),
    "index_fill": lambda m, n: ((m.f(n, 4), 0, m.i(2), 1.0), {}),
    "index_add": lambda m, n: ((m.f(n, 4), 0, m.i(3), m.f(3, 4)), {}),
    "index_reduce": lambda m, n: ((m.f(n, 4), 0, m.i(3), m.f(3, 4), "prod"), {}),
    "max_unpool2d": lambda m, n: ((m.f(2, 3, n, n), m.i(2, 3, n, n), [2 * n, 2 * n]), {}),
    "max_unpool3d": lambda m, n: ((m.f(2, 3, n, n, n), m.i(2, 3, n, n, n), [2 * n] * 3,
                                   [2] * 3, [0] * 3), {}),
    "_slow_conv2d_forward": _direct_conv(2, dilation=False),
    "slow_conv3d_forward": _direct_conv(3, dilation=False),
    "_conv_depthwise2d": _direct_conv(2, depthwise=True),
    "conv_depthwise3d": _direct_conv(3, depthwise=True),
    "slow_conv_dilated2d": _direct_conv(2), "slow_conv_dilated3d": _direct_conv(3),
    "slow_conv_transpose2d": _transposed_conv(2), "slow_conv_transpose3d": _transposed_conv(3),
    "max_pool2d_with_indices_backward": lambda m, n: (
        (m.f(2, 3, n, n), m.f(2, 3, 2 * n, 2 * n), [2, 2], [2, 2], [0, 0], [1, 1], False,
         m.i(2, 3, n, n)), {}),
    "max_pool3d_with_indices_backward": lambda m, n: (
        (m.f(2, 3, n, n, n), m.f(2, 3, 2 * n, 2 * n, 2 * n), [2] * 3, [2] * 3, [0] * 3, [1] * 3,
         False, m.i(2, 3, n, n, n)), {}),
    "native_layer_norm_backward": lambda m, n: (
        (m.f(2, n), m.f(2, n), [n], m.f(2, 1), m.f(2, 1), m.f(n), m.f(n), [True] * 3), {}),
    "native_batch_norm_backward": lambda m, n: (
        (m.f(2, 3, n), m.f(2, 3, n), m.f(3), m.f(3), m.f(3), m.f(3), m.f(3), True, 1e-5,
         [True] * 3), {}),
    "native_group_norm_backward": lambda m, n: (
        (m.f(2, 4, n), m.f(2, 4, n), m.f(2, 2), m.f(2, 2), m.f(4), 2, 4, n, 2, [True] * 3), {}),
    # the scan helpers write into values and indices and take no negative dim
    "_cummax_helper": lambda m, n: ((m.f(2, n), m.f(2, n), m.i(2, n), 1), {}),
    "_cummin_helper": lambda m, n: ((m.f(2, n), m.f(2, n), m.i(2, n), 1), {}),
    "_pdist_forward": lambda m, n: ((m.f(n, 4), 2.0), {}),
    "glu": lambda m, n: ((m.f(2, n, 4),), {}),
    "convolution": lambda m, n: ((m.f(2, 3, n + 2, n + 2), m.f(4, 3, 3, 3), None, [1, 1], [0, 0],
                                  [1, 1], False, [0, 0], 1), {}),
    "_convolution": lambda m, n: ((m.f(2, 3, n + 2, n + 2), m.f(4, 3, 3, 3), None, [1, 1],
                                   [0, 0], [1, 1], False, [0, 0], 1, False, False, False, False),
                                  {}),
    "native_layer_norm": lambda m, n: ((m.f(2, n), [n], m.f(n), m.f(n), 1e-5), {}),
    "rms_norm": lambda m, n: ((m.f(2, n), [n]), {}),
    "cudnn_batch_norm": lambda m, n: ((m.f(2, 3, n), m.f(3), m.f(3), m.f(3), m.f(3), True, 0.1,
                                       1e-5), {}),
    "_embedding_bag": lambda m, n: ((m.f(10, n), m.i(6), m.i(2)), {"mode": 1}),
    "_embedding_bag_forward_only": lambda m, n: ((m.f(10, n), m.i(6), m.i(2)), {"mode": 0}),
    "bincount": lambda m, n: ((m.i(n),), {}),
    "convolution_backward": lambda m, n: (
        (m.f(2, 4, n, n), m.f(2, 3, n + 2, n + 2), m.f(4, 3, 3, 3), [4], [1, 1], [0, 0], [1, 1],
         False, [0, 0], 1, [True] * 3), {}),
    "_scaled_dot_product_efficient_attention_backward": lambda m, n: (
        (m.f(2, 4, n, 8), m.f(2, 4, n, 8), m.f(2, 4, n + 2, 8), m.f(2, 4, n + 2, 8), None,
         m.f(2, 4, n, 8), m.f(2, 4, n), m.i(2), m.i(2), 0.0, [True, True, True, False]), {}),
    "_scaled_dot_product_flash_attention_for_cpu_backward": lambda m, n: (
        (m.f(2, 4, n, 8), m.f(2, 4, n, 8), m.f(2, 4, n + 2, 8), m.f(2, 4, n + 2, 8),
         m.f(2, 4, n, 8), m.f(2, 4, n), 0.0,
         False), {}),
    "lstm": lambda m, n: ((m.f(n, 2, 3), [m.f(1, 2, 4), m.f(1, 2, 4)], [m.f(16, 3), m.f(16, 4)],
                           False, 1, 0.0, False, False, False), {}),
    "gru": lambda m, n: ((m.f(n, 2, 3), m.f(1, 2, 4), [m.f(12, 3), m.f(12, 4)], False, 1, 0.0,
                          False, False, False), {}),
    "rnn_tanh": lambda m, n: ((m.f(n, 2, 3), m.f(1, 2, 4), [m.f(4, 3), m.f(4, 4)], False, 1,
                               0.0, False, False, False), {}),
    "rnn_relu": lambda m, n: ((m.f(n, 2, 3), m.f(1, 2, 4), [m.f(4, 3), m.f(4, 4)], False, 1,
                               0.0, False, False, False), {}),
    "_thnn_fused_lstm_cell": lambda m, n: ((m.f(n, 16), m.f(n, 16), m.f(n, 4), m.f(16),
                                            m.f(16)), {}),
    "unfold_backward": lambda m, n: ((m.f(2, n, 2), [2, n + 1], 1, 2, 1), {}),
}

#: Ops with no meta kernel: called on small CPU tensors.
NEEDS_DATA = frozenset({
    "_aminmax", "_logcumsumexp", "_cummax_helper", "_cummin_helper", "native_norm",
    "_masked_softmax", "_thnn_fused_gru_cell", "geqrf", "linalg_lstsq", "masked_select",
    "nonzero", "_unique2", "_unique", "unique_consecutive", "unique_dim",
    "unique_dim_consecutive", "bincount", "_slow_conv2d_forward", "slow_conv3d_forward",
    "_local_scalar_dense", "slow_conv_dilated2d", "slow_conv_dilated3d",
    "slow_conv_transpose2d", "slow_conv_transpose3d", "conv_depthwise3d", "_conv_depthwise2d",
})


def packet_name(func: OpOverload) -> str:
    """The packet an overload belongs to, its in-place twin's named as the functional one."""
    name = func.overloadpacket.__name__
    return name[:-1] if name.endswith("_") and not name.startswith("__") else name


def build_call(func: OpOverload, dtype: torch.dtype, n: int) -> Call:
    """A call of ``func`` with float tensors of ``dtype`` at size ``n`` (raises when none)."""
    name = packet_name(func)
    make = Maker(dtype, data=name in NEEDS_DATA)
    builder = CALLS.get(name)
    return builder(make, n) if builder is not None else schema_call(func, make, n)


def _takes_tensors(func: OpOverload) -> bool:
    schema = func._schema
    return any("Tensor" in str(a.type) for a in (*schema.arguments, *schema.returns))


def is_out_variant(func: OpOverload) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write and a.kwarg_only
               for a in func._schema.arguments)


def registered_overloads(rules: dict) -> list[OpOverload]:
    """Every overload the registry's keys name that takes or returns a tensor (a packet names
    all its overloads), ``out=`` spellings left out."""
    found: list[OpOverload] = []
    for key in rules:
        if isinstance(key, OpOverload):
            overloads = [key]
        elif isinstance(key, OpOverloadPacket):
            overloads = [getattr(key, name) for name in key.overloads()]
        else:  # an op the installed torch lacks
            continue
        found += [f for f in overloads if _takes_tensors(f) and not is_out_variant(f)]
    return list(dict.fromkeys(found))


#: Packets the sweep cannot call on this machine, and why (their rules have tests of their own).
UNSWEPT: dict[str, str] = {
    **dict.fromkeys(
        ["cudnn_convolution", "convolution_overrideable", "_conv_depthwise2d",
         "conv_depthwise3d", "_thnn_fused_gru_cell", "_cudnn_rnn_backward",
         "cudnn_batch_norm_backward", "native_norm", "_scaled_grouped_mm_v2",
         "_fused_sgd", "_fused_adagrad"],
        "a CUDA (or other backend) kernel with no meta or CPU kernel",
    ),
    **dict.fromkeys(
        ["_scaled_mm", "_scaled_mm_v2", "_scaled_addmm", "_scaled_grouped_mm"],
        "fp8 and fp4 operands with their scales: tests/costs/test_quantized.py",
    ),
    "_int_mm": "int8 operands (the sweep builds floats): tests/costs/test_quantized.py",
    "_scaled_dot_product_fused_attention_overrideable_backward": "no backend implements it",
    "_resize_output": "takes a device; resizes, no kernel",
    "_conj": "a complex view; the sweep's inputs are real",
    "_linalg_check_errors": "an internal check on int32 status codes",
}
