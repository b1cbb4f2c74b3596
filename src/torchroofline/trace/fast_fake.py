"""Four of FakeTensorMode's general paths that are slow for programs of many small ops.

Views of fake tensors are made straight from their meta kernels (:func:`direct_view`). A
view's output is sizes, strides and an offset into its input's storage. FakeTensorMode makes
one in about 0.7 ms (a cache lookup that misses for every new slice start, a Python
decomposition that dispatches ``as_strided`` again, output validation); the view's own C++
kernel on the fake tensor's meta storage, wrapped as FakeTensorMode wraps any meta output,
takes about 0.04 ms. A program that slices a tensor 100,000 times (``torch.cat([x[i:i+1] for
i in range(n)])``) traces in seconds instead of minutes.

An op that PyTorch decomposes in Python (``addmm``, ``gelu``, ``native_batch_norm``,
``nll_loss_forward``, ``_log_softmax``: :func:`decomposed_on_meta`) runs its decomposition once
on the fake tensors as meta tensors, as its meta kernel, instead of through FakeTensorMode. The
function is the same (``torch._meta_registrations.activate_meta`` registers each such
decomposition as the op's meta kernel), but FakeTensorMode runs it with every op inside it
dispatched through the mode again (a cache key, a miss for every new shape, output checks):
10 to 30 ms for each new op and shape, on its first call in a process, against ~1 ms.

A factory (``empty``, ``arange``, ``randn``, ...: :func:`made_by_factory`) is made from its meta
kernel's output as FakeTensorMode's own rule for factories makes it, without the dispatch
around that rule.

An op with a long list of tensors (that ``cat``) runs past FakeTensorMode's cache
(:func:`uncached_if_long`): its key hashes every tensor's metadata (seconds at 100,000 tensors)
for an entry no later op will hit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import (
    FakeTensor,
    FakeTensorMode,
    disable_fake_tensor_cache,
    in_kernel_invocation_manager,
    unset_fake_temporarily,
)
from torch.utils._pytree import tree_flatten, tree_unflatten

aten = torch.ops.aten


def op_leaves(tree: Any, leaves: list[Any] | None = None) -> list[Any]:
    """The leaves of an aten op's arguments or outputs (nested tuples, lists and dicts), in
    order, appended to ``leaves``: ``tree_leaves`` for the containers aten ops take and return,
    without pytree's per-node type lookup (~3× faster; building a model flattens every op's)."""
    leaves = [] if leaves is None else leaves
    if isinstance(tree, (tuple, list)):
        for item in tree:
            op_leaves(item, leaves)
    elif isinstance(tree, dict):
        for item in tree.values():
            op_leaves(item, leaves)
    else:
        leaves.append(tree)
    return leaves


#: View ops whose C++ kernel works on meta storage and returns tensors that alias their input
#: (CompositeExplicitAutograd or Meta kernels; composite-implicit views such as ``narrow``
#: reach the trace already decomposed into these).
DIRECT_VIEWS = frozenset({
    aten.alias.default,
    aten.as_strided.default,
    aten.diagonal.default,
    aten.expand.default,
    aten.permute.default,
    aten.select.int,
    aten.slice.Tensor,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.t.default,
    aten.transpose.int,
    aten.unbind.int,
    aten.unfold.default,
    aten.unsqueeze.default,
    aten.view.default,
})


def direct_view(mode: FakeTensorMode, func: Any, args: tuple, kwargs: dict) -> Any:
    """``func`` (a :data:`DIRECT_VIEWS` op) on a fake tensor of ``mode``, made by its own
    kernel; None where FakeTensorMode must make it: another mode's tensor, a constant the
    mode propagates, or symbolic sizes."""
    source = args[0] if args else None
    if (
        mode.shape_env is not None
        or not isinstance(source, FakeTensor) or source.fake_mode is not mode
        or source.constant is not None
        or any(isinstance(arg, (torch.Tensor, torch.SymInt)) for arg in args[1:])
        or any(isinstance(size, torch.SymInt) for arg in args[1:]
               if isinstance(arg, (list, tuple)) for size in arg)
        or kwargs
    ):
        return None
    with in_kernel_invocation_manager(mode):
        output = func(*args)
    device = source.fake_device
    if isinstance(output, torch.Tensor):
        return FakeTensor(mode, output, device)
    return [FakeTensor(mode, each, device) for each in output]


#: Ops run by :func:`decomposed_on_meta`: their meta kernel is their Python decomposition
#: (``torch._decomp``'s or ``torch._refs``', registered by
#: ``torch._meta_registrations.activate_meta``), which FakeTensorMode runs too, through the
#: mode or as that kernel; on fake CUDA tensors only (on the CPU some take a branch of their
#: own). Listed one by one, not found by rule: on meta a decomposition sees
#: ``device.type == "meta"``, and some branch on ``"cuda"`` (``log_sigmoid_forward`` makes a
#: full-size buffer on any device but CUDA; upsampling picks a memory format), so each op here
#: is one whose decomposition, and those of the ops it calls, test at most ``"cpu"`` (where
#: meta answers as CUDA does). tests/trace/test_fast_fake.py checks each against
#: FakeTensorMode.
META_DECOMPOSED = frozenset({
    aten._log_softmax.default,
    aten._unsafe_view.default,
    aten.add.Tensor,
    aten.addmm.default,
    aten.gelu.default,
    aten.mean.default,
    aten.mean.dim,
    aten.mul.Tensor,
    aten.native_batch_norm.default,
    aten.native_group_norm.default,
    aten.native_layer_norm.default,
    aten.nll_loss_forward.default,
    aten.relu.default,
    aten.sigmoid.default,
    aten.sub.Tensor,
    aten.sum.dim_IntList,
    aten.tanh.default,
})


#: (op, its arguments' metadata) → (output tree spec, output layouts) for
#: :func:`decomposed_on_meta`: a meta kernel's outputs depend on the arguments' shapes, strides,
#: dtypes and devices and the plain arguments alone, and a repeated layer (a ResNet's batch
#: norms) would otherwise run the decomposition again for each
_LAYOUTS: dict[tuple, tuple[Any, tuple]] = {}
_LAYOUTS_LIMIT = 4096


def decomposed_on_meta(mode: FakeTensorMode, func: Any, args: tuple, kwargs: dict) -> Any:
    """``func`` (an op FakeTensorMode would decompose) run by its meta kernel on the fake
    tensors of ``mode``, its outputs wrapped as FakeTensorMode wraps any meta kernel's, or made
    from the layouts a :data:`LAYOUT_RULES` rule gives without running it; None where
    FakeTensorMode must run it: another mode's or a real tensor, a constant the mode
    propagates, symbolic sizes, tensors on more than one device, an op of no rule's layout
    outside :data:`META_DECOMPOSED`."""
    if (func not in META_DECOMPOSED and func not in LAYOUT_RULES) or mode.shape_env is not None \
            or mode.propagate_real_tensors:
        return None
    leaves = op_leaves((args, kwargs))
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    if not tensors or any(
        not isinstance(t, FakeTensor) or t.fake_mode is not mode or t.constant is not None
        for t in tensors
    ) or any(isinstance(leaf, (torch.SymInt, torch.SymFloat)) for leaf in leaves):
        return None
    device = tensors[0].fake_device
    if device.type == "cpu" or any(t.fake_device != device for t in tensors):
        # on the CPU FakeTensorMode runs the decomposition with ``device.type == "cpu"``,
        # which some take another branch on (eval-mode ``native_batch_norm`` returns empty
        # statistics there, its C-sized ones on meta and CUDA); a CPU scalar beside CUDA
        # tensors is a mix FakeTensorMode places
        return None
    key: tuple | None = (func, len(args), tuple(kwargs), *map(_signature, leaves))
    try:
        found = _LAYOUTS.get(key)
    except TypeError:  # an unhashable plain argument: no caching
        key, found = None, None
    if found is None and func in LAYOUT_RULES:
        found = LAYOUT_RULES[func](args, kwargs, tensors)
    if found is not None:
        return _remade(mode, found, leaves, kwargs.get("device") or device)
    if func not in META_DECOMPOSED:  # a rule's op whose meta kernel FakeTensorMode wraps itself
        return None
    with in_kernel_invocation_manager(mode):
        output = func(*args, **kwargs)
    made = mode.wrap_meta_outputs_with_default_device_logic(
        output, func, leaves, device=kwargs.get("device")
    )
    layout = _layout(made, leaves)
    if key is not None and layout is not None and len(_LAYOUTS) < _LAYOUTS_LIMIT:
        _LAYOUTS[key] = layout
    return made


def _contiguous(tensor: torch.Tensor) -> bool:
    """Whether ``tensor``'s strides are the row-major ones of its shape, size-1 dims included
    (``is_contiguous`` passes any stride of a size-1 dim; an output's strides there may
    differ)."""
    return tuple(tensor.stride()) == _row_major(tensor.shape)


_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_ONE_OUTPUT = tree_flatten(0)[1]
_TWO_OUTPUTS = tree_flatten((0, 0))[1]
_THREE_OUTPUTS = tree_flatten((0, 0, 0))[1]


def _like_operands(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """A pointwise op's output layout where its tensors share one shape, row-major strides and
    one floating dtype: one tensor like them (TensorIterator keeps a row-major layout and the
    dtype); None otherwise."""
    first = tensors[0]
    if first.dtype not in _FLOATS or not all(
        t.shape == first.shape and t.dtype == first.dtype and _contiguous(t) for t in tensors
    ):
        return None
    return _ONE_OUTPUT, (("tensor", first.shape, first.stride(), first.dtype),)


def _powered_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``pow`` of a row-major floating tensor to a real number: a tensor like it (a complex
    exponent would make a complex one)."""
    if len(args) != 2 or kwargs or not isinstance(args[1], int | float):
        return None
    return _like_operands(args, kwargs, tensors)


