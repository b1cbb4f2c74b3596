"""Mixture-of-experts routing (issue 31): the bound for any input values and for the given ones,
against hand-derived closed forms and the gradient oracle's floor (tests/oracle.py).

Programs: the fixtures in tests/fixtures/routing/ (top-2 softmax gating, DeepSeek-V3's
group-limited top-k with a bias and a scaling factor, the load-balancing loss, capacity-factor
dispatch and combine, grouped expert GEMMs fed by routed tokens, shared experts) and the
issue's minimal reproduction, a group mask made by ``scatter_`` into ``zeros_like``.

What they pin down: a write at data-chosen positions leaves its destination unknown there and
needs every index element that could land on a kept output; top-k, sort and argmax need the
whole rows they choose from, kept values or not; data-sized ops (``nonzero``, boolean masks)
bound every size without real data, and refuse only where no such bound exists. The oracle
proves what the kept outputs' gradients touch: it cannot see a choice (an index has no
gradient), so the bound may exceed it by the logits, biases and router rows a top-k needs only
to choose; it never falls below it. Under ``data="given"`` the routing is known, so the
experts that receive no token are not charged; under ``data="any"`` any expert may receive
none.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from conftest import Fn, analyze, meta
from oracle import oracle
from torchroofline.errors import DataDependentError
from torchroofline.price.roofline import Result
from torchroofline.suites.kernelbench import (
    _seeded_model,
    analyze_file,
    load_problem,
    seeded_inputs,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "routing"
FP32, INDEX = 4, 8  # bytes of a float and of an int64 index
TIGHT = 0.95  # as tests/plan/test_oracle.py: the bound charges ≥ 95 % of what the oracle proves


def _seeded(name: str) -> tuple[nn.Module, tuple, dict[str, Result]]:
    """A fixture's model and inputs under KernelBench's seed, and its bound for any and for
    the given input values."""
    path = FIXTURES / f"{name}.py"
    problem = load_problem(path)
    model = _seeded_model(problem, problem.model_class(*problem.get_init_inputs()), 2**30)
    results = {data: analyze_file(path, data=data) for data in ("any", "given")}
    return model, seeded_inputs(problem), results


def _used(chosen: torch.Tensor) -> int:
    """How many experts receive at least one token."""
    return chosen.unique().numel()


# --- the issue's reproduction: a group mask scattered into zeros --------------------------


def _group_mask_by_scatter(mask: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    return mask.scatter_(1, chosen, 1.0)


def _group_mask_by_scatter_source(mask: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    return mask.scatter(1, chosen, torch.ones(chosen.shape, dtype=mask.dtype))


def _group_mask_by_index_put(mask: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    mask[torch.arange(mask.shape[0])[:, None], chosen] = 1.0
    return mask


def _group_mask_by_index_fill(mask: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    return mask.index_fill(1, chosen[0], 1.0)  # the groups the first token picks, for all


class _GroupMask(nn.Module):
    """The issue's program: the 4 best of 8 groups of 32 scores kept, the rest filled."""

    def __init__(self, write) -> None:  # noqa: ANN001
        super().__init__()
        self.write = write

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        groups = s.view(2048, 8, 32).amax(-1)
        _, chosen = torch.topk(groups, 4, dim=-1)
        mask = self.write(torch.zeros_like(groups), chosen)
        expanded = mask.unsqueeze(-1).expand(2048, 8, 32).reshape(2048, 256)
        return s.masked_fill(expanded == 0, -1e9)


@pytest.mark.parametrize(
    "write", [_group_mask_by_scatter, _group_mask_by_scatter_source, _group_mask_by_index_put]
)
@pytest.mark.parametrize("data", ["any", "given"])
def test_a_mask_written_at_chosen_places_is_data(write, data: str) -> None:  # noqa: ANN001
    # the zeros the scatter overwrites at data-chosen groups are no constant: the mask is data,
    # every index element may land on any kept group, so every top-k row is needed, which
    # needs every group maximum, which needs all of s: s read once (2048·256·4 B) and the
    # output written once (2048·256·4 B) = 4,194,304 B — as masked_fill(s > 0, …) is charged
    result = analyze(_GroupMask(write), torch.randn(2048, 256), data=data)
    assert result.compulsory_bytes == 2 * 2048 * 256 * FP32 == 4_194_304


def test_a_mask_filled_at_one_tokens_choice_needs_that_tokens_row() -> None:
    # index_fill with the first token's 4 groups, for every token: the mask needs row 0 of
    # the top-k, so row 0 of s (256 floats) — and the output written (2048·256·4 B). The mask
    # keeps 4 groups of every row, but which is data, and a data mask may keep nothing of s
    result = analyze(_GroupMask(_group_mask_by_index_fill), meta(2048, 256))
    assert result.compulsory_bytes == (256 + 2048 * 256) * FP32 == 2_098_176


