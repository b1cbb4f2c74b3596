"""One pricing context: the GPU, precision, math, cache, switches and constants resolved once."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn as nn

import torchroofline
from torchroofline.errors import TorchrooflineError
from torchroofline.price import context as context_module
from torchroofline.price.context import PricingContext


def _counting_get_gpu(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    real = context_module.get_gpu

    def counting(name):
        calls.append(name)
        return real(name)

    monkeypatch.setattr(context_module, "get_gpu", counting)
    return calls


def test_an_analysis_looks_its_gpu_up_once_and_a_reprice_once_more(monkeypatch):
    calls = _counting_get_gpu(monkeypatch)
    result = torchroofline.analyze(nn.Linear(8, 8), torch.randn(2, 8), gpu="h100")
    assert calls == ["h100"]
    moved = result.on("a100-80gb", cache="warm")
    assert calls == ["h100", "a100-80gb"]
    # the re-priced result keeps what it was not told to change
    assert (moved.precision, moved.math, moved.switches) == (
        result.precision, result.math, result.switches
    )
    assert (moved.gpu.name, moved.cache) == ("A100 80GB", "warm")


def test_bad_choices_fail_before_any_trace():
    class Raises(nn.Module):
        def forward(self, x):
            raise AssertionError("traced")  # never reached: the context is resolved first

    for bad in ({"gpu": "h1000"}, {"precision": "fp33"}, {"cache": "lukewarm"}):
        with pytest.raises(TorchrooflineError):
            torchroofline.analyze(Raises(), torch.randn(2), **bad)


def test_the_context_is_a_frozen_fact_with_its_float_size():
    context = PricingContext.resolve("h100-sxm", "bf16", clock_mhz=1500)
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.precision = "fp32"  # type: ignore[misc]
    assert context.float_bytes == 2
    # a locked SM clock scales the compute peaks, the memory stays at its datasheet rate
    nominal = PricingContext.resolve("h100-sxm", "bf16")
    assert context.gpu.memory_bandwidth_bytes_per_s == nominal.gpu.memory_bandwidth_bytes_per_s
    assert context.gpu.vector_peak_flops_per_s["fp32"] < nominal.gpu.vector_peak_flops_per_s["fp32"]
