"""The trace's fallbacks for a machine without a CUDA device, pinned on every build (issue 28).

Fake CUDA tensors need no GPU, but a few calls still want one, and PyTorch says so only in its
error texts: "not linked with support for cuda" (a CPU-only build), "Found no NVIDIA driver"
and "CUDA driver version is insufficient" (a CUDA build on a machine without a driver, or with
an older one), and "attempted to run this operator with Meta tensors" (an op with no meta
kernel). The trace parses them: an op that raises one runs on meta copies and stays on fake
CUDA; one with no meta kernel either makes the whole trace start again on fake CPU tensors; a
Python binding that raises one is spelled in aten ops. Each text is simulated by an op that
raises it, so each path runs on every build; and each text is checked against what this
PyTorch really says, where this build can say it, so a reword fails a test instead of silently
turning a fallback into a ModelError.
"""

from __future__ import annotations

import ctypes
import glob
import os

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.overrides import handle_torch_function, has_torch_function

from conftest import Fn, analyze, meta, op_names
from torchroofline.trace import tracer as tracing
from torchroofline.trace._cuda_bindings import NO_CUDA_TEXTS, SPELLINGS, needs_cuda_device

#: PyTorch's "no meta kernel" text as :func:`tracer._on_meta_or_cpu` parses it: the op's name,
#: then this
NO_META_TEXT = ": attempted to run this operator with Meta tensors"

# --- What PyTorch says ---------------------------------------------------------------------


def _said_by_fake_cuda_copy() -> str:
    """A CPU-only build: ``copy_`` takes a CUDA device guard before any fake kernel runs."""
    if torch.version.cuda is not None:
        pytest.skip("a CUDA build gives fake CUDA tensors their device guard")
    with FakeTensorMode():
        a = torch.empty(4, device="cuda")
        with pytest.raises(RuntimeError) as raised:
            a.copy_(torch.empty(4, device="cuda"))
    return str(raised.value)


def _said_by_cuda_init() -> str:
    """A CUDA build on a machine without an NVIDIA driver: the first CUDA tensor."""
    if torch.version.cuda is None or torch.cuda.is_available():
        pytest.skip("only a CUDA build on a machine without a driver says it")
    with pytest.raises(RuntimeError) as raised:
        torch.zeros(1, device="cuda")
    return str(raised.value)


def _said_by_cuda_runtime() -> str:
    """A CUDA build: the CUDA runtime's text for cudaErrorInsufficientDriver (35), which PyTorch
    passes on when the driver is older than the runtime it ships; read without a GPU."""
    if torch.version.cuda is None:
        pytest.skip("only a CUDA build ships the CUDA runtime")
    site = os.path.dirname(os.path.dirname(torch.__file__))
    found = sorted(glob.glob(os.path.join(site, "nvidia", "**", "libcudart.so*"), recursive=True))
    if not found:
        pytest.skip("no CUDA runtime library beside torch")
    runtime = ctypes.CDLL(found[0])
    runtime.cudaGetErrorString.restype = ctypes.c_char_p
    return runtime.cudaGetErrorString(35).decode()


@pytest.mark.parametrize(
    ("sign", "said"),
    [
        (NO_CUDA_TEXTS[0], _said_by_fake_cuda_copy),
        (NO_CUDA_TEXTS[1], _said_by_cuda_init),
        (NO_CUDA_TEXTS[2], _said_by_cuda_runtime),
    ],
)
def test_pytorch_still_says_each_no_cuda_text(sign, said):
    assert len(NO_CUDA_TEXTS) == 3  # a new text needs its own check here
    text = said()
    assert sign in text
    assert needs_cuda_device(RuntimeError(text))


def test_pytorch_still_names_the_op_with_no_meta_kernel():
    # bincount has no meta kernel (its output size is a value): the trace parses the op's name
    # out of the error, and an op with no meta kernel needs the fake CPU retrace
    counts = torch.empty(4, dtype=torch.long, device="meta")
    with pytest.raises(NotImplementedError) as raised:
        torch.bincount(counts)
    assert str(raised.value).startswith(f"aten::bincount{NO_META_TEXT}")
    with pytest.raises(RuntimeError) as retrace:
        tracing._on_meta_or_cpu(torch.ops.aten.bincount.default, (counts,), {})
    assert needs_cuda_device(retrace.value)