def test_a_scatter_needs_the_index_lines_of_its_kept_rows() -> None:
    # scatter along dim 1: index[i, j] sends src[i, j] to row i, so kept rows 0 and 1 need
    # index rows 0 and 1 (2·4 int64) — all of them: any may land on any kept column — and
    # one src element (all may land on one place); the zeros are no input
    result = analyze(
        Fn(lambda index, src: torch.zeros(8, 64).scatter(1, index, src)[:2]),
        torch.randint(0, 64, (8, 4)), meta(8, 6), data="any",
    )
    assert result.compulsory_bytes == 2 * 4 * INDEX + 1 * FP32 + 2 * 64 * FP32
    # scatter_add keeps every src element landing (those at the index's 8·4 positions) and,
    # all rows kept, the whole destination
    result = analyze(
        Fn(lambda x, index, src: x.scatter_add(1, index, src)),
        meta(8, 64), torch.randint(0, 64, (8, 4)), meta(8, 6), data="any",
    )
    assert result.compulsory_bytes == (8 * 64 + 8 * 4 + 8 * 64) * FP32 + 8 * 4 * INDEX


@pytest.mark.parametrize(
    ("keep", "row_bytes"),
    [
        (lambda s: torch.topk(s, 2, dim=-1)[1], 2 * INDEX),
        (lambda s: s.argmax(dim=-1), INDEX),
        (lambda s: s.sort(dim=-1)[1][:, :2], 2 * INDEX),
        (lambda s: torch.zeros_like(s).scatter(1, s.topk(2, dim=-1)[1], 1.0), 64 * FP32),
    ],
)
def test_a_choice_needs_every_element_of_its_rows(keep, row_bytes: int) -> None:  # noqa: ANN001
    # top-k, argmax and sort indices depend on every element of their row, values kept or
    # not: s read whole (32·64·4 B), and each row's kept output written
    result = analyze(Fn(keep), meta(32, 64))
    assert result.compulsory_bytes == 32 * 64 * FP32 + 32 * row_bytes


# --- routers: any and given bounds alike (every logit decides the choice) --------------------


def test_top2_softmax_gating() -> None:
    # T = 32 tokens, H = 16, E = 8 experts. Bound: the logits x @ Wᵀ (2·T·H·E FLOPs) read x
    # and W whole — every logit decides a top-2 — and write the weights (T·2 floats) and the
    # experts (T·2 int64). Oracle: the renormalised weights w_j / (w_1 + w_2) are
    # exp(l_j) / (exp(l_1) + exp(l_2)), which depend on the two chosen logits only: every row
    # of x and the rows of W of the experts some token chose
    tokens, hidden, experts = 32, 16, 8
    model, inputs, results = _seeded("top2_gating")
    outputs = 2 * tokens * (FP32 + INDEX)
    for result in results.values():
        assert result.tensor_flops == 2 * tokens * hidden * experts
        assert result.compulsory_bytes == (tokens + experts) * hidden * FP32 + outputs
    used = _used(model(*inputs)[1])
    proven = oracle(model, inputs, data="given")
    assert proven.bytes(FP32) == (tokens + used) * hidden * FP32 + outputs
    assert results["given"].compulsory_bytes >= proven.bytes(FP32)


def test_group_limited_topk_with_bias_and_scaling() -> None:
    # T = 32, H = 16, E = 16 experts in 4 groups, 2 groups kept, top-4. Bound: every sigmoid
    # score decides the group sums, the group top-2 (scattered into a mask) and the expert
    # top-4, so x, W and the bias are read whole (the bias only steers the choice); FLOPs
    # 2·T·H·E for the logits; written: weights and experts, T·4 each. Oracle: the weights are
    # the chosen unbiased scores, normalised and scaled — gradients reach x whole, the rows of
    # W of the chosen experts (here all but one), and no bias
    tokens, hidden, experts, top_k = 32, 16, 16, 4
    model, inputs, results = _seeded("group_limited_topk")
    outputs = tokens * top_k * (FP32 + INDEX)
    for result in results.values():
        assert result.tensor_flops == 2 * tokens * hidden * experts
        assert result.compulsory_bytes == (
            (tokens * hidden + experts * hidden + experts) * FP32 + outputs
        )
    used = _used(model(*inputs)[1])
    assert used < experts
    proven = oracle(model, inputs, data="given")
    assert proven.bytes(FP32) == (tokens + used) * hidden * FP32 + outputs
    assert results["given"].compulsory_bytes > proven.bytes(FP32)


def test_group_limited_topk_at_the_issues_scale() -> None:
    # L2/049's shape: 2,048 tokens, hidden 4,096, 256 experts in 8 groups, 4 kept, top-8 (fp32
    # here). The router GEMM is 2·2048·4096·256 = 4.29 GFLOP, and reading x (2048·4096),
    # W (256·4096) and the bias (256) and writing 2048·8 weights and experts is 37.9 MB
    path = FIXTURES / "group_limited_topk.py"
    tokens, hidden, experts, top_k = 2048, 4096, 256, 8
    with torch.device("meta"):
        model = load_problem(path).model_class(hidden, experts, 8, 4, top_k, 2.5)
    result = analyze(model, meta(tokens, hidden))
    assert result.tensor_flops == 2 * tokens * hidden * experts == 4_294_967_296
    assert result.compulsory_bytes == (
        (tokens * hidden + experts * hidden + experts) * FP32 + tokens * top_k * (FP32 + INDEX)
    ) == 37_946_368


def test_load_balancing_loss() -> None:
    # T = 32, H = 16, E = 8, top-2. loss = E · Σ_e f_e · P_e: the counts f come from the
    # top-2 (scatter_add of ones), which needs every logit; P_e = mean_t softmax, whose
    # Jacobian reaches every logit of every row: x and W read whole, one float written,
    # 2·T·H·E FLOPs for the logits — the oracle proves the same bytes
    tokens, hidden, experts = 32, 16, 8
    model, inputs, results = _seeded("load_balancing_loss")
    needed = (tokens + experts) * hidden * FP32 + FP32
    for result in results.values():
        assert result.tensor_flops == 2 * tokens * hidden * experts
        assert result.compulsory_bytes == needed
    assert oracle(model, inputs).bytes(FP32) == needed


