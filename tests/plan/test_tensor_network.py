"""Linear segments as tensor networks (plan/algebra/network.py, contraction.py) and rewriting
to a fixed point (plan/algebra/__init__.py, shared.py): each program of an adversary's
categories with its closed form where the rewrite fires, the programs where it must not, every
replacement checked on float64 data, and generated networks checked against a brute-force
search and against their own values.

FLOPs as the cost rules count them: a product 2·M·K·N tensor FLOPs (a batched one per batch),
a sum one add per input element, a pointwise op one per output element; the sizes are large
(meta tensors) so that the products are compute-bound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_algebra import _With

from conftest import analyze, meta
from torchroofline.costs import lookup
from torchroofline.plan.algebra import contraction
from torchroofline.plan.algebra._core import Graph
from torchroofline.plan.algebra.contraction import (
    _replayed,
    best_order,
    contracted_network,
    pair_cost,
)
from torchroofline.plan.algebra.network import STEPS
from torchroofline.plan.demand import known_values
from torchroofline.trace.tracer import trace_model

M, K, N = 2048, 1024, 4096
SUM = "sum through the linear map"
SCALED = "common subexpression up to a scale"
CHAIN = "matrix chain reassociated"
CSE = "common subexpression"



def _fc(k: int = K, n: int = N, **options: Any) -> nn.Linear:
    return nn.Linear(k, n, **options)


def _pooled(s: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool1d(s.fc(x).unsqueeze(1), 16).squeeze(1)


def _two_reductions(s: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = s.fc(x)
    return y.sum(1), y.mean(1)


# (name, forward, parts, input shapes, tensor FLOPs, vector FLOPs, rewrites), each with the
# closed form of the cheapest order derived beside it
CLOSED_FORMS = [
    # Σ_s x[b, s] first (B·S·K adds), then (B, K) @ (K, N); the 1/S on the (B, K) sums and
    # the bias added to each output (B·N)
    ("linear-mean-over-sequence", lambda s, x: s.fc(x).mean(1), {"fc": _fc},
     [(16, 128, K)], 2 * 16 * K * N, 16 * 128 * K + 16 * K + 16 * N, [("fc", SUM)]),
    # W @ w first (2·K·N), then x @ (W w) (2·M·K); b · w (2·N), added to each row (M)
    ("weighted-sum", lambda s, x, w: (s.fc(x) * w).sum(-1), {"fc": _fc},
     [(M, K), (N,)], 2 * K * N + 2 * M * K + 2 * N, M, [("fc", SUM)]),
    # N = 16 groups of 256: W summed per group (K·N adds), x @ that (2·M·K·16); the bias
    # summed per group (N) and added (M·16)
    ("grouped-column-sums", lambda s, x: s.fc(x).view(M, 16, 256).sum(-1), {"fc": _fc},
     [(M, K)], 2 * M * K * 16, K * N + N + M * 16, [("fc", SUM)]),
    # a transpose and a copy move no value: x @ ΣW (K·N adds, 2·M·K), Σb (N), added (M)
    ("layout-copy-then-sum", lambda s, x: s.fc(x).t().contiguous().sum(0), {"fc": _fc},
     [(M, K)], 2 * M * K, K * N + N + M, [("fc", SUM)]),
    # the mean is the sum over N (one network up to a number: shared.equal_networks), so one
    # matrix-vector product (2·M·K): ΣW (K·N adds) and Σb (N), the bias added (M), the mean
    # the sum times 1/N (M); the GEMM is computed by neither
    ("one-product-two-reductions", _two_reductions, {"fc": _fc},
     [(M, K)], 2 * M * K, K * N + N + 2 * M, [("", SCALED), ("fc", SUM)]),
    # Σ_b A[b] (8·512·256 adds), then each batch (256) @ (256, 1024): 2·8·256·1024
    ("bmm-sum-rows", lambda s, a, b: torch.bmm(a, b).sum(1), {},
     [(8, 512, 256), (8, 256, 1024)], 2 * 8 * 256 * 1024, 8 * 512 * 256, [("", SUM)]),
    # Σ_j B (8·256·1024 adds), then Σ_b A[b] @ (ΣB)[b]: 2·8·512·256
    ("bmm-sum-batch-and-columns", lambda s, a, b: torch.bmm(a, b).sum((0, 2)), {},
     [(8, 512, 256), (8, 256, 1024)], 2 * 8 * 512 * 256, 8 * 256 * 1024, [("", SUM)]),
    # bmm(bmm(A, B), v) = bmm(A, bmm(B, v)): two batched matrix-vector products
    ("bmm-chain", lambda s, a, b, v: torch.bmm(torch.bmm(a, b), v), {},
     [(8, 1024, 1024), (8, 1024, 1024), (8, 1024, 1)], 2 * 2 * 8 * 1024 * 1024, 0,
     [("", CHAIN)]),
    # x @ (v uᵀ)ᵀ = (x @ u) vᵀ: 2·M·K, then the outer product (M·N multiplies)
    ("rank-one-weight", lambda s, x, u, v: F.linear(x, torch.outer(v, u)), {},
     [(M, K), (K,), (N,)], 2 * M * K, M * N, [("", CHAIN)]),
    # ones (K × N, 4 M elements) made in forward: each row of x summed once (M·K adds)
    ("ones-made-in-forward", lambda s, x: x @ torch.ones(K, N), {},
     [(M, K)], 0, M * K, [("", CHAIN)]),
    # x @ kron(A, B) with 32 × 32 factors: x as (M, 32, 32) times B (2·M·32·32·32), then A
    # (the same): 2·M·32²·64 instead of 2·M·1024²
    ("kronecker-weight", lambda s, x, a, b: x @ torch.kron(a, b), {},
     [(M, K), (32, 32), (32, 32)], 2 * M * 32 * 32 * 64, 0, [("", CHAIN)]),
    # Σᵢⱼ uᵢ vⱼ = (Σu)(Σv): 4096 adds each, one multiply
    ("outer-product-sum", lambda s, u, v: (u[:, None] * v).sum(), {},
     [(4096,), (4096,)], 0, 2 * 4096 + 1, [("", SUM)]),
    # the pool of a map is the map of the pooled weights: W's rows summed in groups of 16
    # (K·N adds) and scaled (K·N/16), then 2·M·K·N/16; the bias the same (N, N/16) and added
    # (M·N/16)
    ("linear-then-pool", _pooled, {"fc": _fc},
     [(M, K)], 2 * M * K * N // 16, K * N + K * N // 16 + N + N // 16 + M * N // 16,
     [("fc", SUM)]),
]


@pytest.mark.parametrize(
    ("forward", "parts", "shapes", "tensor", "vector", "rewrites"),
    [c[1:] for c in CLOSED_FORMS], ids=[c[0] for c in CLOSED_FORMS],
)
def test_a_linear_segment_is_contracted_in_its_cheapest_order(
    forward: Callable, parts: dict, shapes: list, tensor: int, vector: int, rewrites: list
) -> None:
    model = _With(forward, **{name: make(device="meta") for name, make in parts.items()})
    result = analyze(model, *(meta(*shape) for shape in shapes))
    assert (result.tensor_flops, result.vector_flops) == (tensor, vector)
    assert [(r.module, r.rule) for r in result.rewrites] == rewrites
    assert result.time_ms["sol"] < result.time_ms["sol_as_written"]


# programs whose value is 0 once two equal values are found one: the common subexpression,
# then x − x = 0, then nothing is computed (the outputs written)
COMPOSED = [
    ("product-minus-itself", lambda s, x, w: x @ w - x @ w, [(M, K), (K, N)]),
    ("module-called-twice", lambda s, x, w: s.fc(x) - s.fc(x), [(M, K), (K, N)]),
    ("product-minus-its-transposed-form", lambda s, a, b: a @ b - (b.T @ a.T).T,
     [(K, K), (K, K)]),
    ("max-minus-itself", lambda s, x, w: x.amax(1) - x.amax(1), [(M, K), (K, N)]),
]


@pytest.mark.parametrize(("forward", "shapes"), [c[1:] for c in COMPOSED],
                         ids=[c[0] for c in COMPOSED])
def test_rules_compose_to_a_fixed_point(forward: Callable, shapes: list) -> None:
    model = _With(forward, fc=_fc(device="meta"))
    result = analyze(model, *(meta(*shape) for shape in shapes))
    assert result.flops == 0
    assert [rule for _, rule in ((r.module, r.rule) for r in result.rewrites)] == [
        CSE, "x − x = 0"
    ]


def test_a_softmax_times_ones_is_its_row_sums_which_are_one() -> None:
    # softmax(x) @ 1 = Σ_j softmax(x)[:, j] broadcast (the contraction), = 1 (the rows of a
    # softmax): nothing is computed
    result = analyze(_With(lambda s, x: torch.softmax(x, 1) @ torch.ones(K, K)), meta(M, K))
    assert result.flops == 0
    assert [r.rule for r in result.rewrites] == [CHAIN, "softmax rows sum to 1"]


NOT_FIRING = [
    # a nonlinearity between the map and the sum
    ("relu-between", lambda s, x: torch.relu(s.fc(x)).sum(1)),
    # the product is also an output: it is computed anyway, its sum is cheapest from it
    ("product-also-returned", lambda s, x: (lambda y: (y, y.sum(1)))(s.fc(x))),
    # a chunk of the product: no linear map of the whole operands (a slice of the weights
    # would be, but this is no rule of this pass)
    ("a-chunk-of-the-product", lambda s, x: s.fc(x)[:, : N // 2].exp()),
    # a product read by a sum and by a nonlinearity: computed anyway
    ("product-read-by-a-nonlinearity", lambda s, x: (lambda y: y.sum(1) + y.exp().sum(1))(
        s.fc(x))),
    # overlapping windows (stride 8 < kernel 16) tile nothing
    ("overlapping-pool", lambda s, x: F.gelu(F.avg_pool1d(s.fc(x).unsqueeze(1), 16, 8))),
    # two different weights on two different inputs: no common subexpression, no common
    # factor (one weight on one input is: test_algebra_spellings.py)
    ("two-weights-two-inputs", lambda s, x: s.fc(x) - s.other(torch.relu(x))),
    # random ops are never one value
    ("two-dropouts", lambda s, x: F.dropout(x, 0.5, True) - F.dropout(x, 0.5, True)),
]


@pytest.mark.parametrize("forward", [c[1] for c in NOT_FIRING], ids=[c[0] for c in NOT_FIRING])
def test_no_contraction_where_the_segment_is_no_linear_map(forward: Callable) -> None:
    model = _With(forward, fc=_fc(device="meta"), other=_fc(device="meta"))
    result = analyze(model, meta(M, K))
    assert not result.rewrites and result.flops > 0


# --- every replacement computes the program's value, on float64 data ---------------------------


def _double(*shape: int) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.float64)


def _with_tensors(tree: Any, tensors: Any) -> Any:
    """``tree`` (an op's arguments) with each tensor replaced by the next of ``tensors``."""
    return torch.utils._pytree.tree_map(
        lambda leaf: next(tensors) if isinstance(leaf, torch.Tensor) else leaf, tree)


def _real_values(trace: Any, model: nn.Module, inputs: tuple) -> dict[int, torch.Tensor]:
    """Every value of ``trace`` (by value id) as its storage held right after it was written:
    the inputs and parameters as given, every other value by running the traced ops
    themselves (their aten overloads) on the real values they read, in program order — so a
    leaf made inside a segment (``relu(e)`` between two products) has its value too."""
    held = dict(model.state_dict(keep_vars=True))
    given = dict(zip(trace.argument_value_ids, inputs, strict=True))
    given |= {value: held[name] for name, value in trace.module_value_ids.items()}
    storages: dict[int, torch.Tensor] = {}
    values: dict[int, torch.Tensor] = {}
    for _, ref in trace.resident:
        # (parameters no op reads share one placeholder id: their shapes tell them apart)
        if ref.value_id in given and tuple(given[ref.value_id].shape) == ref.shape:
            # a copy: a value the program changes in place stays the caller's
            storages[ref.storage_id] = given[ref.value_id].detach().as_strided(
                (ref.storage_elements,), (1,), 0).clone()
            values[ref.value_id] = storages[ref.storage_id].clone()

    def real(ref: Any) -> torch.Tensor:
        return storages[ref.storage_id].as_strided(ref.shape, ref.strides, ref.offset)

    for op in trace.ops:
        if op.is_view or op.func is None:
            continue
        args, kwargs = _with_tensors((op.args, op.kwargs), iter(map(real, op.reads)))
        kwargs = {k: "cpu" if k == "device" else v for k, v in kwargs.items()}
        out = op.func(*args, **kwargs)
        made = [leaf for leaf in torch.utils._pytree.tree_leaves(out)
                if isinstance(leaf, torch.Tensor)]
        for ref, tensor in zip(op.writes, made, strict=False):
            if tuple(tensor.shape) != ref.shape:  # a saved statistic the CPU kernel leaves empty
                continue
            if ref.storage_id not in storages:
                storages[ref.storage_id] = torch.zeros(ref.storage_elements,
                                                       dtype=getattr(torch, ref.dtype))
            if tensor.data_ptr() != real(ref).data_ptr():  # not written in place
                real(ref).copy_(tensor)
            values[ref.value_id] = storages[ref.storage_id].clone()
    return values


def _forced_replacements(model: nn.Module, inputs: tuple) -> list[tuple[int, torch.Tensor]]:
    """For each op whose output the model returns and whose segment the rule can contract
    (forced: whatever the gain), the output position and the replacement run on the values
    the program holds there (:func:`_real_values`: inputs, parameters and the values its
    own ops make, leaves made inside the segment among them)."""
    trace = trace_model(model, inputs)
    values = _real_values(trace, model, inputs)
    graph = Graph.of(trace, known_values(trace.ops, trace.constants))
    outputs = {ref.value_id: (i, ref) for i, ref in enumerate(trace.output_refs)}
    found = []
    for index, op in enumerate(trace.ops):
        if op.is_view or not op.writes or op.writes[0].value_id not in outputs or (
            lookup(STEPS, op) is None  # no step of a segment (the rule forced at any that is)
        ):
            continue
        match = contracted_network(graph, index)
        if match is not None:
            tensors = [values[ref.value_id].as_strided(ref.shape, ref.strides, ref.offset)
                       for ref in match.inputs]
            position, out = outputs[op.writes[0].value_id]  # the output: a view of the value
            replaced = match.build(*tensors)
            found.append((position, replaced.as_strided(
                out.shape, out.strides, out.offset - op.writes[0].offset)))
    return found


@pytest.fixture
def _always_fire(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule fires whatever its gain (small sizes): exactness is what is checked."""
    monkeypatch.setattr(contraction, "MIN_GAIN", -math.inf)


class _BatchNormed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(6, 8).double(), nn.BatchNorm1d(8).double().eval()
        self.bn.running_mean.normal_()
        self.bn.running_var.uniform_(0.5, 2)
        self.bn.weight.data.normal_()
        self.bn.bias.data.normal_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x)).mean(1)


def _linear(body: Callable, k: int = 6, n: int = 8) -> nn.Module:
    return _With(body, fc=nn.Linear(k, n).double())


EXACT = [
    ("mean-over-sequence", _linear(lambda s, x: s.fc(x).mean(1)), (_double(2, 3, 6),)),
    ("weighted", _linear(lambda s, x, w: (s.fc(x) * w).sum(-1)), (_double(5, 6), _double(8))),
    ("divided", _linear(lambda s, x, w: (s.fc(x) / w).sum(-1)), (_double(5, 6), _double(8))),
    ("grouped", _linear(lambda s, x: s.fc(x).view(5, 2, 4).sum(-1)), (_double(5, 6),)),
    ("layout-copy", _linear(lambda s, x: s.fc(x).t().contiguous().sum(0)), (_double(5, 6),)),
    ("two-readers", _linear(_two_reductions), (_double(5, 6),)),
    ("pool", _linear(lambda s, x: F.avg_pool1d(s.fc(x).unsqueeze(1), 4).squeeze(1)),
     (_double(5, 6),)),
    ("adaptive-pool", _linear(lambda s, x: F.adaptive_avg_pool1d(s.fc(x).unsqueeze(1), 2)),
     (_double(5, 6),)),
    ("global-pool-2d", _With(lambda s, x: F.avg_pool2d(x * 2 + 1, (4, 6))), (_double(2, 3, 4, 6),)),
    ("batch-norm-eval", _BatchNormed(), (_double(5, 6),)),
    ("bmm-sum", _With(lambda s, a, b: torch.bmm(a, b).sum((0, 2))), (_double(2, 3, 4),
                                                                       _double(2, 4, 5))),
    ("bmm-chain", _With(lambda s, a, b, v: torch.bmm(torch.bmm(a, b), v)),
     (_double(2, 5, 5), _double(2, 5, 5), _double(2, 5, 1))),
    ("einsum", _With(lambda s, a, b: torch.einsum("bij,bjk->bik", a, b).sum(1)),
     (_double(2, 3, 4), _double(2, 4, 5))),
    ("rank-one", _With(lambda s, x, u, v: F.linear(x, torch.outer(v, u))),
     (_double(3, 6), _double(6), _double(4))),
    ("ones", _With(lambda s, x: x @ torch.ones(6, 4, dtype=torch.float64) * 3),
     (_double(5, 6),)),
    ("full", _With(lambda s, x: (x @ torch.full((6, 4), 0.5, dtype=torch.float64)).sum(0)),
     (_double(5, 6),)),
    ("eye", _With(lambda s, x, w: (x @ torch.eye(6, dtype=torch.float64) @ w).sum(1)),
     (_double(5, 6), _double(6, 4))),
    ("kron", _With(lambda s, x, a, b: x @ torch.kron(a, b)), (_double(3, 6), _double(2, 3),
                                                              _double(3, 2))),
    ("outer-sum", _With(lambda s, u, v: (u[:, None] * v).sum()), (_double(3), _double(4))),
    ("affine-chain", _With(lambda s, x: s.b(s.a(x)), a=nn.Linear(6, 8).double(),
                           b=nn.Linear(8, 2).double()), (_double(5, 6),)),
    ("scaled-shifted", _linear(lambda s, x: (-(s.fc(x) * 3 - 2) + 1).mean()), (_double(5, 6),)),
    # a 1×1 convolution pooled first, emitted as a convolution (it keeps the convolution's
    # precision): a (4, 3) weight, the pooled image's channels contracted
    ("pooled-convolution", _With(lambda s, x, w: F.avg_pool2d(
        F.conv2d(x, w[:, :, None, None]), 2)), (_double(2, 3, 4, 6), _double(4, 3))),
]


@pytest.mark.usefixtures("_always_fire")
@pytest.mark.parametrize(("model", "inputs"), [c[1:] for c in EXACT], ids=[c[0] for c in EXACT])
def test_the_contraction_computes_the_programs_value(model: nn.Module, inputs: tuple) -> None:
    found = _forced_replacements(model, inputs)
    assert found
    expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for position, replaced in found:
        assert replaced.shape == expected[position].shape
        assert torch.allclose(replaced, expected[position], atol=1e-9)


# --- generated networks ------------------------------------------------------------------------

_LABELS = "abcde"


@st.composite
def _networks(draw: st.DrawFn) -> tuple[str, list[tuple[int, ...]], str, bool]:
    """An einsum over 2–4 operands of up to 3 labels each (sizes 1–4), the labels it keeps,
    whether a ``torch.ones`` (made in forward) is one more operand, and the reduction after
    it: ``sum``/``mean`` over dims or a pool of the last one."""
    sizes = {label: draw(st.integers(1, 4)) for label in _LABELS}
    operands = draw(st.lists(
        st.lists(st.sampled_from(_LABELS), min_size=1, max_size=3, unique=True).map("".join),
        min_size=2, max_size=4,
    ))
    present = sorted(set("".join(operands)))
    kept = "".join(draw(st.lists(st.sampled_from(present), max_size=3, unique=True)))
    equation = f"{','.join(operands)}->{kept}"
    shapes = [tuple(sizes[a] for a in op) for op in operands]
    ones = draw(st.booleans())
    return equation, shapes, draw(st.sampled_from(["sum", "mean", "pool", "scale"])), ones


def _program(equation: str, reduction: str, ones: bool) -> Callable:
    def forward(s: nn.Module, *tensors: torch.Tensor) -> torch.Tensor:
        if ones:  # a constant operand along the first operand's first dim
            tensors = (*tensors[:-1], tensors[-1] * torch.ones(tensors[-1].shape,
                                                               dtype=torch.float64))
        y = torch.einsum(equation, *tensors)
        if reduction == "scale" or y.dim() == 0:
            return (y * 2).sum()
        if reduction == "pool" and y.dim() >= 1 and y.shape[-1] % 2 == 0:
            return F.avg_pool1d(y.reshape(1, -1, y.shape[-1]), 2)
        return y.mean(-1) if reduction == "mean" else y.sum(0)

    return forward


@pytest.mark.usefixtures("_always_fire")
@settings(max_examples=25, deadline=None)
@given(_networks())
def test_a_generated_networks_contraction_is_its_value(network: tuple) -> None:
    equation, shapes, reduction, ones = network
    model = _With(_program(equation, reduction, ones))
    inputs = tuple(_double(*shape) for shape in shapes)
    expected = model(*inputs)
    found = _forced_replacements(model, inputs)
    assert found, equation
    for _, replaced in found:
        assert torch.allclose(replaced, expected, atol=1e-9), equation


def _brute_force(factors: list[tuple[int, ...]], output: tuple[int, ...],
                 sizes: dict[int, int]) -> float:
    """The cheapest of every sequence of pairwise contractions (after each factor sums its own
    labels out, as :func:`best_order` does): the seconds of the best."""
    order = best_order(factors, output, sizes, 4)
    contracted = _replayed(order.tree, order.kept, output, sizes, 4)[2] if order.kept else None
    prepared = order.cost.seconds - (contracted.seconds if contracted else 0)

    def cheapest(items: list[tuple[int, ...]]) -> float:
        if len(items) == 1:
            return 0.0
        best = math.inf
        for i, j in itertools.combinations(range(len(items)), 2):
            rest = [items[n] for n in range(len(items)) if n not in (i, j)]
            needed = set(output).union(*rest)
            joined = tuple(sorted((set(items[i]) | set(items[j])) & needed))
            step = pair_cost(items[i], items[j], joined, sizes, 4).seconds
            best = min(best, step + cheapest([*rest, joined]))
        return best

    return prepared + cheapest(list(order.kept))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True), min_size=2,
             max_size=5),
    st.lists(st.integers(1, 64), min_size=6, max_size=6),
    st.lists(st.integers(0, 5), max_size=3, unique=True),
)
def test_the_chosen_order_costs_no_more_than_a_brute_force_search(
    factors: list[list[int]], sizes: list[int], output: list[int]
) -> None:
    labels = [tuple(f) for f in factors]
    present = set().union(*labels)
    kept = tuple(a for a in output if a in present)
    table = dict(enumerate(sizes))
    chosen = best_order(labels, kept, table, 4).cost.seconds
    assert chosen <= _brute_force(labels, kept, table) * (1 + 1e-9)


SPELLINGS = [
    ("flatten-then-mean", lambda s, x: s.conv(x).flatten(2).mean(-1)),
    ("whole-image-pool", lambda s, x: F.avg_pool2d(s.conv(x), 32).flatten(1)),
    ("eval-batch-norm-between", lambda s, x: s.bn(s.conv(x)).mean((2, 3))),
]


@pytest.mark.parametrize("forward", [c[1] for c in SPELLINGS], ids=[c[0] for c in SPELLINGS])
def test_a_global_mean_of_a_convolution_in_any_spelling_takes_the_convolutions_rule(
    forward: Callable,
) -> None:
    # the segment is rewritten to the plain spatial sum of the convolution's output, which the
    # convolution's own rule (linear.py) takes in the next round: the same tensor FLOPs as
    # conv(x).mean((2, 3)), far below the convolution's 2·N·Cin·9·Cout·32²
    conv = nn.Conv2d(64, 128, 3, padding=1, device="meta")
    parts = {"conv": conv, "bn": nn.BatchNorm2d(128, device="meta").eval()}
    plain = analyze(_With(lambda s, x: s.conv(x).mean((2, 3)), **parts), meta(16, 64, 32, 32))
    spelled = analyze(_With(forward, **parts), meta(16, 64, 32, 32))
    assert spelled.tensor_flops == plain.tensor_flops < 2 * 16 * 64 * 9 * 128 * 32 * 32 // 10
    assert spelled.rewrites[-1].module == "conv"
