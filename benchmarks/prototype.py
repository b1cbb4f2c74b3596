"""The prototype's method, kept for the side-by-side benchmark: FLOPs from ptflops and tensor
shapes (hence bytes) from a ``torch.fx`` symbolic trace with ``ShapeProp``, both on real tensors.

FLOPs are ``2 × MACs`` from ``ptflops.get_model_complexity_info(..., backend='pytorch')``: forward
hooks on known ``nn.Module`` types plus ptflops' patched functionals (``F.relu``, ``F.gelu``,
``F.softmax``, pools, ``F.interpolate``) and tensor ops (``torch.matmul``/``mm``/``bmm``/
``addmm``/``baddbmm``, ``torch.add``/``mul`` and their ``Tensor`` methods). Bytes are the unfused
traffic the fx graph implies: every call node reads its tensor inputs (and a called module's
parameters) and writes its outputs, at their real sizes.

Real tensors are the point of the comparison: the model's weights and inputs are built for real
(as the problem file asks) and the forward runs twice (once per tool) on the CPU.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import time
from pathlib import Path
from typing import Any

import torch
import torch.fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp


class _Positional(nn.Module):
    """ptflops calls ``model(**batch)``; this takes the problem's positional inputs as one
    keyword argument so any ``forward`` signature works."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: tuple) -> Any:
        return self.model(*inputs)


def load_real(path: str | Path) -> tuple[nn.Module, tuple]:
    """Execute a KernelBench problem file and build its model and inputs with real tensors."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_prototype_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_inputs()
    return model, tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)


def ptflops_flops(model: nn.Module, inputs: tuple) -> tuple[int | None, str | None]:
    """FLOPs (2 × ptflops MACs) of one forward, or ``(None, reason)`` when ptflops fails."""
    from ptflops import get_model_complexity_info

    wrapped = _Positional(model)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), torch.no_grad():
        macs, _params = get_model_complexity_info(
            wrapped,
            (1,),
            input_constructor=lambda _res: {"inputs": inputs},
            backend="pytorch",
            as_strings=False,
            print_per_layer_stat=False,
            ost=printed,
        )
    if macs is None:  # ptflops prints the exception and returns None
        lines = [line for line in printed.getvalue().splitlines() if line.strip()]
        reason = next((line for line in lines if "Error" in line or "error" in line), "")
        return None, f"ptflops failed: {reason[:160] or 'no result'}"
    return 2 * int(macs), None


def _tensor_bytes(meta: Any) -> int:
    """Bytes of the tensors in an fx ``tensor_meta`` (a TensorMetadata or a nest of them)."""
    if meta is None:
        return 0
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        return int(torch.Size(meta.shape).numel()) * torch.empty((), dtype=meta.dtype).itemsize
    if isinstance(meta, (list, tuple)):
        return sum(_tensor_bytes(item) for item in meta)
    if isinstance(meta, dict):
        return sum(_tensor_bytes(item) for item in meta.values())
    return 0


def fx_bytes(model: nn.Module, inputs: tuple) -> tuple[int | None, int, str | None]:
    """Unfused bytes from an fx symbolic trace + ShapeProp on real tensors:
    ``(bytes, call nodes, None)`` or ``(None, 0, reason)`` when fx cannot trace the model."""
    try:
        graph = torch.fx.symbolic_trace(model)
    except Exception as error:  # noqa: BLE001 — a failure is a result of the method
        return None, 0, f"fx symbolic_trace failed: {type(error).__name__}: {_first(error)}"
    try:
        with torch.no_grad():
            ShapeProp(graph).propagate(*inputs)
    except Exception as error:  # noqa: BLE001
        return None, 0, f"fx ShapeProp failed: {type(error).__name__}: {_first(error)}"
    modules = dict(graph.named_modules())
    total, calls = 0, 0
    for node in graph.graph.nodes:
        if node.op not in ("call_module", "call_function", "call_method"):
            continue
        calls += 1
        total += _tensor_bytes(node.meta.get("tensor_meta"))
        total += sum(_tensor_bytes(arg.meta.get("tensor_meta")) for arg in node.all_input_nodes)
        if node.op == "call_module":
            total += sum(
                p.numel() * p.element_size()
                for p in modules[node.target].parameters(recurse=False)
            )
    return total, calls, None


def _first(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:160] if text else ""


def measure(path: str | Path) -> dict[str, Any]:
    """The whole prototype on one problem file: build for real, ptflops, fx + ShapeProp.
    Times in seconds per stage."""
    start = time.perf_counter()
    model, inputs = load_real(path)
    built = time.perf_counter()
    flops, flops_error = ptflops_flops(model, inputs)
    counted = time.perf_counter()
    nbytes, nodes, fx_error = fx_bytes(model, inputs)
    done = time.perf_counter()
    return {
        "flops": flops,
        "bytes": nbytes,
        "fx_nodes": nodes,
        "errors": [e for e in (flops_error, fx_error) if e],
        "seconds": done - start,
        "build_s": built - start,
        "ptflops_s": counted - built,
        "fx_s": done - counted,
    }


def warm_up() -> None:
    """Run the method once on a tiny model through the layer kinds ours warms up on
    (``torchroofline._preload``), so imports and first-call costs are not timed."""
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(36, 8), nn.LayerNorm(8), nn.GELU(), nn.Softmax(dim=-1),
    )
    inputs = (torch.randn(2, 3, 8, 8),)
    ptflops_flops(model, inputs)
    fx_bytes(model, inputs)