def test_other_errors_are_not_read_as_a_missing_device():
    assert not needs_cuda_device(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not needs_cuda_device("CUDA out of memory")


# --- What the trace does with each text ----------------------------------------------------

#: what the simulated op raises on fake CUDA tensors ("" raises nothing), and whether its meta
#: kernel is missing as well
_SIMULATED = {"text": "", "no_meta": False}

_LIBRARY = torch.library.Library("torchroofline_test", "DEF")  # kept: ops live while it does
_LIBRARY.define("twice(Tensor x) -> Tensor")


@torch.library.impl(_LIBRARY, "twice", "CPU")
def _twice_on_cpu(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@torch.library.register_fake("torchroofline_test::twice", lib=_LIBRARY)
def _twice_fake(x: torch.Tensor) -> torch.Tensor:
    if x.device.type == "cuda" and _SIMULATED["text"]:
        raise RuntimeError(f"PyTorch says: {_SIMULATED['text']}")
    if x.device.type == "meta" and _SIMULATED["no_meta"]:
        raise NotImplementedError(f"torchroofline_test::twice{NO_META_TEXT}, but there was none")
    return torch.empty_like(x)


@pytest.fixture
def simulated(monkeypatch):
    # each test starts with empty caches: fake dispatch and the meta fallback remember what the
    # op made for these shapes, and would not call it again to see it raise
    monkeypatch.setattr(FakeTensorMode, "cache", {})
    monkeypatch.setattr(tracing, "_META_OUTPUTS", {})

    def simulate(text: str, no_meta: bool = False) -> None:
        monkeypatch.setitem(_SIMULATED, "text", text)
        monkeypatch.setitem(_SIMULATED, "no_meta", no_meta)

    return simulate


def _twice_plus_one(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.torchroofline_test.twice(x) + 1


def test_the_simulated_op_traces_on_fake_cuda_when_it_raises_nothing(simulated):
    simulated("")
    result = analyze(Fn(_twice_plus_one), meta(4, 8))
    assert result.trace.device == "cuda"
    assert "torchroofline_test.twice.default" in op_names(result)


@pytest.mark.parametrize("text", NO_CUDA_TEXTS)
def test_an_op_that_needs_a_cuda_device_runs_on_meta_and_stays_on_fake_cuda(simulated, text):
    simulated(text)
    result = analyze(Fn(_twice_plus_one), meta(4, 8))
    assert result.trace.device == "cuda"
    assert not any(note.startswith("traced") for note in result.notes)
    twice = [op for op in result.trace.ops if op.name == "torchroofline_test.twice.default"]
    assert len(twice) == 1 and twice[0].output.shape == (4, 8)


@pytest.mark.parametrize("text", NO_CUDA_TEXTS)
def test_an_op_with_no_meta_kernel_either_retraces_on_fake_cpu(simulated, text):
    simulated(text, no_meta=True)
    result = analyze(Fn(_twice_plus_one), meta(4, 8))
    assert result.trace.device == "cpu"
    (note,) = [note for note in result.notes if note.startswith("traced on fake CPU")]
    assert "without a CUDA device" in note
    assert "torchroofline_test.twice.default" in op_names(result)


def test_an_op_with_no_meta_kernel_that_fails_otherwise_is_the_model_s_error(simulated):
    simulated("CUDA error: an illegal memory access was encountered", no_meta=True)
    with pytest.raises(Exception, match="illegal memory access"):
        analyze(Fn(_twice_plus_one), meta(4, 8))


def _binding(x: torch.Tensor) -> torch.Tensor:
    """A Python binding that, like ``copy_`` on a CPU-only build, fails before dispatch."""
    if has_torch_function((x,)):
        return handle_torch_function(_binding, (x,), x)
    raise RuntimeError(f"PyTorch says: {_SIMULATED['text']}")


@pytest.mark.parametrize("text", NO_CUDA_TEXTS)
def test_a_binding_that_needs_a_cuda_device_is_spelled_in_aten_ops(simulated, monkeypatch, text):
    simulated(text)
    monkeypatch.setitem(SPELLINGS, _binding, torch.ops.aten.neg.default)
    result = analyze(Fn(lambda x: _binding(x) + _binding(x)), meta(4, 8))
    assert result.trace.device == "cuda"
    assert op_names(result).count("aten.neg.default") == 2
