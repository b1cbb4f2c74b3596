"""The caller's torch modes around an analysis: ``inference_mode`` and ``autocast`` blocks give
the figures of the plain call with the same options, and an ``out=`` op is its functional form
(issue 28 items 1 and 2, issue 32 rows 6 and 7)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import H100_BF16, Fn, analyze, meta
from torchroofline.errors import InputError
from torchroofline.price.roofline import Result
from torchroofline.trace.tracer import _functional_form


def _figures(result: Result) -> tuple:
    """What an analysis found: the ops it traced, every FLOPs and bytes total, and the bound."""
    return (
        [op.name for op in result.trace.ops], result.tensor_flops, result.vector_flops,
        result.compulsory_bytes, result.fused_bytes, result.unfused_bytes, result.sol_s,
    )


# --- inference_mode ------------------------------------------------------------------------


def test_inference_mode_charges_a_linear_its_matmul():
    # under inference_mode PyTorch hands aten.linear to the dispatcher whole (no autograd key
    # to decompose it at), which no cost rule prices: 0 FLOPs. The trace leaves the mode, so
    # the addmm is traced as under no_grad: 2·512·4096·4096 FLOPs
    model, x = nn.Linear(4096, 4096, device="meta"), meta(512, 4096)
    with torch.inference_mode():
        result = analyze(model, x)
    assert result.tensor_flops == 2 * 512 * 4096 * 4096
    assert not result.unsupported_ops
    assert _figures(result) == _figures(analyze(model, x))


class _Composites(nn.Module):
    """conv2d, batch_norm, layer_norm, linear and matmul: each CompositeImplicit in PyTorch."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.norm = nn.BatchNorm2d(8)
        self.layer_norm = nn.LayerNorm(6)
        self.linear = nn.Linear(6, 5)
        self.register_buffer("right", torch.randn(5, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.layer_norm(self.norm(self.conv(x)))
        return torch.matmul(F.linear(y, self.linear.weight), self.right)


@pytest.mark.parametrize("mode", ["inference", "train"])
def test_inference_mode_gives_the_no_grad_figures(mode):
    model, x = _Composites().eval(), torch.randn(2, 3, 8, 8)
    expected = _figures(analyze(model, x, mode=mode))
    with torch.inference_mode():
        made_inside = torch.randn(2, 3, 8, 8)  # an inference tensor
        results = [analyze(model, inputs, mode=mode) for inputs in (x, made_inside)]
    for result in results:
        assert not result.unsupported_ops
        assert _figures(result) == expected


class _Selecting(nn.Module):
    """A linear layer whose positive outputs are summed: ``y[y > 0]`` needs real values."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y[y > 0].sum()


def test_a_model_made_under_inference_mode_traces_as_a_plain_one():
    # parameters and inputs made under inference_mode are inference tensors; the real-data
    # fallback runs ops on them, where aten.linear reached the recorder whole (no FLOPs): it
    # copies them into plain tensors first
    torch.manual_seed(0)
    with torch.inference_mode():
        model, x = _Selecting(), torch.randn(8, 16)
    plain = _Selecting()
    plain.load_state_dict(model.state_dict())
    made_inside = analyze(model, x)
    assert "needs real data" in made_inside.notes[0]
    assert not made_inside.unsupported_ops
    assert _figures(made_inside) == _figures(analyze(plain, x.clone()))


# --- autocast ------------------------------------------------------------------------------


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024))


def test_autocast_runs_an_inference_forward_in_bf16():
    # torch.autocast casts the input and each weight to bf16 for the addmm: the matmuls read
    # and write bf16 and run on bf16 tensor cores (2 · 2·256·1024·1024 FLOPs at 989.4 TFLOP/s)
    result = analyze(_mlp(), meta(256, 1024), autocast="bf16")
    matmuls = [op for op in result.trace.ops if op.base == "addmm"]
    assert len(matmuls) == 2
    assert {ref.dtype for op in matmuls for ref in (*op.reads, *op.writes)} == {"bfloat16"}
    assert result.tensor_flops == 2 * (2 * 256 * 1024 * 1024)
    assert result.time_ms["compute_sol"] == pytest.approx(result.tensor_flops / H100_BF16 * 1e3)
    assert result.sol_s < analyze(_mlp(), meta(256, 1024)).sol_s


def test_a_cpu_autocast_block_around_the_call_is_honoured():
    model, x = _mlp(), meta(256, 1024)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = analyze(model, x)
    assert _figures(inside) == _figures(analyze(model, x, autocast="bf16"))
    assert _figures(inside) != _figures(analyze(model, x))


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_a_cuda_autocast_block_is_honoured_or_refused_in_one_line():
    # without CUDA, torch.autocast("cuda") turns itself off before the analysis can see its
    # dtype (and looks like an enabled=False block): refused, naming autocast=
    model, x = _mlp(), meta(256, 1024)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        if torch.cuda.is_available():
            assert _figures(analyze(model, x)) == _figures(analyze(model, x, autocast="bf16"))
        else:
            with pytest.raises(InputError, match="autocast='bf16'"):
                analyze(model, x)


def test_an_autocast_block_leaves_the_analysis_as_it_found_it():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        analyze(_mlp(), meta(4, 1024), autocast="fp16")
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu") and not torch.is_autocast_enabled("cuda")


def test_training_options_in_inference_are_refused_not_ignored():
    with pytest.raises(InputError, match="training-step option") as refused:
        analyze(_mlp(), meta(4, 1024), loss=lambda out: out.sum())
    assert "ignored" not in str(refused.value)


# --- out= ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("m", "k", "n"), [(64, 32, 64), (8, 16, 4)])
@pytest.mark.parametrize("make", [torch.randn, meta])
def test_mm_into_a_forward_input_costs_what_the_functional_mm_does(m, k, n, make):
    # torch.mm(a, b, out=o) overwrites o: its old value is no input of the product. Both
    # forms: 2·m·n·k FLOPs; compulsory a and b read, the product written, 4 B each
    into = analyze(Fn(lambda a, b, o: torch.mm(a, b, out=o)), make(m, k), make(k, n), make(m, n))
    functional = analyze(Fn(lambda a, b, o: torch.mm(a, b)), make(m, k), make(k, n), make(m, n))
    assert into.flops == functional.flops == 2 * m * n * k
    assert into.compulsory_bytes == functional.compulsory_bytes == 4 * (m * k + k * n + m * n)
    assert into.compulsory_bytes <= into.fused_bytes <= into.unfused_bytes
    assert _figures(into)[1:] == _figures(functional)[1:]


@pytest.mark.parametrize(
    ("out_form", "functional"),
    [
        (torch.ops.aten.mm.out, torch.ops.aten.mm.default),
        (torch.ops.aten.add.out, torch.ops.aten.add.Tensor),
        (torch.ops.aten.sum.IntList_out, torch.ops.aten.sum.dim_IntList),
        (torch.ops.aten.max.dim_max, torch.ops.aten.max.dim),
        (torch.ops.aten.add_.Tensor, None),  # in place: reads what it writes
        (torch.ops.aten.mm.default, None),
    ],
)
def test_an_out_overload_is_recorded_as_its_functional_form(out_form, functional):
    assert _functional_form(out_form) == functional
