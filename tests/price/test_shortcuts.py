"""An algebraic shortcut named: ``result.rewrites`` (JSON ``rewrites``), ``time_ms.sol`` after
the rewrites beside ``time_ms.sol_as_written``, the report's and the prompt's lines, and the
verdict on a measured time between the two bounds."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import H100_BANDWIDTH, H100_FP32, H100_TF32, analyze, meta
from torchroofline.present.report import format_prompt
from torchroofline.price.roofline import Result
from torchroofline.units import human_ms

SIZE = 4096


class _Scaled(nn.Module):
    """(fc(x) / 2).sum(1): a sum through a scale, which the demand walk's own rule misses."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(SIZE, SIZE, bias=False, device="meta")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.fc(x) / 2).sum(1)


def _result() -> Result:
    return analyze(_Scaled(), meta(SIZE, SIZE), gpu="h100")


def test_the_shortcut_is_in_the_result_and_its_json() -> None:
    # as written: 2·n³ for the product, n² each for the divide and the sum; after: n² adds to
    # sum W, 2·n² for x @ ΣW, n divides
    result = _result()
    (shortcut,) = result.rewrites
    assert (shortcut.module, shortcut.rule, shortcut.op) == (
        "fc", "sum through the linear map", "aten.mm.default"
    )
    assert shortcut.flops_before == 2 * SIZE**3 + 2 * SIZE**2
    assert shortcut.flops_after == 3 * SIZE**2 + SIZE
    assert shortcut.time_saved_ms > 0
    data = result.to_dict()
    assert data["rewrites"] == [shortcut.to_dict()]
    assert data["time_ms"]["sol_as_written"] > 10 * data["time_ms"]["sol"]
    assert result.time_ms["sol"] == result.sol_ms


def test_the_report_and_the_prompt_state_the_shortcut() -> None:
    result = _result()
    sol = result.time_ms
    text = result.format(top=0)
    assert "Algebraic shortcut (fc, sum through the linear map): 137.47 GFLOPs → 50.34 MFLOPs" in (
        text
    )
    assert "Algebraic shortcut the bound assumes: sum through the linear map at fc" in (
        format_prompt(result)
    )
    assert sol["sol_as_written"] > sol["sol"]


def test_a_time_between_the_bounds_needs_the_shortcut() -> None:
    result = _result()
    low, high = result.time_ms["sol"], result.time_ms["sol_as_written"]
    actual = result.with_actual((low + high) / 2).actual
    # halfway between the fp32 bounds is above the bound as written with TF32 math
    assert actual.shortcut == (
        "possible only with an algebraic shortcut (fc, sum through the linear map), or as "
        "written with TF32 or lower math (check your tolerance)"
    )
    assert actual.to_dict()["shortcut"] == actual.shortcut
    text = result.with_actual((low + high) / 2).format(0)
    assert "possible only with an algebraic shortcut" in text
    assert result.with_actual(2 * high).actual.shortcut is None


def test_no_shortcut_no_second_bound() -> None:
    result = analyze(nn.Linear(SIZE, SIZE, device="meta"), meta(SIZE, SIZE))
    assert not result.rewrites
    assert "sol_as_written" not in result.time_ms and result.to_dict()["rewrites"] == []


N = 2048  #: the sizes of the mechanism-independence checks below


class _Variant(nn.Module):
    """A GEMM's output summed in one of the ways a shortcut may be spelled: ``reduce`` takes
    the module (for its weight, bias and ``fc``) and the inputs."""

    def __init__(self, reduce) -> None:
        super().__init__()
        self.fc = nn.Linear(N, N, device="meta")
        self.reduce = reduce

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.reduce(self, *inputs)


_VARIANTS = {
    # issue 38 item 2: .sum(0) was named by the rewrite, .sum(1) only taken by the demand walk
    "sum over rows": (lambda m, x: m.fc(x).sum(0), (meta(N, N),)),
    "sum over columns": (lambda m, x: m.fc(x).sum(1), (meta(N, N),)),
    "mean over columns": (lambda m, x: m.fc(x).mean(1), (meta(N, N),)),
    "sum over both": (lambda m, x: m.fc(x).sum((0, 1)), (meta(N, N),)),
    "x @ W + b, last dim": (lambda m, x: (x @ m.fc.weight + m.fc.bias).sum(-1), (meta(N, N),)),
    "bmm": (lambda m, a, b: torch.bmm(a, b).sum(1), (meta(4, N, N), meta(4, N, N))),
    "3-D input": (lambda m, x: m.fc(x).sum(-1, keepdim=True), (meta(2, N, N),)),
    # a sum with a dtype, which the rewrite's rule leaves to the demand walk
    "sum with a dtype": (lambda m, x: m.fc(x).sum(1, dtype=torch.float32), (meta(N, N),)),
}


def _named(result: Result) -> None:
    """The shortcut is named, with the bound as written, and a time between the two bounds
    reads as possible only with it."""
    assert "sum through the linear map" in [shortcut.rule for shortcut in result.rewrites]
    low, high = result.time_ms["sol"], result.time_ms["sol_as_written"]
    assert high > 10 * low
    assert result.judge((low + high) / 2).kind.startswith("shortcut")


def test_every_spelling_of_the_sum_names_its_shortcut() -> None:
    for name, (reduce, inputs) in _VARIANTS.items():
        result = analyze(_Variant(reduce), *inputs, gpu="h100")
        try:
            _named(result)
        except AssertionError as error:
            raise AssertionError(name) from error


