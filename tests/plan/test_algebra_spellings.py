"""Equal spellings of one multilinear program get one bound (plan/algebra: the cheapest equal
program, docs/algebra.md): generated programs (matrix chains, sums of products, scaled and
divided products, a shared factor distributed over a sum, a linear layer with its bias, batched
products, outer products), each written several ways that are equal over the reals
(reassociated, factored or multiplied out, a sum moved into or out of a product, (AB)ᵀ = BᵀAᵀ,
einsum for matmul, a mean for a sum). For each:

1. every spelling's speed of light is the same (within the 2 % a rewrite must gain to fire);
2. the necessary compute is at most a hand minimum found independently: an exhaustive search
   over the pairwise contraction orders of the program's normal form, priced at the rates the
   order search weighs work with (a contraction 2 tensor FLOPs per point of its index space,
   a multiply 1 vector FLOP per point, a factor summing its own labels out 1 per element),
   plus one pass over the output and over the smallest factor per term (its coefficient and
   the terms' adds);
3. the bound never collapses: compulsory bytes are exactly every input read once and the
   output written once (every input element of these programs changes the output), and on
   small real data never below what the dependence oracle (tests/oracle.py) proves.

Sizes are meta tensors (free) up to 2048, so that products are compute-bound and an order
matters.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_algebra import _With
from test_tensor_network import _always_fire, _forced_replacements  # noqa: F401 (a fixture)

from conftest import Fn, analyze, meta
from oracle import oracle
from torchroofline.plan.algebra.contraction import MIN_GAIN, TENSOR_FLOPS_PER_S, VECTOR_FLOPS_PER_S

FP32 = 4

Program = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class Family:
    """One program: its equal spellings, its inputs' labels (one letter a dim) and its output's,
    and its normal form for the hand minimum: terms of factors (each factor an input's labels,
    ``"jk+"`` one summed from two inputs first, ``"jk++"`` from three: one add per element
    each)."""

    spellings: tuple[tuple[str, Program], ...]
    inputs: tuple[str, ...]
    output: str
    terms: tuple[tuple[str, ...], ...]


def _mm_chain() -> Family:
    return Family((
        ("(AB)C", lambda a, b, c: (a @ b) @ c),
        ("A(BC)", lambda a, b, c: a @ (b @ c)),
        ("einsum", lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c)),
        ("((CᵀBᵀ)Aᵀ)ᵀ", lambda a, b, c: ((c.T @ b.T) @ a.T).T),
        ("(Cᵀ(BᵀAᵀ))ᵀ", lambda a, b, c: (c.T @ (b.T @ a.T)).T),
        ("multi_dot", lambda a, b, c: torch.linalg.multi_dot([a, b, c])),
    ), ("ij", "jk", "kl"), "il", (("ij", "jk", "kl"),))


def _chain_vector() -> Family:
    return Family((
        ("(AB)v", lambda a, b, v: (a @ b) @ v),
        ("A(Bv)", lambda a, b, v: a @ (b @ v)),
        ("einsum", lambda a, b, v: torch.einsum("ij,jk,k->i", a, b, v)),
        ("(vBᵀ)Aᵀ", lambda a, b, v: (v @ b.T) @ a.T),
        ("mv(mm)", lambda a, b, v: torch.mv(torch.mm(a, b), v)),
    ), ("ij", "jk", "k"), "i", (("ij", "jk", "k"),))


def _sum_of_product() -> Family:
    return Family((
        ("(AB).sum(0)", lambda a, b: (a @ b).sum(0)),
        ("A.sum(0)@B", lambda a, b: a.sum(0) @ b),
        ("einsum", lambda a, b: torch.einsum("ij,jk->k", a, b)),
        ("(BᵀAᵀ).sum(1)", lambda a, b: (b.T @ a.T).sum(1)),
        ("mean·n", lambda a, b: (a @ b).mean(0) * a.shape[0]),
        ("(AB)ᵀ copied", lambda a, b: (a @ b).T.contiguous().sum(1)),
    ), ("ij", "jk"), "k", (("ij", "jk"),))


def _scaled_product() -> Family:
    return Family((
        ("(A·v)B", lambda a, v, b: (a * v) @ b),
        ("A(v·B)", lambda a, v, b: a @ (v[:, None] * b)),
        ("einsum", lambda a, v, b: torch.einsum("ij,j,jk->ik", a, v, b)),
        ("(Bᵀ(A·v)ᵀ)ᵀ", lambda a, v, b: (b.T @ (a * v).T).T),
    ), ("ij", "j", "jk"), "ik", (("ij", "j", "jk"),))


def _distributed() -> Family:
    return Family((
        ("AB+AC", lambda a, b, c: a @ b + a @ c),
        ("A(B+C)", lambda a, b, c: a @ (b + c)),
        ("einsum+einsum", lambda a, b, c: torch.einsum("ij,jk->ik", a, b)
         + torch.einsum("ij,jk->ik", a, c)),
        ("(BᵀAᵀ+CᵀAᵀ)ᵀ", lambda a, b, c: (b.T @ a.T + c.T @ a.T).T),
        ("AB-A(-C)", lambda a, b, c: a @ b - a @ (-c)),
        ("AB+(CᵀAᵀ)ᵀ", lambda a, b, c: a @ b + (c.T @ a.T).T),
    ), ("ij", "jk", "jk"), "ik", (("ij", "jk+"),))


def _distributed_sum() -> Family:
    return Family((
        ("(AB+AC).sum(0)", lambda a, b, c: (a @ b + a @ c).sum(0)),
        ("A.sum(0)@(B+C)", lambda a, b, c: a.sum(0) @ (b + c)),
        ("(A(B+C)).sum(0)", lambda a, b, c: (a @ (b + c)).sum(0)),
    ), ("ij", "jk", "jk"), "k", (("ij", "jk+"),))


def _shared_right_factor() -> Family:
    return Family((
        ("AC+BC", lambda a, b, c: a @ c + b @ c),
        ("(A+B)C", lambda a, b, c: (a + b) @ c),
        ("(CᵀAᵀ+CᵀBᵀ)ᵀ", lambda a, b, c: (c.T @ a.T + c.T @ b.T).T),
    ), ("ij", "ij", "jk"), "ik", (("ij+", "jk"),))


def _three_terms() -> Family:
    return Family((
        ("AB+AC-AD/2", lambda a, b, c, d: a @ b + a @ c - a @ d / 2),
        ("A(B+C-D/2)", lambda a, b, c, d: a @ (b + c - d / 2)),
    ), ("ij", "jk", "jk", "jk"), "ik", (("ij", "jk++"),))


def _two_linears() -> Family:
    return Family((
        ("linear+linear", lambda x, w, b, v, c: F.linear(x, w, b) + F.linear(x, v, c)),
        ("linear(W+V, b+c)", lambda x, w, b, v, c: F.linear(x, w + v, b + c)),
        ("x(W+V)ᵀ+(b+c)", lambda x, w, b, v, c: x @ (w + v).T + (b + c)),
    ), ("ij", "kj", "k", "kj", "k"), "ik", (("ij", "kj+"), ("k+",)))


def _scaled_copies() -> Family:
    return Family((
        ("2AB+A(3B)", lambda a, b: 2 * (a @ b) + a @ (3 * b)),
        ("5(AB)", lambda a, b: 5 * (a @ b)),
        ("(5A)B", lambda a, b: (a * 5) @ b),
    ), ("ij", "jk"), "ik", (("ij", "jk"),))


def _two_layers() -> Family:
    return Family((
        ("linear(linear)", lambda x, w, b, v: F.linear(F.linear(x, w, b), v)),
        ("x(WᵀVᵀ)+bVᵀ", lambda x, w, b, v: x @ (w.T @ v.T) + b @ v.T),
        ("((xWᵀ+b)Vᵀ)", lambda x, w, b, v: (x @ w.T + b) @ v.T),
    ), ("ij", "kj", "k", "lk"), "il", (("ij", "kj", "lk"), ("k", "lk")))


def _chain_total() -> Family:
    return Family((
        ("(ABC).sum()", lambda a, b, c: (a @ b @ c).sum()),
        ("ΣA·B·ΣC", lambda a, b, c: a.sum(0) @ b @ c.sum(1)),
        ("einsum", lambda a, b, c: torch.einsum("ij,jk,kl->", a, b, c)),
        ("mean·n", lambda a, b, c: (a @ (b @ c)).mean() * (a.shape[0] * c.shape[1])),
    ), ("ij", "jk", "kl"), "", (("ij", "jk", "kl"),))


def _batched_transposed() -> Family:
    return Family((
        ("bmm(A, Bᵀ)", lambda a, b: torch.bmm(a, b.transpose(1, 2))),
        ("einsum", lambda a, b: torch.einsum("bij,bkj->bik", a, b)),
        ("bmm(B, Aᵀ)ᵀ", lambda a, b: torch.bmm(b, a.transpose(1, 2)).transpose(1, 2)),
    ), ("bij", "bkj"), "bik", (("bij", "bkj"),))


def _divided_by_vector() -> Family:
    return Family((
        ("(AB)/v", lambda a, b, v: (a @ b) / v),
        ("A(B/v)", lambda a, b, v: a @ (b / v)),
        ("(AB)·(1/v)", lambda a, b, v: (a @ b) * v.reciprocal()),
    ), ("ij", "jk", "k"), "ik", (("ij", "jk", "k"),))


def _viewed_sum() -> Family:
    return Family((
        ("(x W).sum(1)", lambda x, w: (x @ w).sum(1)),
        ("x.sum(1) W", lambda x, w: x.sum(1) @ w),
        ("flat view", lambda x, w: (x.reshape(-1, x.shape[-1]) @ w).view(
            x.shape[0], x.shape[1], -1).sum(1)),
        ("einsum", lambda x, w: torch.einsum("bsj,jk->bk", x, w)),
    ), ("bsj", "jk"), "bk", (("bsj", "jk"),))


def _linear_bias_sum() -> Family:
    return Family((
        ("linear.sum(1)", lambda x, w, b: F.linear(x, w, b).sum(1)),
        ("(xWᵀ+b).sum(1)", lambda x, w, b: (x @ w.T + b).sum(1)),
        ("x@ΣW+Σb", lambda x, w, b: x @ w.sum(0) + b.sum()),
        ("einsum+Σb", lambda x, w, b: torch.einsum("ij,kj->i", x, w) + b.sum()),
    ), ("ij", "kj", "k"), "i", (("ij", "kj"), ("k",)))


def _batched_sum() -> Family:
    return Family((
        ("bmm.sum(1)", lambda a, b: torch.bmm(a, b).sum(1)),
        ("einsum", lambda a, b: torch.einsum("bij,bjk->bk", a, b)),
        ("bmm(ΣA, B)", lambda a, b: torch.bmm(a.sum(1, keepdim=True), b).squeeze(1)),
        ("matmul.mean·n", lambda a, b: (a @ b).mean(1) * a.shape[1]),
    ), ("bij", "bjk"), "bk", (("bij", "bjk"),))


def _divided() -> Family:
    return Family((
        ("(AB)/3", lambda a, b: (a @ b) / 3),
        ("A(B/3)", lambda a, b: a @ (b / 3)),
        ("(A/3)B", lambda a, b: (a / 3) @ b),
        ("einsum·⅓", lambda a, b: torch.einsum("ij,jk->ik", a, b) * (1 / 3)),
    ), ("ij", "jk"), "ik", (("ij", "jk"),))


def _outer_sum() -> Family:
    return Family((
        ("(u vᵀ).sum()", lambda u, v: (u[:, None] * v).sum()),
        ("Σu·Σv", lambda u, v: u.sum() * v.sum()),
        ("outer.sum()", lambda u, v: torch.outer(u, v).sum()),
        ("einsum", lambda u, v: torch.einsum("i,j->", u, v)),
    ), ("i", "j"), "", (("i", "j"),))


FAMILIES = {f.__name__[1:]: f for f in (
    _mm_chain, _chain_vector, _sum_of_product, _scaled_product, _distributed, _distributed_sum,
    _shared_right_factor, _three_terms, _two_linears, _scaled_copies, _linear_bias_sum,
    _batched_sum, _divided, _outer_sum, _two_layers, _chain_total, _batched_transposed,
    _divided_by_vector, _viewed_sum,
)}

#: label sizes: 1 (a degenerate dim), small, and large enough to make a product compute-bound
SIZES = st.sampled_from([1, 3, 64, 512, 2048])


def _seconds(tensor_flops: float, vector_flops: float) -> float:
    return tensor_flops / TENSOR_FLOPS_PER_S + vector_flops / VECTOR_FLOPS_PER_S


def _cheapest_term(factors: list[str], output: str, sizes: dict[str, int]) -> float:
    """The least compute time of one term over every sequence of pairwise contractions, each
    factor first summing the labels no other factor nor the output has (exhaustive: the
    ``optimal`` path of opt_einsum, by this file's own search)."""
    def count(labels: str) -> int:
        return math.prod(sizes[a] for a in set(labels))

    seconds = 0.0
    prepared = []
    for i, labels in enumerate(factors):
        adds = labels.count("+")  # inputs added first: one add per element each
        labels = labels.rstrip("+")
        seconds += _seconds(0, adds * count(labels))
        elsewhere = set(output).union(*(f for j, f in enumerate(factors) if j != i))
        own = "".join(a for a in labels if a in elsewhere)
        if own != labels:
            seconds += _seconds(0, count(labels))
        prepared.append(own)

    def search(items: tuple[str, ...]) -> float:
        if len(items) == 1:
            return 0.0
        best = math.inf
        for i, j in itertools.combinations(range(len(items)), 2):
            rest = tuple(items[n] for n in range(len(items)) if n not in (i, j))
            needed = set(output).union(*rest)
            joint = set(items[i]) | set(items[j])
            kept = "".join(sorted(joint & needed))
            points = count("".join(joint))
            step = _seconds(2 * points, 0) if joint - needed else _seconds(0, points)
            best = min(best, step + search((*rest, kept)))
        return best

    return seconds + search(tuple(prepared))


def _hand_minimum(family: Family, sizes: dict[str, int]) -> float:
    """Seconds of the cheapest schedule of the normal form, plus per term one pass over the
    output (the terms' adds) and one over its smallest factor (a coefficient)."""
    out = math.prod(sizes[a] for a in family.output)
    total = 0.0
    for term in family.terms:
        smallest = min(math.prod(sizes[a] for a in f.rstrip("+")) for f in term)
        total += _cheapest_term(list(term), family.output, sizes) + _seconds(0, out + smallest)
    return total


@st.composite
def _programs(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    name = draw(st.sampled_from(sorted(FAMILIES)))
    family = FAMILIES[name]()
    labels = sorted(set("".join(family.inputs)))
    return name, {a: draw(SIZES) for a in labels}


def _shapes(family: Family, sizes: dict[str, int]) -> list[tuple[int, ...]]:
    return [tuple(sizes[a] for a in labels) for labels in family.inputs]


def _bounds(family: Family, sizes: dict[str, int]) -> dict[str, object]:
    shapes = _shapes(family, sizes)
    return {name: analyze(Fn(body), *(meta(*s) for s in shapes)) for name, body in
            family.spellings}


@settings(max_examples=25, deadline=None)
@given(_programs())
def test_equal_spellings_have_one_bound_at_most_the_hand_minimum(
    program: tuple[str, dict[str, int]],
) -> None:
    name, sizes = program
    family = FAMILIES[name]()
    results = _bounds(family, sizes)
    sols = {spelling: r.time_ms["sol"] for spelling, r in results.items()}
    # (1) one bound for every spelling (a rewrite fires at a 2 % gain, so within that)
    assert max(sols.values()) <= min(sols.values()) / (1 - MIN_GAIN), (name, sizes, sols)
    hand = _hand_minimum(family, sizes)
    compulsory = FP32 * (sum(math.prod(s) for s in _shapes(family, sizes))
                         + math.prod(sizes[a] for a in family.output))
    for spelling, result in results.items():
        # (2) the necessary compute at most the hand minimum's, where compute is the bound
        # (a memory-bound program keeps its spelling: the shortcut would not lower the bound)
        computed = _seconds(result.tensor_flops, result.vector_flops)
        assert result.compute_sol_s <= result.memory_sol_s or computed <= hand / (
            1 - MIN_GAIN), (name, spelling, sizes, computed, hand)
        # (3) every input once and the output once: no more, no less, and never 0
        assert result.compulsory_bytes == compulsory, (name, spelling, sizes)
        assert result.time_ms["sol"] > 0


def _on_data(largest: int) -> st.SearchStrategy:
    """A generated program's family, sizes (each at most ``largest``) and float64 inputs."""
    def made(program: tuple[str, dict[str, int]]) -> tuple[str, Family, dict[str, int], tuple]:
        name, sizes = program
        family = FAMILIES[name]()
        sizes = {a: min(n, largest) for a, n in sizes.items()}
        return name, family, sizes, tuple(
            torch.randn(s, dtype=torch.float64) for s in _shapes(family, sizes))

    return _programs().map(made)


@settings(max_examples=8, deadline=None)
@given(_on_data(3))
def test_every_spelling_charges_what_the_oracle_proves(program: tuple) -> None:
    name, family, sizes, inputs = program
    proven = None
    for spelling, body in family.spellings:
        found = oracle(Fn(body), inputs)
        proven = found if proven is None else proven
        # the spellings are equal: the same elements are needed whichever is traced
        assert found.input_bytes(FP32) == proven.input_bytes(FP32), (name, spelling)
        result = analyze(Fn(body), *(x.float() for x in inputs))
        assert result.compulsory_bytes >= found.bytes(FP32), (name, spelling, sizes)


# --- found by the properties above: a common factor of two terms (plan/algebra/factors.py) -----

M, K, N = 2048, 1024, 4096
FACTOR = "common factor taken out"


def _linears(body: Callable, device: str = "meta", dtype: torch.dtype = torch.float32) -> _With:
    """``body`` with two ``Linear(K, N)`` (``Linear(6, 8)`` on real data) as ``fc``, ``other``."""
    k, n = (K, N) if device == "meta" else (6, 8)
    return _With(body, fc=nn.Linear(k, n, device=device, dtype=dtype),
                 other=nn.Linear(k, n, device=device, dtype=dtype))


# (name, forward, input shapes, tensor FLOPs, vector FLOPs): each was two products where the
# cheapest equal program computes one (the bound was 2× the hand minimum: unsound)
COMMON_FACTORS = [
    # A @ B + A @ C = A @ (B + C): one product 2·M·K·N, B + C K·N adds
    ("shared-left-factor", lambda s, a, b, c: a @ b + a @ c, [(M, K), (K, N), (K, N)],
     2 * M * K * N, K * N),
    # A @ C + B @ C = (A + B) @ C: 2·M·K·N, M·K adds
    ("shared-right-factor", lambda s, a, b, c: a @ c + b @ c, [(M, K), (M, K), (K, N)],
     2 * M * K * N, M * K),
    # A @ B − A @ (−C) = A @ (B + C) (the negation a coefficient): 2·M·K·N, K·N
    ("negated-operand", lambda s, a, b, c: a @ b - a @ (-c), [(M, K), (K, N), (K, N)],
     2 * M * K * N, K * N),
    # A @ B + (Cᵀ @ Aᵀ)ᵀ: the second product read transposed, C read as Cᵀ: still A @ (B + C)
    ("transposed-spelling", lambda s, a, b, c: a @ b + (c.T @ a.T).T,
     [(M, K), (K, N), (K, N)], 2 * M * K * N, K * N),
    # A @ B + A @ C − A @ D / 2 = A @ (B + C − D/2): B + C (K·N), then − D/2 (a multiply and
    # an add each: 2·K·N)
    ("three-terms", lambda s, a, b, c, d: a @ b + a @ c - a @ d / 2,
     [(M, K), (K, N), (K, N), (K, N)], 2 * M * K * N, 3 * K * N),
    # fc(x) − other(x) = x @ (W₁ − W₂)ᵀ + (b₁ − b₂): 2·M·K·N; W₁ − W₂ (K·N), b₁ − b₂ (N),
    # the bias added to each output (M·N)
    ("two-linears-of-one-input", lambda s, x: s.fc(x) - s.other(x), [(M, K)],
     2 * M * K * N, K * N + N + M * N),
]


@pytest.mark.parametrize(("forward", "shapes", "tensor", "vector"),
                         [c[1:] for c in COMMON_FACTORS], ids=[c[0] for c in COMMON_FACTORS])
def test_a_common_factor_of_two_terms_is_taken_out(
    forward: Callable, shapes: list, tensor: int, vector: int
) -> None:
    result = analyze(_linears(forward), *(meta(*shape) for shape in shapes))
    assert (result.tensor_flops, result.vector_flops) == (tensor, vector)
    assert result.rewrites[-1].rule == FACTOR
    assert result.time_ms["sol"] < result.time_ms["sol_as_written"]


NO_COMMON_FACTOR = [
    # A @ B + B @ A: the same two values, in other places (no renaming makes them one term)
    ("swapped-product", lambda s, a, b: a @ b + b @ a, [(K, K), (K, K)]),
    # A @ B + C @ D: nothing shared
    ("nothing-shared", lambda s, a, b, c, d: a @ b + c @ d, [(M, K), (K, N), (M, K), (K, N)]),
    # a product also returned: computed anyway, A @ C is a second product
    ("product-also-kept", lambda s, a, b, c: (a @ b, a @ b + a @ c),
     [(M, K), (K, N), (K, N)]),
    # a nonlinearity between: relu(A @ B) is no product of A, so A @ C is a second one
    ("nonlinearity-between", lambda s, a, b, c: torch.relu(a @ b) + a @ c,
     [(M, K), (K, N), (K, N)]),
    # A changed in place between the products: A @ B + (A + D) @ C, D @ C still a product
    ("factor-changed-in-place", lambda s, a, b, c, d: a @ b + a.add_(d) @ c,
     [(M, K), (K, N), (K, N), (M, K)]),
]


@pytest.mark.parametrize(("forward", "shapes"), [c[1:] for c in NO_COMMON_FACTOR],
                         ids=[c[0] for c in NO_COMMON_FACTOR])
def test_two_products_stay_two_without_a_common_factor(forward: Callable, shapes: list) -> None:
    result = analyze(_linears(forward), *(meta(*shape) for shape in shapes))
    assert FACTOR not in [r.rule for r in result.rewrites]
    # two products of 2·n³ (K³ for the square ones)
    square = shapes[0] == (K, K)
    assert result.tensor_flops == (4 * K**3 if square else 4 * M * K * N)


@pytest.mark.usefixtures("_always_fire")
@pytest.mark.parametrize(("forward", "shapes"), [(c[1], c[2]) for c in COMMON_FACTORS],
                         ids=[c[0] for c in COMMON_FACTORS])
def test_the_factored_program_computes_the_programs_value(forward: Callable,
                                                          shapes: list) -> None:
    model = _linears(forward, device="cpu", dtype=torch.float64)
    small = {M: 5, K: 6, N: 8}
    inputs = tuple(torch.randn([small[n] for n in shape], dtype=torch.float64)
                   for shape in shapes)
    expected = model(*inputs)
    found = _forced_replacements(model, inputs)
    assert found
    for _, replaced in found:
        assert torch.allclose(replaced, expected, atol=1e-9)


@pytest.mark.usefixtures("_always_fire")
@settings(max_examples=15, deadline=None)
@given(_on_data(4))
def test_every_spellings_contraction_computes_its_value(program: tuple) -> None:
    # each segment the rule contracts (forced: whatever the gain) equals the program's output
    # on float64 data, factored or not
    name, family, sizes, inputs = program
    for spelling, body in family.spellings:
        model = Fn(body)
        expected = model(*inputs)
        for _, replaced in _forced_replacements(model, inputs):
            assert torch.allclose(replaced, expected, atol=1e-9), (name, spelling, sizes)


def test_an_einsum_chain_is_reassociated_as_its_matmul_spelling_is() -> None:
    # einsum('ij,jk,kl->il') over (2048, 64), (64, 64), (64, 1024): torch contracts left to
    # right, (AB)C = 2·2048·64·64 + 2·2048·64·1024 FLOPs; A(BC) = 2·64·64·1024 + 2·2048·64·1024,
    # 2.9 % fewer. The order search charged every term a pass over the output (an add), even
    # the one term here, which ate the gain: the einsum kept (AB)C where (A @ B) @ C was
    # reassociated (SoL 4.26 µs against 4.14 µs)
    i, j, k, n = 2048, 64, 64, 1024
    shapes = [meta(i, j), meta(j, k), meta(k, n)]
    spelled = analyze(Fn(lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c)), *shapes)
    plain = analyze(Fn(lambda a, b, c: (a @ b) @ c), *shapes)
    assert spelled.tensor_flops == plain.tensor_flops == 2 * j * k * n + 2 * i * j * n
    assert spelled.time_ms["sol"] == plain.time_ms["sol"]


@pytest.mark.parametrize("forward", [
    lambda a, b: a @ (b + torch.eye(K)),
    lambda a, b: a @ (b + 2 * torch.eye(K)),
    lambda a, b: a @ b + a,  # the same program spelled out
], ids=["A(B+I)", "A(B+2I)", "AB+A"])
def test_a_product_with_an_identity_added_keeps_its_product(forward: Callable) -> None:
    # A @ (B + c·I) = A @ B + c·A: the product 2·K³ stays. An ``eye`` made its two labels one
    # for the whole network, so the term A @ B was read as A times B's diagonal and the bound
    # charged no product at all (SoL 2.5 µs against 32.1 µs: a collapse)
    result = analyze(Fn(forward), meta(K, K), meta(K, K))
    assert result.tensor_flops == 2 * K**3
