"""The math ladder (``sol_by_math``): each rung at most the rung above it, and never above the
best whole assignment of the ops to the units the rung allows: equal to it where few ops may
move (issue 28 item 3, issue 32 row 8)."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import H100_TF32, analyze, meta
from torchroofline import get_gpu
from torchroofline.costs import MatmulKind
from torchroofline.price.precision import (
    EXACT_ASSIGNMENT_OPS,
    compute_seconds_by_math,
    math_rungs,
    op_precision,
    restoring_switches,
    unit_for,
)
from torchroofline.price.roofline import Result


def _vgg_stack() -> nn.Module:
    """Issue 32 row 8: conv3×3 64,64,M,128,128,M,256,256,M, then Linear 4096→256→10."""
    layers: list[nn.Module] = []
    channels = 3
    for width in (64, 64, "M", 128, 128, "M", 256, 256, "M"):
        if width == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU()]
            channels = width
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(4096, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def test_tf32_rung_keeps_the_fc_layers_where_they_hide():
    # on the H100 the fp32 convolutions run on TF32 tensor cores (cuDNN's default) and the fp32
    # addmms on the CUDA cores, under the convolutions' time. Moving the addmms onto the tensor
    # cores at the TF32 rung adds their time to the convolutions' (8.960 µs against the
    # program's 8.892 µs): the best assignment keeps them, and the rung equals the program
    result = analyze(_vgg_stack(), meta(16, 3, 32, 32), gpu="h100")
    ladder = list(result.sol_by_math_s.values())
    assert ladder == sorted(ladder, reverse=True)
    assert result.sol_by_math_s["tf32"] == result.sol_s
    necessary = result.plans.necessary.ops
    all_on_tensor_s = sum(
        op.flops.tensor for op in necessary if op.flops.kind in (MatmulKind.CONV, MatmulKind.MATMUL)
    ) / H100_TF32
    assert result.sol_s < all_on_tensor_s


class _Mixed(nn.Module):
    """Independent layers of four kinds, each on its own input: an fp32 matmul (CUDA cores
    unless TF32 is allowed), an fp32 1×1 convolution (TF32 tensor cores by default), a bf16
    matmul and a GELU (vector work)."""

    def __init__(self, layers: list[tuple[str, int, int]]) -> None:
        super().__init__()
        self.kinds = [kind for kind, _, _ in layers]
        self.layers = nn.ModuleList(
            nn.Conv2d(k, n, 1) if kind == "conv" else nn.GELU() if kind == "gelu" else
            nn.Linear(k, n, dtype=torch.bfloat16 if kind == "bf16" else None)
            for kind, k, n in layers
        )

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(
            layer(x[:, :, None, None]) if kind == "conv" else layer(x)
            for kind, layer, x in zip(self.kinds, self.layers, inputs, strict=True)
        )

    def inputs(self, rows: list[int]) -> list[torch.Tensor]:
        return [meta(m, layer.in_features if isinstance(layer, nn.Linear) else
                     layer.in_channels if isinstance(layer, nn.Conv2d) else 64,
                     dtype=torch.bfloat16 if kind == "bf16" else torch.float32)
                for m, kind, layer in zip(rows, self.kinds, self.layers, strict=True)]


def _best_whole_assignment_s(result: Result, rungs: tuple[str, ...]) -> float:
    """The least max(tensor, vector seconds) over every assignment of each op's matmul-class
    work, whole, to its own unit or a unit of ``rungs`` (brute force), vector work at the
    fastest vector rate of the precision and ``rungs``."""
    gpu, precision, switches = result.gpu, result.precision, result.switches
    vector_peak = max(gpu.vector_peak(p) for p in (precision, *rungs))
    vector_s = 0.0
    choices = []
    for op in result.plans.necessary.ops:
        vector_s += op.flops.vector / vector_peak
        if op.flops.tensor:
            units = [unit_for(gpu, op_precision(op, precision), op.flops.kind, switches),
                     *(unit_for(gpu, rung, op.flops.kind) for rung in rungs)]
            choices.append([(unit.name, op.flops.tensor / unit.peak_flops_per_s)
                            for unit in units])
    best = float("inf")
    for picks in itertools.product(*choices):
        tensor = sum(seconds for name, seconds in picks if name == "tensor")
        vector = vector_s + sum(seconds for name, seconds in picks if name == "vector")
        best = min(best, max(tensor, vector))
    return best


sizes = st.sampled_from([16, 256, 2048])
layers = st.tuples(st.sampled_from(["fp32", "conv", "bf16", "gelu"]), sizes, sizes)


@settings(max_examples=60, deadline=None)
@given(
    chosen=st.lists(st.tuples(layers, st.sampled_from([1, 64, 1024])), min_size=1, max_size=7),
    gpu=st.sampled_from(["h100-sxm", "a100", "v100", "l4", "t4", "b200"]),
    precision=st.sampled_from(["fp32", "bf16"]),
    tf32_matmuls=st.booleans(),
)
def test_each_rung_is_at_most_the_rung_above_and_the_best_whole_assignment(
    chosen, gpu, precision, tf32_matmuls
):
    model = _Mixed([layer for layer, _ in chosen])
    with restoring_switches():
        torch.backends.cuda.matmul.allow_tf32 = tf32_matmuls
        result = analyze(model, *model.inputs([rows for _, rows in chosen]), gpu=gpu,
                         precision=precision)
    ladder = math_rungs(result.gpu)
    compute = compute_seconds_by_math(result.plans.necessary.ops, result.gpu, precision,
                                      result.switches, ladder)
    assert list(compute.values()) == sorted(compute.values(), reverse=True)
    sol = list(result.sol_by_math_s.values())
    assert sol == sorted(sol, reverse=True)
    for depth, rung in enumerate(ladder):
        # at most 7 ops may go either way, fewer than EXACT_ASSIGNMENT_OPS: the best assignment
        whole = _best_whole_assignment_s(result, ladder[1 : depth + 1])
        assert compute[rung] == pytest.approx(whole, rel=1e-12), rung
    assert compute["program"] == result.compute_sol_s


def test_more_ops_than_are_assigned_exactly_are_shared_out_fractionally():
    # twelve bias-free fp32 Linear(1024, 1024) on (256, 1024) on the L4: at the TF32 rung each mm
    # runs on TF32 tensor cores (t s) or stays on the CUDA cores (v ≈ 2t s). Twelve is more than
    # EXACT_ASSIGNMENT_OPS, so they are shared out until both units finish together: a share f
    # on the tensor cores with 12·f·t = 12·(1 − f)·v, 12·t·v / (t + v) s, below every whole
    # assignment (k mms on the tensor cores: max(k·t, (12 − k)·v)), as a bound must be
    assert EXACT_ASSIGNMENT_OPS < 12
    l4 = get_gpu("l4")
    model = nn.Sequential(*(nn.Linear(1024, 1024, bias=False) for _ in range(12)))
    result = analyze(model, meta(256, 1024), gpu="l4", math="tf32")
    flops = 2 * 256 * 1024 * 1024
    t, v = flops / l4.tensor_peak("tf32"), flops / l4.vector_peak("fp32")
    assert result.compute_sol_s == pytest.approx(12 * t * v / (t + v), rel=1e-12)
    assert result.compute_sol_s < min(max(k * t, (12 - k) * v) for k in range(13))
    assert result.sol_by_math_s["tf32"] <= result.sol_by_math_s["program"]