def _batch_norm_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``native_batch_norm``'s output layouts for a row-major fp32, fp16 or bf16 input (N, C,
    ...) whose weight, bias and running statistics are (C,) of its dtype or fp32: the output
    like the input and two (C,) fp32 statistics, training or not (its decomposition's on
    CUDA); None otherwise."""
    source, *channel = tensors
    if source.dim() < 2 or source.dtype not in _FLOATS[:3] or not _contiguous(source):
        return None
    count = source.shape[1]
    if not _affine(channel, (count,), source.dtype):
        return None
    stats = ("tensor", torch.Size([count]), (1,), torch.float32)
    return _THREE_OUTPUTS, (("tensor", source.shape, source.stride(), source.dtype), stats,
                            stats)


def _affine(tensors: list, shape: tuple, dtype: torch.dtype) -> bool:
    """Whether a norm's weights and statistics are all row-major, of ``shape``, and of
    ``dtype`` or fp32."""
    return all(t.shape == shape and _contiguous(t) and t.dtype in (dtype, torch.float32)
               for t in tensors)


def _layer_norm_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``native_layer_norm``'s output layouts for a row-major fp32, fp16 or bf16 input whose
    weight and bias (or none) are of the normalized shape, of its dtype or fp32: the output
    like the input, the mean and the inverse deviation row-major fp32 of the input's shape with
    the normalized dims 1 (its decomposition's on CUDA); None otherwise."""
    source, *affine = tensors
    normalized = tuple(args[1])
    kept = source.dim() - len(normalized)
    if (source.dtype not in _FLOATS[:3] or not _contiguous(source) or kept < 0
            or tuple(source.shape[kept:]) != normalized
            or not _affine(affine, normalized, source.dtype)):
        return None
    shape = torch.Size([*source.shape[:kept], *(1,) * len(normalized)])
    stats = ("tensor", shape, _row_major(shape), torch.float32)
    return _THREE_OUTPUTS, (("tensor", source.shape, source.stride(), source.dtype), stats,
                            stats)