class _SumBesideChain(nn.Module):
    """fc(x).sum(1, dtype=float32), which only the demand walk's rule takes (a reduced
    product), beside (a @ b) @ v, which only a rewrite takes: the bound walks the rewritten
    program, and its reduced product is named too."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(N, N, device="meta")

    def forward(self, x, a, b, v):
        return self.fc(x).sum(1, dtype=torch.float32), (a @ b) @ v


def test_a_reduced_product_in_the_rewritten_program_is_named() -> None:
    result = analyze(_SumBesideChain(), meta(N, N), meta(N, N), meta(N, N), meta(N, 1),
                     gpu="h100")
    rules = {shortcut.rule: shortcut for shortcut in result.rewrites}
    assert set(rules) == {"matrix chain reassociated", "sum through the linear map"}
    summed = rules["sum through the linear map"]
    # as written: the addmm's 2·N³ (its bias rides in the epilogue) and the sum's N² adds;
    # the reduced product: N² + N adds to sum W and b, then 2·N² for x @ ΣW
    assert (summed.module, summed.op) == ("fc", "aten.addmm.default")
    assert summed.flops_before == 2 * N**3 + N**2
    assert summed.flops_after == N**2 + N + 2 * N**2
    _named(result)


def _plus_input(constant):
    """``constant(y) + x`` with y = fc(x): the output is x, whatever fc computes, once the
    identity in ``constant`` is taken; as written, the GEMM runs."""

    class PlusInput(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(N, N, device="meta")

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return constant(self.fc(x)) + x

    return PlusInput()


def _minus_own_mean(y: torch.Tensor) -> torch.Tensor:
    # KernelBench level 2 #80's step: a mean over a dim of size 1 is the value, so this is 0
    peak = y.amax(1, keepdim=True)
    return peak - peak.mean(1, keepdim=True)


_IDENTITIES = {
    # the algebra's rewrite
    "x·0 = 0": lambda y: y * 0,
    # the demand walk's structure rules, the same kind of identity
    "x − x = 0": _minus_own_mean,
    "softmax over a size-1 dim is 1": lambda y: torch.softmax(y.mean(1, keepdim=True), 1) - 1,
}


def test_an_identity_the_demand_walk_takes_is_named_as_the_algebras() -> None:
    # the bound reads x and writes the output (2·N² fp32 elements: memory-bound); as written
    # the GEMM's 2·N³ FLOPs run first. A time 10x the bound needs the identity, whichever
    # mechanism takes it
    for rule, constant in _IDENTITIES.items():
        result = analyze(_plus_input(constant), meta(N, N), gpu="h100")
        (shortcut,) = result.rewrites
        assert shortcut.rule == rule
        # undone, the GEMM the identity left unneeded runs again: the whole difference
        assert shortcut.time_saved_ms == pytest.approx(
            result.time_ms["sol_as_written"] - result.time_ms["sol"]), rule
        assert result.time_ms["sol"] == pytest.approx(2 * N * N * 4 / H100_BANDWIDTH * 1e3)
        assert result.time_ms["sol_as_written"] > 2 * N**3 / H100_FP32 * 1e3
        assert result.judge(10 * result.time_ms["sol"]).kind.startswith("shortcut"), rule


def test_the_walks_names_are_the_algebras() -> None:
    from torchroofline.plan.algebra.linear import RULE
    from torchroofline.plan.demand import SHORTCUT_STRUCTURES

    assert SHORTCUT_STRUCTURES["reduced product"] == RULE


class _PooledTransitions(nn.Module):
    """DenseNet's transition layers after a dense layer: relu(conv3×3(x)), then two branches
    of a 1×1 convolution and a 2×2 average pool, which the algebra pools first (a quarter of
    each 1×1 convolution's FLOPs, as an fp32 product on the CUDA cores)."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False, device="meta")
        self.left = nn.Conv2d(CHANNELS, CHANNELS, 1, bias=False, device="meta")
        self.right = nn.Conv2d(CHANNELS, CHANNELS, 1, bias=False, device="meta")

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.dense(x))
        return F.avg_pool2d(self.left(y), 2), F.avg_pool2d(self.right(y), 2)


BATCH, CHANNELS, SIDE = 8, 256, 64


def test_a_shortcut_saves_what_it_takes_off_the_busier_unit() -> None:
    # the dense layer's 2·B·C²·9·S² TF32 FLOPs (78 µs) keep the tensor cores the busier unit
    # either way; each pooled product's 2·B·C²·S²/4 fp32 FLOPs (7.7 µs on CUDA cores) hide
    # under them. So each shortcut saves its 1×1 convolution's tensor-core time, 2·B·C²·S² /
    # TF32 peak (8.7 µs), though on its own its product (CUDA cores) is the slower of the two
    transition_flops = 2 * BATCH * CHANNELS**2 * SIDE**2
    result = analyze(_PooledTransitions(), meta(BATCH, CHANNELS, SIDE, SIDE), gpu="h100")
    assert sorted(shortcut.module for shortcut in result.rewrites) == ["left", "right"]
    for shortcut in result.rewrites:
        assert shortcut.time_saved_ms == pytest.approx(transition_flops / H100_TF32 * 1e3)
    sol = result.time_ms
    assert sum(shortcut.time_saved_ms for shortcut in result.rewrites) == pytest.approx(
        sol["sol_as_written"] - sol["sol"])
    # the report: each shortcut with its own saving, the program's bound as written once (each
    # line said "SoL <as written> → <sol>", the change of all of them)
    saves = human_ms(transition_flops / H100_TF32 * 1e3)
    lines = [line for line in result.format(top=0).splitlines() if "lgebraic shortcut" in line]
    assert [line.endswith(f"; saves {saves}") for line in lines] == [True, True, False]
    assert lines[2] == (f"  2 algebraic shortcuts in all: SoL {human_ms(sol['sol_as_written'])}"
                        f" → {human_ms(sol['sol'])}")