def test_capacity_factor_dispatch_and_combine() -> None:
    # T = 32, H = 16, F = 24, E = 8, capacity C = 6, top-1. Dispatch and combine are dense
    # products with a one-hot (T, E, C) tensor the routing decides: as written 2·E·C·T·H
    # (buffers), 2·E·C·H·F (the experts' bmm), 2·T·E·C·F (combine), but a sparse kernel does
    # only the products of the mask's nonzeros. Any values: the mask is unknown, so no product
    # is charged (the "routing mask" rule: never more than any routing's pairs); the router
    # (2·T·H·E, x and W_gate read whole: every logit decides a max) and the (T, F) output
    # written. Given: the mask is evaluated on the given values (given.value_sources), so each
    # product skips its zeros: the K kept pairs (one nonzero each) cost 2·K·H (dispatch),
    # 2·K·H·F (the filled slots through their expert) and 2·K·F (combine), and the experts
    # with a kept token are read. Oracle (given): the tokens over capacity and the experts no
    # token reaches have no gradient; the bound for any values is below it
    tokens, hidden, inner, experts, capacity = 32, 16, 24, 8, 6
    model, (x,), results = _seeded("capacity_dispatch")
    router = 2 * tokens * hidden * experts
    assert results["any"].tensor_flops == router
    assert results["any"].compulsory_bytes == (
        tokens * hidden + experts * hidden + tokens * inner
    ) * FP32
    assert any(note.startswith("structured operand: routing mask")
               for note in results["any"].notes)
    counts = torch.bincount(model.gate(x).argmax(dim=-1), minlength=experts)
    kept, used = int(counts.clamp(max=capacity).sum()), int((counts > 0).sum())
    assert kept < tokens and used < experts
    given = results["given"]
    assert given.tensor_flops == router + 2 * kept * (hidden + hidden * inner + inner)
    assert given.compulsory_bytes == (
        tokens * hidden + experts * hidden + used * hidden * inner + tokens * inner
    ) * FP32
    proven = oracle(model, (x,), data="given").bytes(FP32)
    assert results["any"].compulsory_bytes <= proven <= given.compulsory_bytes


# --- experts fed by routed tokens: the given routing reads only the experts it uses -------


def test_grouped_expert_gemms_fed_by_routed_tokens() -> None:
    # T = 4 tokens, H = 16, F = 32, E = 16 experts, top-2: a SwiGLU expert (three H·F
    # matrices) per expert on the tokens torch.where routes to it. Any values: the top-2 are
    # two distinct experts per token, so the loop's selections hold T·K = 8 pairs whatever
    # the routing (docs/algebra.md, "Routed work for any values"): the router — x and W_gate read,
    # 2·T·H·E FLOPs — the 8 pairs at 3·2·H·F FLOPs each, the three matrices of K = 2 experts
    # (every routing runs at least two), and the output (T, H) written. Given: the same pairs,
    # and the three matrices of each of the `used` experts with a token. Oracle (given): the
    # same, bar the router rows of experts nobody chose (the renormalised weights depend on
    # the chosen logits only)
    tokens, hidden, inner, experts, top_k = 4, 16, 32, 16, 2
    model, inputs, results = _seeded("routed_experts")
    used = _used(model.gate(*inputs).topk(top_k, dim=-1)[1])
    assert top_k < used < experts
    router = 2 * tokens * hidden * experts
    pairs = tokens * top_k * 3 * 2 * hidden * inner
    assert results["any"].tensor_flops == router + pairs
    assert results["any"].compulsory_bytes == (
        (2 * tokens + experts) * hidden + top_k * 3 * hidden * inner
    ) * FP32
    given = results["given"]
    assert given.tensor_flops == router + pairs
    assert given.compulsory_bytes == (
        (2 * tokens + experts) * hidden + used * 3 * hidden * inner
    ) * FP32
    proven = oracle(model, inputs, data="given")
    assert proven.bytes(FP32) == ((2 * tokens + used) * hidden + used * 3 * hidden * inner) * FP32
    assert TIGHT * proven.bytes(FP32) <= given.compulsory_bytes
    assert given.time_ms["sol_any_input"] < given.sol_ms


def test_shared_experts() -> None:
    # T = 4, H = 16, F = 32, E = 16 routed experts (one H × H matrix each), top-2 by sigmoid;
    # the shared SwiGLU expert takes every token: 3·2·T·H·F FLOPs and its three H·F matrices,
    # under any values and given ones alike. Each routed expert takes the tokens of
    # (chosen == e).any(-1): one per pair, a token's two experts being distinct, so any
    # routing adds the T·K routed pairs (2·H·H each) and the matrices of K experts; the given
    # routing the matrices of the `used` experts. Oracle: sigmoid scores are elementwise, so
    # of the router only the chosen experts' rows
    tokens, hidden, inner, experts, top_k = 4, 16, 32, 16, 2
    model, inputs, results = _seeded("shared_experts")
    used = _used(model.router(*inputs).topk(top_k, dim=-1)[1])
    dense = 2 * tokens * hidden * experts + 3 * 2 * tokens * hidden * inner
    dense += tokens * top_k * 2 * hidden * hidden
    shared = 3 * hidden * inner
    assert results["any"].tensor_flops == dense
    assert results["any"].compulsory_bytes == (
        (2 * tokens + experts) * hidden + shared + top_k * hidden * hidden
    ) * FP32
    given = results["given"]
    assert given.tensor_flops == dense
    routed = used * hidden * hidden
    assert given.compulsory_bytes == ((2 * tokens + experts) * hidden + shared + routed) * FP32
    proven = oracle(model, inputs, data="given")
    assert proven.bytes(FP32) == ((2 * tokens + used) * hidden + shared + routed) * FP32
    assert TIGHT * proven.bytes(FP32) <= given.compulsory_bytes