def _convolution_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``convolution``'s output layout for a row-major fp32, fp16 or bf16 input and weight (and
    bias) whose channel and spatial sizes are all over 1 (no layout that is channels-last as
    well): the row-major output of the shape the formula gives, plain or transposed
    (FakeTensorMode's, whose memory format follows the operands'); None otherwise."""
    if len(args) != 9 or len(tensors) not in (2, 3):
        return None
    source, weight, *bias = tensors
    _, _, _, stride, padding, dilation, transposed, output_padding, groups = args
    if (source.dim() not in (3, 4, 5) or weight.dim() != source.dim()
            or source.dtype not in _FLOATS[:3]
            or any(t.dtype != source.dtype or not _contiguous(t) for t in tensors)
            or min(source.shape[1:]) < 2 or min(weight.shape[:2]) < 2):
        return None
    kernel = weight.shape[2:]
    if transposed:
        spatial = [(size - 1) * step - 2 * pad + dilate * (k - 1) + extra + 1
                   for size, step, pad, dilate, k, extra
                   in zip(source.shape[2:], stride, padding, dilation, kernel, output_padding,
                          strict=True)]
        channels = weight.shape[1] * groups
    else:
        spatial = [(size + 2 * pad - dilate * (k - 1) - 1) // step + 1
                   for size, step, pad, dilate, k
                   in zip(source.shape[2:], stride, padding, dilation, kernel, strict=True)]
        channels = weight.shape[0]
    shape = torch.Size([source.shape[0], channels, *spatial])
    if min(spatial) < 1 or any(t.shape != (channels,) for t in bias):
        return None
    return _ONE_OUTPUT, (("tensor", shape, _row_major(shape), source.dtype),)


def _addmm_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``addmm(bias, a, b)`` of one floating dtype, ``a`` (m, k) and ``b`` (k, n) of any strides,
    the bias (n,) or a row-major (m, n), m and n over 1: a new row-major (m, n) tensor (its
    decomposition adds the bias to ``mm``'s new row-major product, which leads the strides)."""
    if len(tensors) != 3 or len(args) != 3 or set(kwargs) - {"beta", "alpha"}:
        return None
    bias, first, second = tensors
    if (first.dim() != 2 or second.dim() != 2 or first.shape[1] != second.shape[0]
            or first.dtype not in _FLOATS
            or any(t.dtype != first.dtype for t in (bias, second))):
        return None
    shape = (first.shape[0], second.shape[1])
    if min(shape) < 2 or not (bias.shape == shape[1:] or (bias.shape == shape
                                                          and _contiguous(bias))):
        return None
    return _fresh(shape, first.dtype)


