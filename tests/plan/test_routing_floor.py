"""The routed work every input needs (issue 37, item 2): the bound for any input values keeps
the pairs a top-k routing guarantees (plan/demand/routing.py, docs/algebra.md "Routed work
for any values").

``topk(k)`` picks k distinct experts per token, so a program that selects ``chosen == e`` for
every expert splits exactly T·k (token, expert) pairs among them, whatever the values; an
expert keeping its first C keeps Σ_e min(n_e, C) ≥ k·min(T, C) of them, with equality when
every token picks the same k experts. Closed forms for plain top-k, top-2 gating,
group-limited top-k and a capacity; the floor equals the bound for a routing that concentrates
every token on k experts (it is the tightest) and never exceeds the bound for a random real
routing (hypothesis); programs where no partition is proven keep the router-only bound.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import analyze, meta
from torchroofline.plan.demand.routing import routings
from torchroofline.price.roofline import Result
from torchroofline.suites.kernelbench import load_problem

FIXTURES = Path(__file__).parents[1] / "fixtures" / "routing"
FP32 = 4
TOKENS, HIDDEN, INNER, EXPERTS = 16, 8, 12, 8


class _TopK(nn.Module):
    """Softmax top-k routing: (weights, chosen) per token."""

    def __init__(self, hidden: int, experts: int, top_k: int) -> None:
        super().__init__()
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.top_k = top_k

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gate(x).softmax(dim=-1).topk(self.top_k, dim=-1)


class _Experts(nn.Module):
    """One (H, F) matrix per expert on the pairs ``router`` sends it, a loop over the experts
    ``first..last`` (all by default); each keeps its first ``capacity`` pairs, or those from
    ``skip`` on."""

    def __init__(self, router: nn.Module, experts: int, capacity: int | None = None,
                 first: int = 0, last: int | None = None, skip: int = 0) -> None:
        super().__init__()
        self.router = router
        self.w = nn.Parameter(torch.randn(experts, HIDDEN, INNER))
        self.capacity, self.first, self.skip = capacity, first, skip
        self.last = experts if last is None else last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, chosen = self.router(x)
        out = x.new_zeros(x.shape[0], INNER)
        for expert in range(self.first, self.last):
            token, slot = torch.where(chosen == expert)
            token, slot = token[self.skip : self.capacity], slot[self.skip : self.capacity]
            out.index_add_(0, token, (x[token] @ self.w[expert]) * weights[token, slot, None])
        return out


def _router_bytes(router: nn.Module) -> int:
    return sum(p.numel() for p in router.parameters()) * FP32


def _floor(router: nn.Module, top_k: int, capacity: int | None = None) -> tuple[int, int]:
    """(tensor FLOPs, bytes) of the bound for any values: the router's logits (2·T·H·E), the
    k·min(T, C) pairs kept in every routing at 2·H·F FLOPs each; x, the router, k experts'
    (H, F) matrices read and the (T, F) output written."""
    pairs = top_k * min(TOKENS, TOKENS if capacity is None else capacity)
    flops = 2 * TOKENS * HIDDEN * EXPERTS + pairs * 2 * HIDDEN * INNER
    read = (TOKENS * HIDDEN + top_k * HIDDEN * INNER) * FP32 + _router_bytes(router)
    return flops, read + TOKENS * INNER * FP32


def _group_limited(top_k: int) -> nn.Module:
    """DeepSeek-V3's router (tests/fixtures/routing/group_limited_topk.py): 8 experts in 4
    groups, the best 2 groups kept, top-k among their 4 experts, weights scaled by 2.5."""
    model_class = load_problem(FIXTURES / "group_limited_topk.py").model_class
    return model_class(HIDDEN, EXPERTS, 4, 2, top_k, 2.5)


def _top2_gating() -> nn.Module:
    """Mixtral's router (tests/fixtures/routing/top2_gating.py): top-2, renormalised."""
    return load_problem(FIXTURES / "top2_gating.py").model_class(HIDDEN, EXPERTS)