# --- data-sized ops without real data: a bound for every size ------------------------------


@pytest.mark.parametrize(
    ("program", "shapes", "needed"),
    [
        # finding out which elements are nonzero (or selected) reads every one of them; the
        # data-sized outputs may be empty, so none is charged as written
        (lambda x: torch.nonzero(x), [(64, 64)], 64 * 64 * FP32),
        (lambda x: x[x > 0], [(16, 16)], 16 * 16 * FP32),
        (lambda x: torch.masked_select(x, x > 0), [(16, 16)], 16 * 16 * FP32),
        (lambda x: x[x > 0].sum(), [(16, 16)], 16 * 16 * FP32 + FP32),
        # 5 of its rows may come from the first 5 elements: one is charged
        (lambda x: torch.nonzero(x)[:5], [(64, 64)], FP32),
    ],
)
def test_data_sized_ops_bound_every_size_without_real_data(
    program, shapes: list[tuple[int, ...]], needed: int  # noqa: ANN001
) -> None:
    # with real tensors over the limit (0 B), the trace runs on fake ones, each data-sized op
    # on stand-in values, and says so; the bound is the real-data fallback's
    inputs = [meta(*shape) for shape in shapes]
    stand_in = analyze(Fn(program), *inputs, real_fallback_limit_bytes=0)
    assert stand_in.compulsory_bytes == needed
    assert stand_in.compulsory_bytes == analyze(Fn(program), *inputs).compulsory_bytes
    [note] = [note for note in stand_in.notes if note.startswith("bound for every size")]
    assert "aten." in note and "stand-in values" in note


def test_routed_experts_too_big_to_make_real_bound_every_routing() -> None:
    # 512 tokens, H = 256, F = 512, 64 experts, top-2: 97 MiB of experts, over a 0 B limit.
    # Traced on stand-ins (whose selections are no real routing), the bound is the one for
    # any routing: the router (x and W_gate read, 2·T·H·E FLOPs), the T·K pairs the loop
    # over all experts splits (3·2·H·F FLOPs each), K experts' three matrices and the output
    path = FIXTURES / "routed_experts.py"
    tokens, hidden, inner, experts, top_k = 512, 256, 512, 64, 2
    with torch.device("meta"):
        model = load_problem(path).model_class(hidden, inner, experts, top_k)
    result = analyze(model, meta(tokens, hidden), real_fallback_limit_bytes=0)
    assert result.tensor_flops == 2 * tokens * hidden * experts + tokens * top_k * 3 * 2 * (
        hidden * inner
    ) == 822_083_584
    assert result.compulsory_bytes == (
        (2 * tokens + experts) * hidden + top_k * 3 * hidden * inner
    ) * FP32
    assert any("aten.nonzero.default in '<top level>'" in note for note in result.notes)


class _CapacityDrop(nn.Module):
    """Top-1 routing with a capacity: tokens past an expert's first C are dropped by a
    boolean mask (a data-sized selection) before the experts' matrix."""

    def __init__(self, hidden: int, inner: int, experts: int, capacity: int) -> None:
        super().__init__()
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.up = nn.Parameter(torch.randn(experts, hidden, inner))
        self.capacity = capacity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chosen = self.gate(x).argmax(dim=-1)
        one_hot = chosen[:, None] == torch.arange(self.up.shape[0], device=x.device)
        position = (one_hot.cumsum(dim=0) * one_hot).sum(dim=-1) - 1
        kept = position < self.capacity
        out = x.new_zeros(x.shape[0], self.up.shape[-1])
        out[kept] = (x[kept][:, None, :] @ self.up[chosen[kept]]).squeeze(1)
        return out


def test_capacity_limited_dispatch_bounds_every_size() -> None:
    # any routing may keep no token, so only the router and the mask's inputs are needed:
    # x and W_gate read, the logits (2·T·H·E FLOPs), and the output (T, F) written
    tokens, hidden, inner, experts = 256, 64, 128, 16
    with torch.device("meta"):
        model = _CapacityDrop(hidden, inner, experts, capacity=8)
    result = analyze(model, meta(tokens, hidden), real_fallback_limit_bytes=0)
    assert result.tensor_flops == 2 * tokens * hidden * experts
    assert result.compulsory_bytes == (tokens * hidden + experts * hidden + tokens * inner) * FP32


