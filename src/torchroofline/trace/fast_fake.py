"""Two of FakeTensorMode's general paths that are slow for programs of many small ops.

Views of fake tensors are made straight from their meta kernels (:func:`direct_view`). A
view's output is sizes, strides and an offset into its input's storage. FakeTensorMode makes
one in about 0.7 ms (a cache lookup that misses for every new slice start, a Python
decomposition that dispatches ``as_strided`` again, output validation); the view's own C++
kernel on the fake tensor's meta storage, wrapped as FakeTensorMode wraps any meta output,
takes about 0.04 ms. A program that slices a tensor 100,000 times (``torch.cat([x[i:i+1] for
i in range(n)])``) traces in seconds instead of minutes.

An op with a long list of tensors (that ``cat``) runs past FakeTensorMode's cache
(:func:`uncached_if_long`): its key hashes every tensor's metadata (seconds at 100,000 tensors)
for an entry no later op will hit.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._subclasses.fake_tensor import (
    FakeTensor,
    FakeTensorMode,
    disable_fake_tensor_cache,
    in_kernel_invocation_manager,
)

aten = torch.ops.aten

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


#: A list argument with more tensors than this runs its op past the fake cache.
LONG_LIST = 64


def uncached_if_long(mode: FakeTensorMode, args: tuple) -> contextlib.AbstractContextManager:
    """FakeTensorMode's cache off while an op with a list argument of more than
    :data:`LONG_LIST` entries runs; else nothing."""
    if any(isinstance(arg, (list, tuple)) and len(arg) > LONG_LIST for arg in args):
        return disable_fake_tensor_cache(mode)
    return contextlib.nullcontext()
