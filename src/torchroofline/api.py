"""The public entry point: trace → costs → plans → price, in one call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch.nn as nn

from .hardware import GPUSpec
from .plans import make_plans
from .roofline import Result, price
from .trace import REAL_FALLBACK_LIMIT_BYTES, trace_model
from .training import step_trace_options

if TYPE_CHECKING:
    from .estimate import EstimateParams


def analyze(
    model: nn.Module,
    inputs: Any,
    gpu: str | GPUSpec = "h100-sxm",
    precision: str = "fp32",
    *,
    cache: str = "cold",
    actual_ms: float | None = None,
    real_fallback_limit_bytes: int = REAL_FALLBACK_LIMIT_BYTES,
    name: str | None = None,
    estimate_params: EstimateParams | None = None,
    mode: str = "inference",
    loss: Callable[[Any], Any] | None = None,
    optimizer: str = "adamw",
    optimizer_options: Mapping[str, Any] | None = None,
) -> Result:
    """How fast could ``model(*inputs)`` run on ``gpu`` at ``precision``?

    ``inputs`` is a tensor or a tuple/list of forward arguments; tensors and parameters may be
    real, ``meta`` or fake, in any mix — the model is traced once on fake tensors and no tensor
    data is allocated. ``cache`` is ``"cold"`` (L2 flushed between runs, KernelBench's timing)
    or ``"warm"``. ``actual_ms`` sets a measured time (ms) against the bound. fp32 matmuls,
    convolutions and RNNs run where the torch switches set now allow (``allow_tf32``,
    ``torch.set_float32_matmul_precision``, ``torch.backends.cudnn.allow_tf32``).
    ``estimate_params`` replaces the performance model's fitted constants (e.g. your own host
    costs, :class:`~torchroofline.estimate.EstimateParams`).

    ``mode="train"`` analyses one training step (:mod:`~torchroofline.training`): the forward,
    ``loss(output)`` (default: a gradient of ones seeded on each output, as ``output.sum()``
    would), autograd's backward and one step of ``optimizer`` ("adamw", "adam", "sgd",
    "adafactor" or "none") built with ``optimizer_options`` (e.g. ``{"fused": True}``); the
    Result's ``phases`` split its figures by forward, backward and optimizer.
    """
    from .hardware import get_gpu
    from .precision import MathSwitches, check_precision

    spec = get_gpu(gpu)
    check_precision(precision)  # fail before tracing
    switches = MathSwitches.current()  # fp32 matmul-class units follow the user's torch switches
    trace = trace_model(
        model, inputs, real_fallback_limit_bytes=real_fallback_limit_bytes, name=name,
        **step_trace_options(mode, loss, optimizer, optimizer_options),
    )
    return price(
        make_plans(trace), spec, precision, cache, actual_ms,
        estimate_params=estimate_params, switches=switches,
    )