def test_a_value_turned_into_a_python_number_has_no_bound_for_every_size() -> None:
    # split by counts that .tolist() turns into Python numbers: which ops run depends on the
    # values themselves, so no bound holds for every value; the error says why
    def program(x: torch.Tensor, chosen: torch.Tensor) -> list[torch.Tensor]:
        counts = torch.bincount(chosen, minlength=4).tolist()
        return [part * 2 for part in x[chosen.argsort()].split(counts)]

    with pytest.raises(DataDependentError) as caught:
        analyze(Fn(program), meta(64, 8), meta(64, dtype=torch.long), real_fallback_limit_bytes=0)
    message = str(caught.value)
    assert "_local_scalar_dense" in message and "no bound holds for every value" in message
    assert "\n" not in message


def test_a_size_chosen_by_data_is_data_even_where_it_equals_a_fixed_one() -> None:
    # x[m] with all 4 elements of m true is (4, 16), the size of x: its rows are still chosen
    # by m, so under any values the product may be empty — no FLOPs, no x or w — and only the
    # mask is read (4 bools) to find out
    result = analyze(
        Fn(lambda m, x, w: x[m] @ w),
        torch.ones(4, dtype=torch.bool), torch.randn(4, 16), torch.randn(16, 32), data="any",
    )
    assert result.tensor_flops == 0
    assert result.compulsory_bytes == 4


def test_a_scalar_computed_on_the_cpu_trace_is_no_host_argument() -> None:
    # traced on the CPU (stand-ins on a CPU-only build), x.sum() is a 0-d CPU tensor, but one
    # the program computes on its device: it is needed (the sum's 64·64 FLOPs, x read),
    # unlike a host scalar passed by value
    result = analyze(
        Fn(lambda x, y: (y * x.sum(), torch.nonzero(x))),
        meta(64, 64), meta(1000), real_fallback_limit_bytes=0,
    )
    assert result.vector_flops == 64 * 64 + 1000
    assert result.compulsory_bytes == (64 * 64 + 1000 + 1000) * FP32


def test_a_boolean_index_on_stand_ins_makes_no_output_data() -> None:
    # x[mask] on stand-ins: the mask's nonzeros index a meta x, so the output has the shape
    # the real stand-in run gives (its seeded half of the rows) and no storage of its own
    from torchroofline.trace.data_sized import stand_in_output

    x, mask = torch.empty(64, 8), torch.empty(64, dtype=torch.bool)
    made = stand_in_output(torch.ops.aten.index.Tensor, (x, [mask]), {})
    expected = (torch.rand(64, generator=torch.Generator().manual_seed(0)) < 0.5).sum()
    assert made.shape == (int(expected), 8) and made.device == x.device
    # a 2-D mask picks (row, column) pairs: its nonzeros index two dims at once
    square = stand_in_output(torch.ops.aten.index.Tensor,
                             (torch.empty(6, 6, 8), [torch.empty(6, 6, dtype=torch.bool)]), {})
    picked = (torch.rand(6, 6, generator=torch.Generator().manual_seed(0)) < 0.5).sum()
    assert square.shape == (int(picked), 8)
    mixed = stand_in_output(torch.ops.aten.index.Tensor,
                            (x, [torch.zeros(3, 2, dtype=torch.long)]), {})
    assert mixed.shape == (3, 2, 8)
    # masked_select: one element per true entry of the mask broadcast over x (8 columns)
    selected = stand_in_output(torch.ops.aten.masked_select.default, (x, mask[:, None]), {})
    assert selected.shape == (int(expected) * 8,)


# --- gathers through a top-k's indices: distinct picks, whatever the data --------------------

TOKENS, EXPERTS, HIDDEN, K = 16, 8, 4, 2


def _charged(result: Result, shape: tuple[int, ...]) -> int:
    """Elements the bound charges of the input of ``shape``."""
    [ref] = [r for r in result.plans.necessary.input_refs if r.shape == shape]
    return ref.elements


def _routed(pick, experts: tuple[int, ...], keep=lambda y: y) -> Result:  # noqa: ANN001
    """``keep(experts[pick(x @ router)])`` for any input values."""
    body = lambda x, router, w: keep(w[pick(x @ router)])  # noqa: E731
    return analyze(Fn(body), meta(TOKENS, HIDDEN), meta(HIDDEN, EXPERTS), meta(*experts))


@pytest.mark.parametrize(
    ("pick", "picks"),
    [
        (lambda logits: logits.topk(K, dim=-1).indices, K),
        (lambda logits: logits.sort(dim=-1, descending=True).indices[:, :K], K),
        (lambda logits: logits.argsort(dim=-1)[:, :K], K),
        (lambda logits: logits.topk(K, dim=-1).indices[:, :1], 1),
    ],
    ids=["topk", "sort", "argsort", "one pick per row"],
)
def test_experts_picked_by_a_top_k_are_that_many_distinct_experts(pick, picks: int) -> None:  # noqa: ANN001
    # experts[idx], experts (E, H), every output kept: the picks of one token's row are
    # distinct positions of its logits, so distinct experts, each read at all H columns; other
    # tokens may pick the same ones, so one row's picks count: picks·H elements (was 1). The
    # logits decide the choice: x and the router read whole. Output T·picks·H written
    result = _routed(pick, (EXPERTS, HIDDEN))
    assert _charged(result, (EXPERTS, HIDDEN)) == picks * HIDDEN
    needed = TOKENS * HIDDEN + HIDDEN * EXPERTS + picks * HIDDEN + TOKENS * picks * HIDDEN
    assert result.compulsory_bytes == needed * FP32


