"""Shared helpers for the analysis tests: a module around a function, and the H100 figures the
closed forms are checked against (datasheet / whitepaper values, see hardware.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
from hypothesis import settings

import torchroofline
from torchroofline.price.roofline import Result

# generated programs are the same on every run (CI and a fresh clone see the examples the
# last green run saw); a search for new counterexamples: pytest --hypothesis-profile=default
settings.register_profile("reproducible", derandomize=True, database=None)
settings.load_profile("reproducible")

#: H100 SXM (Hopper whitepaper, dense): CUDA-core fp32, TF32 / BF16 tensor cores, HBM3.
H100_FP32 = 66.9e12
H100_TF32 = 494.7e12
H100_BF16 = 989.4e12
H100_BANDWIDTH = 3.35e12
H100_L2_BYTES = 50 * 2**20
LAUNCH_S = 2.5e-6  #: hardware.DEFAULT_LAUNCH_OVERHEAD_S, charged once per launch in estimates


class Fn(nn.Module):
    """A module whose forward is ``fn``: a one-line test model without a class of its own."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A shape-only input: no data is allocated, so tests can use large shapes for free."""
    return torch.empty(shape, dtype=dtype, device="meta")


def analyze(model: nn.Module, *inputs: Any, **options: Any) -> Result:
    """``torchroofline.analyze`` with the forward arguments spelled out."""
    return torchroofline.analyze(model, inputs, **options)


def op_names(result: Result) -> list[str]:
    return [op.name for op in result.ops]
