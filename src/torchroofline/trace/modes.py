"""The torch modes a caller may hold around an analysis, and the ones the trace sets itself.

``torch.inference_mode``: the trace leaves it (:func:`~torchroofline.trace.tracer.trace_model`).
Autocast: the trace sets the dispatcher's autocast state itself (:func:`autocast_state`), from
``autocast=`` or from the ``torch.autocast`` block around the call (:func:`caller_autocast`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from ..errors import InputError
from ._cuda_bindings import CudaDeviceNeeded

#: ``autocast=`` names → the dtype ``torch.autocast`` runs the forward's matmuls in.
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
_AUTOCAST_NAMES = {dtype: name for name, dtype in AUTOCAST_DTYPES.items()}

#: The devices a trace runs on (fake CUDA, or fake/real CPU after a fallback).
_TRACE_DEVICES = ("cuda", "cpu")


@contextlib.contextmanager
def autocast_state(device: str, dtype: torch.dtype | None) -> Iterator[None]:
    """Autocast on ``device`` in ``dtype`` (None: off) and off on the other trace devices,
    whatever the caller had set, as ``torch.autocast`` would set it; restored on exit. It sets
    the dispatcher's state directly: ``torch.autocast("cuda")`` turns itself off on a CPU-only
    build, but the state holds for fake CUDA tensors."""
    saved = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _TRACE_DEVICES]
    for each in _TRACE_DEVICES:
        on = dtype is not None and each == device
        torch.set_autocast_enabled(each, on)
        if on:
            torch.set_autocast_dtype(each, dtype)
    torch.autocast_increment_nesting()
    try:
        yield
    finally:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        for each, enabled, saved_dtype in saved:
            torch.set_autocast_enabled(each, enabled)
            torch.set_autocast_dtype(each, saved_dtype)


def caller_autocast() -> str | None:
    """The ``autocast=`` name of the ``torch.autocast`` block the caller is in (CUDA's, else
    the CPU's); None outside one. A block that is open but off is refused: on a PyTorch build
    without CUDA ``torch.autocast("cuda")`` turns itself off (with a warning) before any
    analysis can see its dtype, and it cannot be told from an ``enabled=False`` block."""
    for device in _TRACE_DEVICES:
        if torch.is_autocast_enabled(device):  # both run only bf16 or fp16 autocast
            return _AUTOCAST_NAMES[torch.get_autocast_dtype(device)]
    nesting = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    if nesting:
        raise InputError(
            "the analysis runs inside a torch.autocast block that is off (without CUDA, "
            "torch.autocast('cuda') turns itself off); leave the block and pass autocast='bf16' "
            "or 'fp16' (CLI: --autocast)"
        )
    return None


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch's CPU ops on one thread for the block: for the analysis's own small ops on real
    values (a causal mask built, its bands, rows and columns picked and counted by the plans),
    OpenMP's fork and join, and its workers spinning after each, cost more than the ops; where
    other processes hold the cores they waited on each other (MinGPT's causal attention: 0.58
    -> 0.27 s of CPU on two shared cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def quiet_fake_tensor_log() -> Iterator[None]:
    """FakeTensorMode logs a traceback for every op whose meta kernel raises; the error itself
    reaches the user as one ModelError line instead."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


#: ``torch.cuda`` host calls a forward may make (to time itself, pick a device, free cached
#: memory, choose a dtype) → what the trace runs instead where no CUDA device exists: they
#: order or query the host, not the GPU's work, so they cost the bound nothing; and the check
#: ``torch.autocast("cuda")`` makes before it turns itself on (a ``with torch.autocast("cuda",
#: torch.float16):`` block in a forward was silently off: fp32 matmuls priced).
_HOST_CUDA_CALLS = {
    "synchronize": lambda device=None: None,
    "current_device": lambda: 0,
    "set_device": lambda device: None,
    "empty_cache": lambda: None,
    "is_bf16_supported": lambda including_emulation=True: True,
}
_AMP_CHECK = ("amp_definitely_not_available", lambda: False)


@contextlib.contextmanager
def host_cuda_calls() -> Iterator[None]:
    """:data:`_HOST_CUDA_CALLS` and :data:`_AMP_CHECK` stand in for ``torch.cuda``'s own while
    the block runs, on a machine without a CUDA device (``torch.cuda.synchronize()`` in a forward
    otherwise fails with "Torch not compiled with CUDA enabled"); restored on exit. Nothing
    changes where a device exists."""
    if torch.cuda.is_available():
        yield
        return
    import torch.cuda.amp.common as amp_common

    replaced = [(torch.cuda, name, stand_in) for name, stand_in in _HOST_CUDA_CALLS.items()]
    replaced.append((amp_common, *_AMP_CHECK))
    saved = [(module, name, getattr(module, name)) for module, name, _ in replaced]
    for module, name, stand_in in replaced:
        setattr(module, name, stand_in)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


class FakeCudaAutogradGuard(TorchFunctionMode):
    """Stops a forward that records an autograd graph on fake CUDA tensors (a gradient penalty
    or a physics-informed loss: ``torch.autograd.grad`` under ``torch.enable_grad()``) before
    the call that would record it runs. Autograd opens a CUDA device guard for the graph's first
    node, which a CPU-only build cannot give: it throws from C++ code that cannot pass the
    error on, and the process aborts; a CUDA build without a driver raises a misleading error.
    The :class:`CudaDeviceNeeded` it raises makes the trace start again on fake CPU tensors,
    where autograd runs as in a training step (:mod:`.training`)."""

    def __init__(self, recorder: Any) -> None:
        super().__init__()
        self.recorder = recorder  #: the trace's recorder: its ``current_op`` names the call

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if torch.is_grad_enabled() and _records_grad_on_cuda(args, kwargs):
            self.recorder.current_op = getattr(func, "__name__", str(func))
            raise CudaDeviceNeeded(
                f"{self.recorder.current_op} records an autograd graph on fake CUDA tensors, "
                "which needs a CUDA device"
            )
        return func(*args, **kwargs)


def fake_cuda_autograd_guard(device: str, recorder: Any) -> contextlib.AbstractContextManager:
    """The :class:`FakeCudaAutogradGuard` of a trace on ``device`` ("cuda" or "cpu")."""
    return FakeCudaAutogradGuard(recorder) if device == "cuda" else contextlib.nullcontext()


def _records_grad_on_cuda(args: tuple, kwargs: dict[str, Any]) -> bool:
    return any(
        isinstance(leaf, torch.Tensor) and leaf.requires_grad and leaf.is_cuda
        for leaf in tree_leaves((args, kwargs))
    )