def test_a_top_k_picks_whole_expert_matrices_at_the_kept_columns() -> None:
    # experts (E, H, H): each pick reads the demanded part of one expert's matrix: all of it
    # (K·H·H), one token's row (K·H·H: idx[0] holds two distinct experts), or, with only
    # column 0 of every matrix kept, K·H
    whole = _routed(lambda logits: logits.topk(K, dim=-1).indices, (EXPERTS, HIDDEN, HIDDEN))
    assert _charged(whole, (EXPERTS, HIDDEN, HIDDEN)) == K * HIDDEN * HIDDEN
    first = _routed(lambda logits: logits.topk(K, dim=-1).indices[0], (EXPERTS, HIDDEN, HIDDEN))
    assert _charged(first, (EXPERTS, HIDDEN, HIDDEN)) == K * HIDDEN * HIDDEN
    column = _routed(
        lambda logits: logits.topk(K, dim=-1).indices,
        (EXPERTS, HIDDEN, HIDDEN),
        keep=lambda y: y[..., 0],
    )
    assert _charged(column, (EXPERTS, HIDDEN, HIDDEN)) == K * HIDDEN


def test_index_select_and_gather_through_a_top_k_read_distinct_picks() -> None:
    def select(x: torch.Tensor, router: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w.index_select(0, (x @ router).topk(K, dim=-1).indices.reshape(-1))

    def gather(x: torch.Tensor, router: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w.gather(1, (x @ router).topk(K, dim=-1).indices)

    # index_select through the flattened (T·K,) indices: elements 2t and 2t + 1 are token t's
    # row, two distinct experts: K·H elements
    selected = analyze(Fn(select), meta(TOKENS, HIDDEN), meta(HIDDEN, EXPERTS),
                       meta(EXPERTS, HIDDEN))
    assert _charged(selected, (EXPERTS, HIDDEN)) == K * HIDDEN
    # gather(w, 1, idx): out[t, j] = w[t, idx[t, j]]; different t are different rows of w and
    # one row's picks are distinct columns, so every one of the T·K outputs reads its own
    # element of w (T, E)
    gathered = analyze(Fn(gather), meta(TOKENS, HIDDEN), meta(HIDDEN, EXPERTS),
                       meta(TOKENS, EXPERTS))
    assert _charged(gathered, (TOKENS, EXPERTS)) == TOKENS * K


def test_a_permutation_picks_distinct_rows_and_other_indices_may_pick_one() -> None:
    # randperm(E)[:K] is K distinct rows of w: K·H elements
    permuted = analyze(Fn(lambda w: w[torch.randperm(EXPERTS)[:K]]), meta(EXPERTS, HIDDEN))
    assert _charged(permuted, (EXPERTS, HIDDEN)) == K * HIDDEN
    # an index of unknown values (an input, or an argmax) may pick one row throughout: the
    # floor of distinct picks does not apply, but each pick reads a whole row of w (H
    # elements), as embedding's does
    unknown = analyze(Fn(lambda w, idx: w[idx]), meta(EXPERTS, HIDDEN),
                      meta(TOKENS, K, dtype=torch.long))
    assert _charged(unknown, (EXPERTS, HIDDEN)) == HIDDEN


@pytest.mark.parametrize(
    ("gather", "charged"),
    [
        (lambda w, i: w[i], 64),
        (lambda w, i: w.index_select(0, i), 64),
        (lambda w, i: torch.nn.functional.embedding(i, w), 64),
        (lambda w, i: w[:, i], 1000),
        (lambda w, i: w[i, i], 1),
        (lambda w, i: w.gather(0, i[:, None].expand(10, 64)), 64),
    ],
    ids=["index", "index_select", "embedding", "index columns", "index pairs", "gather"],
)
def test_a_gather_by_unknown_indices_reads_one_whole_slice(gather, charged: int) -> None:  # noqa: ANN001
    # w (1000, 64), 10 indices of unknown values: all may be equal, so one pick — but a pick of
    # w[i] or index_select is a row, read at all 64 kept columns (as embedding's), w[:, i] a
    # column of 1,000; w[i, i] picks single elements, and gather along dim 0 one element per
    # column (out[t, j] = w[i[t, j], j]: column j is its own coordinate), 64. The oracle on
    # random indices proves every distinct row picked, so never less
    w, index = torch.randn(1000, 64), torch.randint(0, 64, (10,))  # in range of both dims
    bound = analyze(Fn(gather), meta(1000, 64), meta(10, dtype=torch.long), data="any")
    assert _charged(bound, (1000, 64)) == charged
    [proven] = [leaf for leaf in oracle(Fn(gather), (w, index)).leaves if leaf.name == "input 0"]
    assert charged <= proven.necessary


def test_distinct_picks_stay_within_what_one_routing_forces() -> None:
    # one input where every token ranks experts 0 and 1 first (x > 0, router columns 0 and 1
    # the largest): the oracle for that input proves exactly the two experts' matrices
    # (K·H·H elements), what the bound for any input charges
    def program(x: torch.Tensor, router: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w[(x @ router).topk(K, dim=-1).indices]

    x = torch.rand(TOKENS, HIDDEN) + 0.1
    router = torch.full((HIDDEN, EXPERTS), -1.0)
    router[:, 0], router[:, 1] = 2.0, 1.0
    inputs = (x, router, torch.randn(EXPERTS, HIDDEN, HIDDEN))
    [proven] = [leaf for leaf in oracle(Fn(program), inputs, data="given").leaves
                if leaf.name == "input 2"]
    bound = analyze(Fn(program), *(meta(*t.shape) for t in inputs))
    assert _charged(bound, (EXPERTS, HIDDEN, HIDDEN)) == proven.necessary == K * HIDDEN * HIDDEN


# --- host reads (issue 37): the given routing through .item(), .cpu().numpy() and loops ---


def _kept_pairs(chosen: torch.Tensor, experts: int, capacity: int) -> torch.Tensor:
    """Per expert, the routed (token, slot) pairs it keeps: its first ``capacity``."""
    return torch.bincount(chosen.flatten(), minlength=experts).clamp(max=capacity)


def test_a_host_loop_over_the_experts_hit_charges_the_pairs_kept_under_capacity() -> None:
    # T = 16, H = 16, F = 32, E = 8, top-2, capacity C = 5: a loop over the experts hit
    # (bincount → nonzero → .item()), each taking its first C routed pairs. Given: the
    # router (2·T·H·E FLOPs) and Σ_e min(count_e, C) kept pairs of a SwiGLU expert
    # (3·2·H·F FLOPs each); x, the router and the output once, and the three matrices of
    # each expert keeping a pair. The trace ran on the values given (x, router) and fake
    # experts, the bound reads what they route
    tokens, hidden, inner, experts, top_k, capacity = 16, 16, 32, 8, 2, 5
    model, (x,), results = _seeded("host_loop_experts")
    kept = _kept_pairs(model.gate(x).topk(top_k, dim=-1)[1], experts, capacity)
    assert kept.sum() < tokens * top_k  # the capacity drops pairs
    given = results["given"]
    router = 2 * tokens * hidden * experts
    assert given.tensor_flops == router + int(kept.sum()) * 3 * 2 * hidden * inner
    used = int((kept > 0).sum())
    assert given.compulsory_bytes == (
        2 * tokens * hidden + experts * hidden + used * 3 * hidden * inner
    ) * FP32
    assert given.time_ms["sol_any_input"] < given.sol_ms
    # any values: an expert's where() may be empty, but the T·K pairs are split among the
    # experts hit, each keeping min(count, C): at least K·min(T, C) = 10 pairs kept in every
    # routing (docs/algebra.md, "Routed work for any values"), and K experts' three matrices read
    assert results["any"].tensor_flops == router + top_k * min(tokens, capacity) * 3 * 2 * (
        hidden * inner
    )
    assert results["any"].compulsory_bytes == (
        2 * tokens * hidden + experts * hidden + top_k * 3 * hidden * inner
    ) * FP32


def test_token_splits_read_on_the_host_as_numpy_charge_every_routed_pair() -> None:
    # T = 16, H = 16, F = 32, E = 8, top-2: the pairs sorted by expert and split by counts
    # read with .cpu().numpy() (which a fake tensor refuses: the trace runs on real values).
    # Every pair lands in one expert's run: the router (2·T·H·E) and T·K pairs of a GELU MLP
    # (2·2·H·F FLOPs each); x, the router, the output, and the two matrices of each expert hit
    tokens, hidden, inner, experts, top_k = 16, 16, 32, 8, 2
    model, (x,), results = _seeded("numpy_token_splits")
    used = _used(model.router(x).topk(top_k, dim=-1)[1])
    given = results["given"]
    assert given.tensor_flops == 2 * tokens * hidden * experts + tokens * top_k * 4 * hidden * inner
    assert given.compulsory_bytes == (
        2 * tokens * hidden + experts * hidden + used * 2 * hidden * inner
    ) * FP32


def test_a_fake_tensor_read_as_numpy_runs_on_real_values() -> None:
    # .numpy() on a fake tensor raises "not supported for tensor subclasses", not a
    # data-dependent error: it is a host read all the same, so the trace runs on real
    # values. Split sizes 22, 21, 21 of x[order] (64, 16) through three (16, 32) matrices:
    # 2·64·16·32 FLOPs
    weights = torch.randn(3, 16, 32)

    def program(x: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        sizes = (chosen[:, None] == torch.arange(3)).sum(0).numpy()
        parts = x[chosen.argsort()].split([int(n) for n in sizes])
        return torch.cat([part @ weights[e] for e, part in enumerate(parts)])

    result = analyze(Fn(program), torch.randn(64, 16), torch.arange(64) % 3, data="given")
    assert result.tensor_flops == 2 * 64 * 16 * 32


def test_an_index_path_too_big_to_evaluate_is_named_and_bounded_for_any_values() -> None:
    # table[argmax(x @ w)] with T·E = 20,000·256 logits, over the 4 M elements the given
    # values are evaluated to: the row each token picks is unknown, so one row of the table
    # is charged (D = 32 floats), beside x, w and the output — the bound for any values, and
    # a note names the product
    tokens, hidden, experts, width = 20_000, 16, 256, 32
    result = analyze(
        Fn(lambda x, w, table: table[(x @ w).argmax(-1)]),
        torch.randn(tokens, hidden), torch.randn(hidden, experts), torch.randn(experts, width),
        data="given",
    )
    assert result.compulsory_bytes == (
        tokens * hidden + hidden * experts + width + tokens * width
    ) * FP32
    [note] = [note for note in result.notes if note.startswith("given values not evaluated")]
    assert "aten.mm.default in '<top level>'" in note and "any values there" in note


def test_a_host_loop_over_a_model_too_big_for_real_data_reads_the_given_routing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 24 experts of two 8 × 8 Linear layers (12 KiB) over a 4 KiB real-data limit: the fake
    # model's trace falls to stand-ins, where .item() has no bound for every value; the bound
    # for the given values comes from the model built for real under the seed instead. T = 16,
    # H = F = 8, top-2: the router (2·T·H·E) and T·K pairs of 2·2·H·F FLOPs each
    from torchroofline.suites import kernelbench

    tokens, hidden, inner, experts, top_k = 16, 8, 8, 24, 2
    limited = functools.partial(kernelbench.analyze, real_fallback_limit_bytes=4096)
    monkeypatch.setattr(kernelbench, "analyze", limited)
    path = FIXTURES / "expert_list_loop.py"
    with pytest.raises(DataDependentError):
        analyze_file(path, data="any")
    given = analyze_file(path)
    assert given.tensor_flops == (
        2 * tokens * hidden * experts + tokens * top_k * 2 * 2 * hidden * inner
    )
    assert any(note.startswith("built for real under KernelBench's seed") for note in given.notes)


def test_a_host_loop_that_makes_cuda_tensors_runs_on_real_cpu_values() -> None:
    # the output made with device="cuda" in forward, then a loop over the experts hit with
    # .item(): the real-data run is on the CPU, where "cuda" is the CPU (was a ModelError:
    # "Torch not compiled with CUDA enabled"). 64 tokens over 3 experts, each token one
    # (16, 32) product: 2·64·16·32 FLOPs
    def program(x: torch.Tensor, w: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.shape[0], w.shape[-1], device="cuda")
        for hit in chosen.unique():
            rows = torch.nonzero(chosen == hit.item()).flatten()
            out[rows] = x[rows] @ w[hit.item()]
        return out

    inputs = torch.randn(64, 16), torch.randn(8, 16, 32), torch.arange(64) % 3
    assert analyze(Fn(program), *inputs, data="given").tensor_flops == 2 * 64 * 16 * 32


def test_capacity_slots_in_solexecbench_format_charge_the_pairs_kept() -> None:
    # tests/fixtures/routing/solexecbench_capacity_slots: modeled on SOL-ExecBench's
    # L2/012 (moe_expert_batched_execution_with_capacity_factor: the routing given as inputs,
    # C = max(T // 16, 1) slots per expert, a dense (E, C, ·) batched SwiGLU over the slots);
    # written here at T = 256, H = 16, I = 32, E = 32, top-2, C = 16. The slots are filled
    # through F.one_hot (a scatter_ into zeros, evaluated in place on the given routing) and
    # the slots' outputs are read back at the kept pairs only: the bound charges the
    # Σ_e min(n_e, C) kept pairs (3·2·H·I FLOPs each), not the E·C slots. Read: the x rows
    # of the tokens with a kept pair, the routing (T·k int64), the kept pairs' weights, the
    # three matrices of each expert keeping a pair; written: the (T, H) output
    from torchroofline.suites.solexecbench import (
        analyze_dir,
        load_definition,
        load_workloads,
    )
    from torchroofline.suites.solexecbench import make_inputs as make_problem_inputs

    folder = FIXTURES / "solexecbench_capacity_slots"
    tokens, hidden, inner, experts, top_k, capacity = 256, 16, 32, 32, 2, 16
    (workload,) = load_workloads(folder)
    x, chosen, *_ = make_problem_inputs(load_definition(folder), workload)
    flat = chosen.flatten()
    rank = torch.stack([(flat[: i + 1] == flat[i]).sum() - 1 for i in range(flat.numel())])
    kept = rank < capacity
    assert 0 < tokens * top_k - int(kept.sum()) and int(kept.sum()) < experts * capacity
    used = flat[kept].unique().numel()
    rows = (torch.arange(tokens * top_k)[kept] // top_k).unique().numel()
    (result,) = analyze_dir(folder, "h100", "fp32")
    assert result.tensor_flops == int(kept.sum()) * 3 * 2 * hidden * inner
    assert result.compulsory_bytes == (
        rows * hidden * FP32 + tokens * top_k * INDEX + int(kept.sum()) * FP32
        + used * 3 * hidden * inner * FP32 + tokens * hidden * FP32
    )


def test_a_product_with_an_activation_mask_is_no_routing() -> None:
    # (x · (x > 0)) @ w: a comparison of floats alone masks an activation (a ReLU), not a
    # routing: priced as every matmul, 2·M·K·N, under any values and given ones alike (a given
    # x is not run through the product for its zeros); (x > 0) on an integer index
    # (idx[:, None] == arange(K)) is one: no product charged for any values
    relu = Fn(lambda x, w: (x * (x > 0)) @ w)
    for data in ("any", "given"):
        result = analyze(relu, torch.randn(16, 8), torch.randn(8, 4), data=data)
        assert result.tensor_flops == 2 * 16 * 8 * 4
    one_hot = Fn(lambda idx, w: (idx[:, None] == torch.arange(8)).float() @ w)
    result = analyze(one_hot, meta(16, dtype=torch.long), meta(8, 4))
    assert result.tensor_flops == 0
    assert result.compulsory_bytes == (16 * INDEX + 16 * 4 * FP32)