ROUTERS: dict[str, tuple[Callable[[], nn.Module], int]] = {
    "plain top-3": (lambda: _TopK(HIDDEN, EXPERTS, 3), 3),
    "top-2 gating": (_top2_gating, 2),
    "group-limited top-2": (lambda: _group_limited(2), 2),
    "group-limited top-3": (lambda: _group_limited(3), 3),
}


@pytest.mark.parametrize("capacity", [None, 3, 40], ids=["no capacity", "C = 3", "C > T"])
@pytest.mark.parametrize("name", list(ROUTERS))
def test_any_values_keep_k_min_t_c_pairs(name: str, capacity: int | None) -> None:
    # T = 16, H = 8, F = 12, E = 8: every routing keeps k·min(T, C) pairs and runs k experts
    # (module docstring); C = 40 > T cuts nothing. Traced on shapes only: no routing at all
    make, top_k = ROUTERS[name]
    torch.manual_seed(0)
    with torch.device("meta"):
        model = _Experts(make(), EXPERTS, capacity)
    result = analyze(model, meta(TOKENS, HIDDEN), data="any")
    flops, read_written = _floor(model.router, top_k, capacity)
    assert (result.tensor_flops, result.compulsory_bytes) == (flops, read_written)


def _routed(result: Result) -> tuple[int, int]:
    """(tensor FLOPs, elements of the (E, H, F) experts) a bound charges after the router's
    top-k: the routed work."""
    ops = result.plans.trace.ops
    after = next(i for i, op in enumerate(ops) if op.name == "aten.topk.default")
    flops = sum(record.flops.tensor for record in result.plans.necessary.ops[after:])
    experts = [ref.elements for ref in result.plans.necessary.input_refs
               if ref.shape == (EXPERTS, HIDDEN, INNER)]
    return flops, sum(experts)


@pytest.mark.parametrize("capacity", [None, 3])
def test_the_floor_is_the_bound_of_every_token_on_the_same_experts(capacity: int | None) -> None:
    # logits largest at experts 0 and 1 for every (positive) token: the given routing sends
    # all T tokens to those two, k·min(T, C) pairs kept and two experts run — the floor, so no
    # higher floor holds for every routing. Without a capacity the bounds agree whole; with
    # C = 3 the given bound needs only the first 3 tokens' routing (the rest are dropped
    # whatever it is), so the routed work agrees: 2·3 pairs and two experts' matrices
    torch.manual_seed(0)
    model = _Experts(_TopK(HIDDEN, EXPERTS, 2), EXPERTS, capacity)
    with torch.no_grad():
        model.router.gate.weight.fill_(-1.0)
        model.router.gate.weight[0], model.router.gate.weight[1] = 2.0, 1.0
    x = torch.rand(TOKENS, HIDDEN) + 0.1
    floor, real = (analyze(model, x, data=data) for data in ("any", "given"))
    assert (floor.tensor_flops, floor.compulsory_bytes) == _floor(model.router, 2, capacity)
    pairs = 2 * min(TOKENS, capacity or TOKENS)
    assert _routed(floor) == _routed(real) == (pairs * 2 * HIDDEN * INNER, 2 * HIDDEN * INNER)
    if capacity is None:
        assert (real.tensor_flops, real.compulsory_bytes) == _floor(model.router, 2)


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 2**16), top_k=st.integers(1, 3),
    capacity=st.one_of(st.none(), st.integers(1, TOKENS + 2)),
)
def test_the_floor_never_exceeds_a_real_routings_bound(
    seed: int, top_k: int, capacity: int | None
) -> None:
    # random router and tokens: the bound for those values charges the pairs they route
    # (Σ_e min(n_e, C) ≥ k·min(T, C)) and the experts they hit (≥ k); the bound for any values
    # is the closed-form floor, whatever routing the trace ran on. (With a capacity the given
    # bound may need fewer router rows than all: tokens past every capacity are dropped
    # whatever their logits, so only the routed work is compared there)
    torch.manual_seed(seed)
    model = _Experts(_TopK(HIDDEN, EXPERTS, top_k), EXPERTS, capacity)
    x = torch.randn(TOKENS, HIDDEN)
    floor, real = (analyze(model, x, data=data) for data in ("any", "given"))
    assert (floor.tensor_flops, floor.compulsory_bytes) == _floor(model.router, top_k, capacity)
    (floor_flops, floor_experts), (real_flops, real_experts) = _routed(floor), _routed(real)
    assert floor_flops <= real_flops and floor_experts <= real_experts
    if capacity is None:
        assert floor.compulsory_bytes <= real.compulsory_bytes
        assert floor.sol_ms <= real.sol_ms


