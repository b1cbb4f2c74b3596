"""Errors through the Python API: one line naming the problem, the original exception kept as
``__cause__``, and no command-line advice (``--debug`` is the CLI's)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import torchroofline
from torchroofline.errors import ModelError


@pytest.mark.parametrize(
    ("model", "inputs"),
    [
        (nn.Linear(8, 8), (torch.ones(4, 8, dtype=torch.int64),)),  # addmm
        (nn.Linear(8, 8, bias=False), (torch.ones(4, 8, dtype=torch.int64),)),  # mm
    ],
)
def test_a_dtype_mismatch_eager_pytorch_rejects_is_an_error(model, inputs):
    with pytest.raises(RuntimeError, match="same dtype"):
        model(*inputs)  # eager PyTorch refuses it
    with pytest.raises(ModelError, match="same dtype") as raised:
        torchroofline.analyze(model, inputs)
    assert "torch.int64 and torch.float32" in str(raised.value)


def test_matching_half_precision_operands_still_trace():
    model = nn.Linear(8, 8).half()
    result = torchroofline.analyze(model, torch.ones(4, 8, dtype=torch.half))
    assert result.tensor_flops == 2 * 4 * 8 * 8


def test_api_errors_keep_their_cause_and_give_no_cli_advice():
    class Broken(nn.Module):
        def forward(self, x):
            return x @ torch.ones(3, 3)  # (4, 8) @ (3, 3): shapes do not match

    with pytest.raises(ModelError) as raised:
        torchroofline.analyze(Broken(), torch.ones(4, 8))
    error = raised.value
    assert isinstance(error.__cause__, RuntimeError)
    assert "--debug" not in str(error)
    assert "\n" not in str(error)


@pytest.mark.parametrize("enabled", [True, False])
def test_an_analysis_leaves_the_garbage_collector_as_it_found_it(enabled):
    # analyze pauses Python's cyclic collector while it runs, also when the model fails
    import gc

    (gc.enable if enabled else gc.disable)()
    try:
        torchroofline.analyze(nn.Linear(8, 8), torch.empty(2, 8, device="meta"))
        assert gc.isenabled() == enabled
        with pytest.raises(ModelError):
            torchroofline.analyze(nn.Linear(8, 8), (torch.ones(4, 8, dtype=torch.int64),))
        assert gc.isenabled() == enabled
    finally:
        gc.enable()
