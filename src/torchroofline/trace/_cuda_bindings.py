"""Python bindings that a CPU-only build cannot run on fake CUDA tensors, spelled in aten ops.

A few ``Tensor`` methods take a CUDA device guard in C++ before any aten op runs, which a
CPU-only build cannot give: ``x[...]``, ``x[...] = v``, ``copy_``, ``contiguous``,
``new_tensor``, ``~x``, ``split`` and ``uniform_`` raise "not linked with support for cuda
devices" on fake CUDA tensors (found by calling every ``Tensor`` method and ~150 ``torch``
functions on fake CUDA tensors with torch 2.13). The aten
ops they lower to (``select``, ``slice``, ``unsqueeze``, ``index``, ``index_put_``, ``copy_``,
``clone``) work, so :data:`SPELLINGS` spells each out in them — the same ops the dispatcher
would have seen. Forms they do not cover raise :class:`UnsupportedIndex`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

aten = torch.ops.aten

#: What PyTorch raises when an op on fake CUDA tensors needs a real CUDA device (a device guard,
#: a cuBLAS/cuSOLVER handle): a CPU-only build, or a CUDA build (what an unpinned install gets)
#: on a machine with no NVIDIA driver or with an older driver than the build needs.
NO_CUDA_TEXTS = (
    "not linked with support for cuda",
    "Found no NVIDIA driver",
    "CUDA driver version is insufficient",
)


class CudaDeviceNeeded(RuntimeError):
    """Raised by the trace itself before a call that needs a real CUDA device and that PyTorch
    would not fail cleanly (:class:`~torchroofline.trace.modes.FakeCudaAutogradGuard`)."""


def needs_cuda_device(error: BaseException | str) -> bool:
    """Whether ``error`` says the op needs a real CUDA device this machine does not have."""
    if isinstance(error, CudaDeviceNeeded):
        return True
    text = str(error)
    return any(sign in text for sign in NO_CUDA_TEXTS)


class UnsupportedIndex(Exception):
    """An index expression these helpers do not spell out (the caller keeps the first error)."""


def _expand_ellipsis(index: tuple, ndim: int) -> tuple:
    skipped = (None, Ellipsis, True)
    used = sum(1 for item in index if not any(item is s for s in skipped))
    used += sum(item.dim() - 1 for item in index if _is_bool_tensor(item))
    if sum(item is Ellipsis for item in index) > 1:
        raise UnsupportedIndex("more than one Ellipsis")
    if Ellipsis not in index:
        return index + (slice(None),) * (ndim - used)
    at = index.index(Ellipsis)
    return index[:at] + (slice(None),) * (ndim - used) + index[at + 1 :]


def _is_bool_tensor(item: Any) -> bool:
    return isinstance(item, torch.Tensor) and item.dtype == torch.bool


def _basic_then_advanced(tensor: torch.Tensor, index: Any) -> tuple[torch.Tensor, list]:
    """Apply ints, slices and None as views; return the view and the tensor-index list (one
    entry per dimension of the view, ``None`` where not indexed)."""
    if not isinstance(index, tuple):
        index = (index,)
    index = tuple(torch.tensor(i) if isinstance(i, list) else i for i in index)
    index = _expand_ellipsis(index, tensor.dim())
    has_tensor = any(isinstance(item, torch.Tensor) for item in index)
    if has_tensor and any(isinstance(item, int) for item in index):
        raise UnsupportedIndex("ints mixed with tensor indices")
    view = tensor
    advanced: list = []
    dim = 0
    for item in index:
        if item is None:
            view = aten.unsqueeze.default(view, dim)
            advanced.append(None)
            dim += 1
        elif isinstance(item, bool) or isinstance(item, torch.SymInt):
            raise UnsupportedIndex(f"index {item!r}")
        elif isinstance(item, int):
            view = aten.select.int(view, dim, item)
        elif isinstance(item, slice):
            start, stop, step = item.start, item.stop, item.step or 1
            if start is not None or stop is not None or step != 1:
                view = aten.slice.Tensor(view, dim, start, stop, step)
            advanced.append(None)
            dim += 1
        elif isinstance(item, torch.Tensor):
            advanced.append(item)
            dim += item.dim() if item.dtype == torch.bool else 1
        else:
            raise UnsupportedIndex(f"index of type {type(item).__name__}")
    return view, advanced


def getitem(tensor: torch.Tensor, index: Any) -> torch.Tensor:
    """``tensor[index]`` through aten ops."""
    view, advanced = _basic_then_advanced(tensor, index)
    if all(item is None for item in advanced):
        return view
    return aten.index.Tensor(view, _trimmed(advanced))


def setitem(tensor: torch.Tensor, index: Any, value: Any) -> None:
    """``tensor[index] = value`` through aten ops."""
    view, advanced = _basic_then_advanced(tensor, index)
    if all(item is None for item in advanced):
        if isinstance(value, torch.Tensor):
            aten.copy_.default(view, value)
        else:
            aten.fill_.Scalar(view, value)
        return
    if not isinstance(value, torch.Tensor):
        value = torch.full((), value, dtype=tensor.dtype, device=tensor.device)
    aten.index_put_.default(view, _trimmed(advanced), value)


def _trimmed(advanced: list) -> list:
    """aten.index takes indices for the leading dimensions only: drop trailing ``None``s."""
    while advanced and advanced[-1] is None:
        advanced.pop()
    return advanced


def copy_(tensor: torch.Tensor, source: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    return aten.copy_.default(tensor, source, non_blocking)


def contiguous(
    tensor: torch.Tensor, memory_format: torch.memory_format = torch.contiguous_format
) -> torch.Tensor:
    if tensor.is_contiguous(memory_format=memory_format):
        return tensor
    return aten.clone.default(tensor, memory_format=memory_format)


def new_tensor(tensor: torch.Tensor, data: Any, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> torch.Tensor:
    return torch.tensor(data, dtype=dtype or tensor.dtype, device=device or tensor.device)


def invert(tensor: torch.Tensor) -> torch.Tensor:
    return aten.bitwise_not.default(tensor)


def split(tensor: torch.Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple:
    if isinstance(split_size_or_sections, int):
        return tuple(aten.split.Tensor(tensor, split_size_or_sections, dim))
    return tuple(aten.split_with_sizes.default(tensor, list(split_size_or_sections), dim))


def uniform_(tensor: torch.Tensor, a: float = 0.0, b: float = 1.0, *, generator: Any = None):
    return aten.uniform_.default(tensor, a, b, generator=generator)


def cuda(tensor: torch.Tensor, device: Any = None, non_blocking: bool = False,
         memory_format: torch.memory_format = torch.preserve_format) -> torch.Tensor:
    """``x.cuda()``: the trace's tensors stand for the GPU's already (fake CUDA ones, or CPU
    ones where the trace runs there), so the move makes no kernel and the tensor stays."""
    if memory_format is torch.preserve_format:
        return tensor
    return contiguous(tensor, memory_format=memory_format)


def to(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """``x.to(...)`` with a CUDA device (``"cuda"``, ``"cuda:1"``, an index): as :func:`cuda`
    for the move, the dtype and layout changes as asked; NotImplemented for any other target
    (``x.to("cpu")``, a dtype alone: torch's own ``to`` runs)."""
    copy = kwargs.pop("copy", False)
    args = tuple("cuda" if isinstance(arg, int) and not isinstance(arg, bool) else arg
                 for arg in args)
    if isinstance(kwargs.get("device"), int):
        kwargs["device"] = "cuda"
    device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    if device is None or device.type != "cuda":
        return NotImplemented
    return tensor.to(dtype or tensor.dtype, non_blocking=non_blocking, copy=copy,
                     memory_format=memory_format or torch.preserve_format)


#: Tensor methods that move a tensor to the GPU, spelled for every trace (they ask for a CUDA
#: device even where the tensor is on one already): method → its spelling, which may answer
#: NotImplemented (not a move to the GPU).
DEVICE_MOVES = {torch.Tensor.cuda: cuda, torch.Tensor.to: to}



class HostMoves(TorchFunctionMode):
    """Building a problem (its model and inputs): ``x.cuda()``, ``model.cuda()`` and
    ``x.to("cuda")`` keep the tensor where it is, as the trace does (:data:`DEVICE_MOVES`),
    where a CPU-only build raised "Torch not compiled with CUDA enabled" before any op."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        move = DEVICE_MOVES.get(func)
        moved = NotImplemented if move is None else move(*args, **kwargs)
        return func(*args, **kwargs) if moved is NotImplemented else moved


#: Tensor method or torch function → its spelling in aten ops.
SPELLINGS = {
    torch.Tensor.__getitem__: getitem,
    torch.Tensor.__setitem__: setitem,
    torch.Tensor.copy_: copy_,
    torch.Tensor.contiguous: contiguous,
    torch.Tensor.new_tensor: new_tensor,
    torch.Tensor.__invert__: invert,
    torch.Tensor.split: split,
    torch.split: split,
    torch.Tensor.uniform_: uniform_,
}