def test_no_floor_for_a_shard_of_the_experts() -> None:
    # a loop over experts 0..3 of 8 (one rank's shard) may receive no pair at all: the traced
    # routing sends some elsewhere, so its selections do not add up to T·k, and no routing
    # is found; no routed work, no expert's matrix, as before the floor
    torch.manual_seed(0)
    model = _Experts(_TopK(HIDDEN, EXPERTS, 2), EXPERTS, last=EXPERTS // 2)
    x = torch.randn(TOKENS, HIDDEN)
    assert not (model.router(x)[1] < EXPERTS // 2).all()
    result = analyze(model, x, data="any")
    assert routings(result.plans.trace.ops) == []
    assert _routed(result) == (0, 0)
    assert _routed(analyze(model, x, data="given"))[0] > 0


def test_no_floor_for_a_shard_the_traced_routing_filled() -> None:
    # every token routed to experts 0 and 1, a loop over experts 0..1 only: the traced
    # selections add up to all T·k pairs, but no list of the experts hit is read on the host
    # (a loop over range(2) is no loop over the experts hit), so another routing may send the
    # shard nothing: no routing is found, no routed work charged for any values
    torch.manual_seed(0)
    model = _Experts(_TopK(HIDDEN, EXPERTS, 2), EXPERTS, last=2)
    with torch.no_grad():
        model.router.gate.weight.fill_(-1.0)
        model.router.gate.weight[0], model.router.gate.weight[1] = 2.0, 1.0
    x = torch.rand(TOKENS, HIDDEN) + 0.1
    result = analyze(model, x, data="any")
    assert routings(result.plans.trace.ops) == []
    assert _routed(result) == (0, 0)


def test_no_floor_past_a_cut_that_is_no_prefix() -> None:
    # token[1:] of an expert's pairs keeps n_e − 1, none for a routing of one pair per expert:
    # the pairs split, but no op takes a count of rows the floor knows (n_e or min(n_e, C)),
    # so no op is charged for them
    torch.manual_seed(0)
    model = _Experts(_TopK(HIDDEN, EXPERTS, 2), EXPERTS, skip=1)
    [routing] = routings(analyze(model, torch.randn(TOKENS, HIDDEN)).plans.trace.ops)
    assert routing.capacity is None
    assert sum(s.rows for s in routing.selections) == TOKENS * 2
    assert all(not s.ops for s in routing.selections)


class _GivenRouting(nn.Module):
    """The experts' loop of :class:`_Experts` on a routing passed in, not made by a top-k."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(EXPERTS, HIDDEN, INNER))

    def forward(self, x: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros(x.shape[0], INNER)
        for expert in range(EXPERTS):
            token, _ = torch.where(chosen == expert)
            out.index_add_(0, token, x[token] @ self.w[expert])
        return out


def test_no_floor_for_indices_of_unknown_values() -> None:
    # chosen passed in (no topk): a token's picks may repeat or all be out of range, so no
    # pair is sure to reach an expert: no FLOPs, no expert read
    x, chosen = torch.randn(TOKENS, HIDDEN), torch.randint(0, EXPERTS, (TOKENS, 2))
    result = analyze(_GivenRouting(), x, chosen, data="any")
    assert routings(result.plans.trace.ops) == []
    assert result.tensor_flops == 0
    assert all(ref.shape != (EXPERTS, HIDDEN, INNER) for ref in result.plans.necessary.input_refs)