def _group_norm_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``native_group_norm`` of a row-major fp32, fp16 or bf16 input (N, C, ...) whose sizes
    are all over 1, its weight and bias (or none) row-major (C,) of its dtype: the output like
    the input, the mean and the inverse deviation row-major (N, groups) of its dtype (its
    decomposition's on CUDA); None otherwise."""
    if len(args) != 8 or kwargs:
        return None
    source, *affine = tensors
    count, channels, _, groups = args[3:7]
    if (source.dim() < 2 or source.dtype not in _FLOATS[:3] or not _contiguous(source)
            or min(source.shape) < 2 or tuple(source.shape[:2]) != (count, channels)
            or not isinstance(groups, int) or groups < 1 or channels % groups
            or any(t.shape != (channels,) or t.dtype != source.dtype or not _contiguous(t)
                   for t in affine)):
        return None
    stats = ("tensor", torch.Size([count, groups]), (groups, 1), source.dtype)
    return _THREE_OUTPUTS, (("tensor", source.shape, source.stride(), source.dtype), stats,
                            stats)


def _fresh(shape: Sequence[int], dtype: torch.dtype) -> tuple[Any, tuple]:
    """One new row-major tensor of ``shape`` and ``dtype``."""
    shape = torch.Size(shape)
    return _ONE_OUTPUT, (("tensor", shape, _row_major(shape), dtype),)


def _product_layout(dims: int) -> Any:
    """``mm`` (``dims`` 2) or ``bmm`` (3): a new row-major (..., m, n) tensor of the operands'
    one floating dtype, whatever their strides (the meta kernel's ``new_empty``)."""

    def rule(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
        if len(tensors) != 2:
            return None
        first, second = tensors
        if (first.dim() != dims or second.dim() != dims or first.dtype not in _FLOATS
                or second.dtype != first.dtype or first.shape[:-2] != second.shape[:-2]
                or first.shape[-1] != second.shape[-2]):
            return None
        return _fresh((*first.shape[:-1], second.shape[-1]), first.dtype)

    return rule


def _softmax_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``_softmax`` or ``_log_softmax`` of a row-major floating input, in its own dtype (not
    ``half_to_float``): one tensor like it."""
    if len(args) != 3 or args[2] is not False:
        return None
    return _like_operands(args, kwargs, tensors)


def _clone_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``clone`` to the row-major format, or of a row-major tensor keeping its format: a new
    row-major tensor of its shape and dtype."""
    source, memory_format = tensors[0], kwargs.get("memory_format")
    if len(args) != 1 or len(kwargs) > 1 or not (
        memory_format is torch.contiguous_format
        or (memory_format in (None, torch.preserve_format) and _contiguous(source))
    ):
        return None
    return _fresh(source.shape, source.dtype)


def _embedding_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``embedding`` of a 2-D weight at integer indices: a new row-major tensor of the indices'
    shape and one row, in the weight's dtype (rows picked by ``index_select``)."""
    if len(tensors) != 2 or kwargs:
        return None
    weight, indices = tensors
    if weight.dim() != 2 or indices.dtype not in (torch.int64, torch.int32):
        return None
    return _fresh((*indices.shape, weight.shape[1]), weight.dtype)


def _compared_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """A comparison of a row-major tensor with a number: a new boolean tensor like it."""
    source = tensors[0]
    if len(args) != 2 or kwargs or isinstance(args[1], torch.Tensor) or not _contiguous(source):
        return None
    return _fresh(source.shape, torch.bool)


def _masked_fill_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``masked_fill`` of a row-major floating tensor under a boolean mask that broadcasts to
    it: a new tensor like it (the op clones it, then fills)."""
    if len(tensors) != 2 or kwargs:
        return None
    source, mask = tensors
    if (mask.dtype != torch.bool or mask.dim() > source.dim()
            or any(m not in (1, s) for m, s in zip(reversed(mask.shape), reversed(source.shape),
                                                  strict=False))):
        return None
    return _like_operands(args, kwargs, [source])


def _new_empty_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``new_empty``: a new row-major tensor of the sizes asked, in the dtype asked or the
    source's."""
    if len(args) != 2 or set(kwargs) - {"dtype", "device", "layout", "pin_memory"} or (
        kwargs.get("layout") not in (None, torch.strided)
    ):
        return None
    return _fresh(args[1], kwargs.get("dtype") or tensors[0].dtype)


def _max_pool_layout(args: tuple, kwargs: dict, tensors: list) -> tuple[Any, tuple] | None:
    """``max_pool2d_with_indices`` of a row-major floating (N, C, H, W) input whose channel and
    spatial sizes are all over 1 (no layout that is channels-last as well): the values and the
    int64 indices, row-major, of the pooled sizes (PyTorch's ``pooling_output_shape``); None
    for a window its checks refuse (padding over half the window, an empty output)."""
    source = tensors[0]
    if (kwargs or len(tensors) != 1 or source.dim() != 4 or source.dtype not in _FLOATS
            or not _contiguous(source) or min(source.shape[1:]) < 2 or not 2 <= len(args) <= 6):
        return None
    kernel, stride, padding, dilation, ceil_mode = _pool_arguments(args)
    if any(len(pair) != 2 or min(pair) < 0 for pair in (kernel, stride, padding, dilation)) \
            or min(*kernel, *dilation) < 1:
        return None
    spatial = []
    for size, k, step, pad, dilate in zip(source.shape[2:], kernel, stride, padding, dilation,
                                          strict=True):
        span = dilate * (k - 1) + 1
        if step < 1 or pad < 0 or pad > span // 2:
            return None
        out = (size + 2 * pad - span + (step - 1 if ceil_mode else 0)) // step + 1
        if ceil_mode and (out - 1) * step >= size + pad:
            out -= 1  # the last window must start inside the input or its left padding
        if out < 1:
            return None
        spatial.append(out)
    shape = torch.Size([*source.shape[:2], *spatial])
    strides = _row_major(shape)
    return _TWO_OUTPUTS, (("tensor", shape, strides, source.dtype),
                          ("tensor", shape, strides, torch.int64))


def _pool_arguments(args: tuple) -> tuple[list, list, list, list, bool]:
    """``max_pool2d_with_indices``' kernel, stride (the kernel's if empty), padding and
    dilation as two numbers each, and ``ceil_mode``, from its positional arguments."""
    kernel, stride, padding, dilation, ceil_mode = (*args[1:], *((), 0, 1, False)[len(args) - 2:])

    def pair(value: Any) -> list:
        value = [value] if isinstance(value, int) else list(value)
        return value * 2 if len(value) == 1 else value

    kernel = pair(kernel)
    return kernel, pair(stride) if stride else kernel, pair(padding), pair(dilation), ceil_mode


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:
    strides, stride = [], 1
    for size in reversed(shape):
        strides.insert(0, stride)
        stride *= max(size, 1)
    return tuple(strides)


#: Ops of :data:`META_DECOMPOSED`, and others FakeTensorMode runs by their meta kernel
#: (``convolution``, matrix products, softmax, ``clone``, ``embedding``, comparisons,
#: ``masked_fill``, ``new_empty``, ``pow``), whose output layouts follow from their operands'
#: by a rule, for the common layouts (row-major operands): a first call on a new shape need not
#: run the decomposition or FakeTensorMode (0.5-2 ms a pointwise op or a matrix product, ~3 ms
#: an ``addmm``, ~7 ms a batch norm, ~5 ms a group norm, ~2.5 ms a convolution). Each rule
#: returns :func:`_layout`'s (tree spec, layouts), or None where the general path must decide;
#: tests/trace/test_fast_fake.py checks each against it.
LAYOUT_RULES: dict[Any, Any] = {
    **dict.fromkeys((
        aten.add.Tensor,
        aten.gelu.default,
        aten.mul.Tensor,
        aten.relu.default,
        aten.sigmoid.default,
        aten.sub.Tensor,
        aten.tanh.default,
    ), _like_operands),
    aten.pow.Tensor_Scalar: _powered_layout,
    aten.addmm.default: _addmm_layout,
    aten.convolution.default: _convolution_layout,
    aten.native_group_norm.default: _group_norm_layout,
    aten.native_batch_norm.default: _batch_norm_layout,
    aten.native_layer_norm.default: _layer_norm_layout,
    aten.mm.default: _product_layout(2),
    aten.bmm.default: _product_layout(3),
    aten._softmax.default: _softmax_layout,
    aten._log_softmax.default: _softmax_layout,
    aten.clone.default: _clone_layout,
    aten.embedding.default: _embedding_layout,
    **dict.fromkeys((
        aten.eq.Scalar,
        aten.ne.Scalar,
        aten.gt.Scalar,
        aten.ge.Scalar,
        aten.lt.Scalar,
        aten.le.Scalar,
    ), _compared_layout),
    aten.masked_fill.Scalar: _masked_fill_layout,
    aten.new_empty.default: _new_empty_layout,
    aten.max_pool2d_with_indices.default: _max_pool_layout,
}


def _signature(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return (leaf.shape, leaf.stride(), leaf.storage_offset(), leaf.dtype, leaf.device)
    return (type(leaf), leaf)


def _layout(output: Any, leaves: list) -> tuple[Any, tuple] | None:
    """(tree spec, per output leaf ``("argument", index of the argument leaf it is)``,
    ``("tensor", shape, stride, dtype)`` or ``("value", it)``); None when an output is not a
    fresh dense tensor of its own storage (a view, or one that shares an argument's storage)."""
    out_leaves, spec = tree_flatten(output)
    storages = {t.untyped_storage()._cdata for t in leaves if isinstance(t, torch.Tensor)}
    layouts = []
    for leaf in out_leaves:
        position = next((i for i, arg in enumerate(leaves) if arg is leaf), None)
        if position is not None:
            layouts.append(("argument", position))
        elif not isinstance(leaf, torch.Tensor):
            layouts.append(("value", leaf))
        elif (leaf.storage_offset() != 0 or leaf.untyped_storage()._cdata in storages
              or leaf.untyped_storage().nbytes() != _dense_nbytes(leaf)):
            return None
        else:
            layouts.append(("tensor", leaf.shape, leaf.stride(), leaf.dtype))
    return spec, tuple(layouts)


def _dense_nbytes(tensor: torch.Tensor) -> int:
    """The bytes ``torch.empty_strided`` allocates for ``tensor``'s sizes and strides."""
    if 0 in tensor.shape:
        return 0
    span = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(),
                                                               strict=True))
    return span * tensor.element_size()


def _remade(mode: FakeTensorMode, found: tuple[Any, tuple], leaves: list, device: Any) -> Any:
    """Outputs of the layouts ``found``: fresh fake tensors on ``device``, arguments as they
    are, plain values."""
    spec, layouts = found
    converter = mode.fake_tensor_converter
    made = []
    for layout in layouts:
        if layout[0] == "argument":
            made.append(leaves[layout[1]])
        elif layout[0] == "value":
            made.append(layout[1])
        else:
            with in_kernel_invocation_manager(mode):
                meta = torch.empty_strided(layout[1], layout[2], dtype=layout[3], device="meta")
            made.append(converter.from_meta_and_device(mode, meta, device))
    return tree_unflatten(made, spec)


#: Factories: ops of no tensor argument that make one new tensor, which FakeTensorMode makes
#: by their meta kernel on the device asked (its ``constructors`` rule; the CPU if none is).
FACTORIES = frozenset({
    aten.arange.default,
    aten.arange.start,
    aten.arange.start_step,
    aten.empty.memory_format,
    aten.empty_strided.default,
    aten.full.default,
    aten.ones.default,
    aten.rand.default,
    aten.randint.default,
    aten.randint.low,
    aten.randn.default,
    aten.zeros.default,
})


def made_by_factory(mode: FakeTensorMode, func: Any, args: tuple, kwargs: dict
                    ) -> FakeTensor | None:
    """A :data:`FACTORIES` op's fake output made as FakeTensorMode makes it, without its
    dispatch (~0.7 ms a call on a miss of its cache); None where the mode must make it
    (symbolic sizes)."""
    if mode.shape_env is not None or kwargs.get("pin_memory") or kwargs.get("layout") not in (
        None, torch.strided
    ) or any(
        isinstance(leaf, (torch.Tensor, torch.SymInt, torch.SymFloat))
        for leaf in op_leaves((args, kwargs))
    ):
        return None
    device = kwargs.get("device") or torch.device("cpu")
    with unset_fake_temporarily():
        meta = func(*args, **{**kwargs, "device": torch.device("meta")})
    return FakeTensor(mode, meta, device)


#: A list argument with more tensors than this runs its op past the fake cache.
LONG_LIST = 64


def uncached_if_long(mode: FakeTensorMode, args: tuple) -> contextlib.AbstractContextManager:
    """FakeTensorMode's cache off while an op with a list argument of more than
    :data:`LONG_LIST` entries runs; else nothing."""
    if any(isinstance(arg, (list, tuple)) and len(arg) > LONG_LIST for arg in args):
        return disable_fake_tensor_cache(mode)
    return contextlib.nullcontext()
