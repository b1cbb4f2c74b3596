"""Errors through the Python API: one line naming the problem, the original exception kept as
``__cause__``, and no command-line advice (``--debug`` is the CLI's)."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn as nn

import torchroofline
from torchroofline.errors import InputError, ModelError


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
    # (random rows: a given input of ones has alike rows, one computed)
    result = torchroofline.analyze(model, torch.randn(4, 8).half())
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


# --- Inputs and models that used to crash or mislead (issue 28) ------------------------------


def test_a_sparse_or_nested_input_is_refused_in_one_line():
    sparse = torch.eye(8).to_sparse()
    with pytest.raises(InputError, match=r"^input 0 is a sparse_coo tensor.*\.to_dense\(\)"):
        torchroofline.analyze(nn.Linear(8, 4), sparse)
    nested = torch.nested.nested_tensor([torch.ones(2, 8), torch.ones(3, 8)])
    with pytest.raises(InputError, match=r"^input 1 is a nested tensor"):
        torchroofline.analyze(nn.Linear(8, 4), (torch.ones(2, 8), nested))
    quantized = torch.quantize_per_tensor(torch.ones(2, 8), 0.1, 0, torch.qint8)
    with pytest.raises(InputError, match=r"^input 0 is a quantized \(qint8\) tensor.*dequantize"):
        torchroofline.analyze(nn.Identity(), quantized)


def test_a_compiled_model_is_analysed_as_the_module_it_wraps():
    model = nn.Linear(64, 32)
    compiled = torchroofline.analyze(torch.compile(model), torch.empty(16, 64, device="meta"))
    plain = torchroofline.analyze(model, torch.empty(16, 64, device="meta"))
    assert compiled.tensor_flops == plain.tensor_flops == 2 * 16 * 64 * 32  # 2·M·K·N
    assert compiled.sol_ms == plain.sol_ms
    assert compiled.model_name == "Linear"
    assert any("torch.compile wraps (<top level>)" in note for note in compiled.notes)
    # a compiled submodule, and a compiled function the forward calls, ran Inductor on the
    # fake tensors (FakeTensorDeviceMismatchError in its generated code): now run as written
    double = torch.compile(lambda y: y * 2)

    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.compile(nn.Linear(64, 32))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return double(self.inner(x))

    held = torchroofline.analyze(Holder(), torch.empty(16, 64, device="meta"))
    assert held.tensor_flops == 2 * 16 * 64 * 32
    assert held.flops == held.tensor_flops + 16 * 32  # and the doubling, one FLOP an element
    assert any("torch.compile wraps (inner)" in note for note in held.notes)


class RaisesAfterItsLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.l(x)
        raise ValueError("the model's own check failed")  # the line the error names


def test_an_error_the_model_raises_names_its_line_not_the_last_op():
    with pytest.raises(ModelError) as raised:
        torchroofline.analyze(RaisesAfterItsLayer(), torch.ones(2, 8))
    message = str(raised.value)
    line = inspect.getsourcelines(RaisesAfterItsLayer.forward)[1] + 2
    assert f"raised ValueError at test_errors.py:{line} in module '<top level>'" in message
    assert "addmm" not in message  # the last op recorded did not raise it
    assert "fix the model's code there" in message


def test_an_op_that_raises_is_named_with_the_users_line_that_called_it():
    class Mismatch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ torch.ones(3, 3)

    with pytest.raises(ModelError) as raised:
        torchroofline.analyze(Mismatch(), torch.ones(4, 8))
    line = inspect.getsourcelines(Mismatch.forward)[1] + 1
    assert (
        f"at aten.mm.default called from test_errors.py:{line} (`return x @ torch.ones(3, 3)`)"
        in str(raised.value)
    )


# each raised a bare Python error from inside the package: "'NoneType' object has no attribute
# 'strip'" (gpu=None), "no such problem file" of a folder that is there, FileNotFoundError from
# to_json into a missing folder
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda tmp: torchroofline.analyze(nn.Linear(4, 4), torch.ones(2, 4), gpu=None),
         r"^gpu must be a GPU name such as 'h100-sxm' or a GPUSpec, got None"),
        (lambda tmp: torchroofline.get_gpu(100), r"^gpu must be a GPU name .*, got 100"),
        (lambda tmp: torchroofline.analyze_file(tmp),
         r": a folder, not a problem file; pass one of its \.py files \('torchroofline "
         r"kernelbench .*' analyzes them all\)$"),
        (lambda tmp: torchroofline.analyze(nn.Linear(4, 4), torch.ones(2, 4)).to_json(
            str(tmp / "missing" / "r.json")), r"^cannot write '.*r\.json': no folder '.*missing'; "
         r"create it first$"),
    ],
)
def test_a_misused_call_is_our_one_line_error(tmp_path, call, message):
    with pytest.raises(torchroofline.errors.TorchrooflineError, match=message) as raised:
        call(tmp_path)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "missing").exists()
