"""A product that two terms of a sum hold, or one term twice (a power), is one value
(plan/algebra/factors.py, "a shared sub-product named once"): each occurrence reads it, the
plan computes and charges it once, and the groupings run over the terms that read it. The bound
never charges more than without the move (the search keeps the cheapest set of terms, the terms
as written among them), and the replacement computes the program's value (float64 below).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tensor_network import (  # noqa: F401 (a fixture)
    _always_fire,
    _forced_replacements,
    _real_values,
)

from conftest import Fn, analyze, meta
from torchroofline.plan.algebra import factors
from torchroofline.plan.algebra._core import Graph
from torchroofline.plan.algebra.shared import common_values, equal_networks, onto_equal
from torchroofline.plan.demand import known_values
from torchroofline.trace.refs import TensorRef
from torchroofline.trace.tracer import trace_model

#: square matrices where one product is compute-bound on an H100 (2·N³ = 1.4e11 FLOPs, 0.28 ms
#: of TF32, against three 64 MiB operands, 0.06 ms of HBM3)
N = 4096
PRODUCT = 2 * N**3


def test_powers_of_one_matrix_share_their_square() -> None:
    # s = a·a: a⁴ + a³ + a² = s·s + s·a + s = s·(s + a) + s, two products (s, then s·(s + a));
    # as written, value numbering shares a² and a³ and still leaves three (a², a³, a⁴)
    result = analyze(Fn(lambda a: a @ a @ a @ a + a @ a @ a + a @ a), meta(N, N))
    assert result.tensor_flops == 2 * PRODUCT
    assert result.time_ms["sol"] < result.time_ms["sol_as_written"]


def test_a_polynomial_names_its_fourth_power() -> None:
    # a + a² + … + a⁶ with s = a², t = s·s: (a + s) + (s + t)·(a + s), three products (s, t and
    # one more); the cheapest single move at each step (s named, the rest nested:
    # a·(I + a·(I + …))) took four
    result = analyze(Fn(lambda a: sum(
        (torch.linalg.matrix_power(a, k) for k in range(2, 7)), a)), meta(N, N))
    assert result.tensor_flops == 3 * PRODUCT


def test_a_power_squares_its_square() -> None:
    # a⁴ alone: s = a·a read twice, s·s, two products (as written ((a·a)·a)·a, three)
    result = analyze(Fn(lambda a: a @ a @ a @ a), meta(N, N))
    assert result.tensor_flops == 2 * PRODUCT


@pytest.mark.parametrize(("forward", "products"), [
    # s = a², t = s², a⁸ = t²: three products (repeated squaring; as written seven, and a
    # name over named products only: s·s·s·s took five)
    (lambda a: a @ a @ a @ a @ a @ a @ a @ a, 3),
    # a⁶ = (a³)² or s·s·s: three (it charged four: the a⁴ its chain holds was rewritten first,
    # and the next round read that a² through its einsum's batch-of-one view as another value)
    (lambda a: a @ a @ a @ a @ a @ a, 3),
    (lambda a: a @ a @ a @ a @ a @ a @ a, 4),  # a⁷: the addition chain 1, 2, 3, 6, 7 (l(7) = 4)
], ids=["a8", "a6", "a7"])
def test_a_power_takes_its_addition_chain(forward, products: int) -> None:
    result = analyze(Fn(forward), meta(N, N))
    assert result.tensor_flops == products * PRODUCT


def test_a_product_read_transposed_is_named_once() -> None:
    # a·b·c + cᵀ·bᵀ·d = a·s + sᵀ·d with s = b·c: three products (as written four; s and
    # (cᵀ·bᵀ) = sᵀ were two values, a view of one another's factors)
    result = analyze(Fn(lambda a, b, c, d: a @ b @ c + c.T @ b.T @ d),
                     *(meta(N, N) for _ in range(4)))
    assert result.tensor_flops == 3 * PRODUCT


def test_a_product_times_itself_transposed_is_one_triangle() -> None:
    # a·b·bᵀ·aᵀ = s·sᵀ, s = a·b: one product, then a symmetric one, of which a kernel computes
    # one triangle, N(N + 1)/2 outputs of 2N FLOPs (as written three products; the emitted
    # s·sᵀ reads a batch of one at two strides, which place no element)
    result = analyze(Fn(lambda a, b: a @ b @ b.T @ a.T), meta(N, N), meta(N, N))
    assert result.tensor_flops == PRODUCT + 2 * N * (N * (N + 1) // 2)


@pytest.mark.parametrize("forward", [
    lambda a, b, c, d: a @ b @ c + c.T @ b @ d,  # cᵀ·b is no (b·c)ᵀ = cᵀ·bᵀ
    lambda a, b, c, d: a @ b @ c + c @ b @ d,  # c·b is no b·c
    lambda a, b, c, d: a @ b @ c + c.T @ torch.relu(b).T @ d,  # relu(b) is not b
], ids=["one-transposed", "swapped", "relu"])
def test_another_product_read_transposed_names_nothing(forward) -> None:
    # no sub-product is held twice, no factor is common to both terms: four products
    result = analyze(Fn(forward), *(meta(N, N) for _ in range(4)))
    assert result.tensor_flops == 4 * PRODUCT


def _chains(*matrices: torch.Tensor) -> torch.Tensor:
    """Σᵢ xᵢ @ a4 @ a5 @ yᵢ over eight chains, each its own xᵢ and yᵢ."""
    lefts, rights, a4, a5 = matrices[:8], matrices[8:16], *matrices[16:]
    return functools.reduce(operator.add, (x @ a4 @ a5 @ y for x, y in
                                           zip(lefts, rights, strict=True)))


def test_chains_that_hold_one_product_compute_it_once() -> None:
    # eight chains xᵢ·a4·a5·yᵢ: no factor common to two terms is worth taking out (the rest
    # xᵢ·…·yᵢ does not split), so 3 products each, 24 as written. s = a4·a5 once, then
    # xᵢ·s·yᵢ two each: 1 + 16 = 17 (fewer is no product of each chain's own xᵢ and yᵢ)
    result = analyze(Fn(_chains), *(meta(N, N) for _ in range(18)))
    assert result.tensor_flops == 17 * PRODUCT


def _relu_between(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                  d: torch.Tensor) -> torch.Tensor:
    """a·b·c + a·relu(b)·d, relu(b) made after the first chain."""
    return a @ b @ c + a @ torch.relu(b) @ d


def test_another_value_between_names_nothing() -> None:
    # a·b·c + a·relu(b)·d: relu(b) is not b, so a·b is held by one term only; the fewest
    # products are a·(b·c + relu(b)·d), three (two would read relu(b) as b), as written four.
    # relu(b) is made between the chains' products: a value made there is no in-place change
    # (it charged four, the common a not taken out)
    result = analyze(Fn(_relu_between), *(meta(N, N) for _ in range(4)))
    assert result.tensor_flops == 3 * PRODUCT


def test_a_factor_made_between_the_terms_is_taken_out() -> None:
    # a·b + a·relu(e), relu(e) made after a·b: a·(b + relu(e)), one product (it charged two)
    result = analyze(Fn(lambda a, b, e: a @ b + a @ torch.relu(e)),
                     *(meta(N, N) for _ in range(3)))
    assert result.tensor_flops == PRODUCT


@pytest.mark.usefixtures("_always_fire")
@pytest.mark.parametrize("forward", [
    lambda a, b, e: a @ b + a @ torch.relu(e),
    lambda a, b, e: a @ b @ e + a @ torch.relu(b) @ e,
    lambda a, b, e: a @ b + a @ torch.relu(e) - a @ (b + torch.relu(e)),
], ids=["factor-out", "relu-of-an-operand", "cancels"])
def test_a_leaf_made_inside_the_segment_computes_the_value(forward) -> None:
    # relu(·) is made between the segment's ops: the replacement reads it, and it equals the
    # program on float64 (the relu's value run by the program's own op)
    model = Fn(forward)
    inputs = tuple(torch.randn(5, 5, dtype=torch.float64) for _ in range(3))
    found = _forced_replacements(model, inputs)
    assert found
    for _, replaced in found:
        assert torch.allclose(replaced, model(*inputs), atol=1e-9)


def _changed_between(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                     d: torch.Tensor) -> torch.Tensor:
    """a·b·c + a·(2b)·d, b doubled in place between the two chains."""
    first = a @ b @ c
    b.mul_(2)
    return first + a @ b @ d


def test_a_value_scaled_in_place_between_is_named_once() -> None:
    # b doubled in place between the chains (b = b'/2, b' what b holds at the end):
    # a·b·c + a·b'·d = (a·b')·(c/2 + d), two products (it charged three: b' was another value)
    result = analyze(Fn(_changed_between), *(meta(N, N) for _ in range(4)))
    assert result.tensor_flops == 2 * PRODUCT


def test_a_value_changed_in_place_between_names_nothing() -> None:
    # b + 1 is no scale of b: a·b and a·(b + 1) are other values, so a·b is not one product
    # of both; a·(b·c + b'·d) takes three, as written four (two would read them as one)
    def shifted(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                d: torch.Tensor) -> torch.Tensor:
        first = a @ b @ c
        b.add_(1)
        return first + a @ b @ d

    result = analyze(Fn(shifted), *(meta(N, N) for _ in range(4)))
    assert 3 * PRODUCT <= result.tensor_flops <= 4 * PRODUCT


#: a chain: the positions of its factors in the pool (square matrices, a power repeats one);
#: a position p ≥ 4 is matrix p − 4 read transposed
Chain = tuple[int, ...]


def _program(chains: list[Chain], coeffs: list[int]) -> Fn:
    def body(*pool: torch.Tensor) -> torch.Tensor:
        terms = [c * functools.reduce(operator.matmul, (pool[i] if i < 4 else pool[i - 4].T
                                                        for i in chain))
                 for chain, c in zip(chains, coeffs, strict=True)]
        return functools.reduce(operator.add, terms)

    return Fn(body)


_CHAINS = st.lists(st.lists(st.integers(0, 7), min_size=2, max_size=4).map(tuple),
                   min_size=2, max_size=4)


@pytest.mark.usefixtures("_always_fire")
@settings(max_examples=12, deadline=None)
@given(_CHAINS, st.lists(st.sampled_from([1, 2, -1]), min_size=4, max_size=4))
def test_a_named_sub_product_computes_the_value_and_never_costs_more(
    chains: list[Chain], coeffs: list[int]
) -> None:
    # sums of two to four chains over four square matrices and their transposes (powers,
    # repeated sub-chains, sub-chains read transposed):
    # every replacement (forced) equals the program on float64, and the bound is at most the
    # bound without the move
    model = _program(chains, coeffs[:len(chains)])
    inputs = tuple(torch.randn(5, 5, dtype=torch.float64) for _ in range(4))
    expected = model(*inputs)
    for _, replaced in _forced_replacements(model, inputs):
        assert torch.allclose(replaced, expected, atol=1e-9), chains
    with_move = analyze(model, *(meta(64, 64) for _ in range(4))).tensor_flops
    with mock.patch.object(factors, "_named", lambda *_: iter(())):
        without = analyze(model, *(meta(64, 64) for _ in range(4))).tensor_flops
    assert with_move <= without, chains


@pytest.mark.usefixtures("_always_fire")
@pytest.mark.parametrize("chains", [
    [(0, 0, 0, 0), (0, 0, 0), (0, 0)],  # s·(s + a) + s, s = a²
    [(0, 1, 0, 1), (0, 1)],  # s·s + s, s = ab
    [(0, 1), (2, 3), (0, 1, 2, 3)],  # s + t + s·t: two named products of other values
    [(0, 1, 2), (3, 1, 2), (1, 2, 0)],  # s = bc read at three places
], ids=["powers", "square-of-a-product", "two-products", "middle"])
def test_a_named_sub_product_computes_the_value(chains: list[Chain]) -> None:
    # the replacement (forced) equals the program on float64: each named product read where it
    # occurs (two products of one shape are not one value: ab + cd + abcd)
    model = _program(chains, [1, 2, -1][:len(chains)])
    inputs = tuple(torch.randn(5, 5, dtype=torch.float64) for _ in range(4))
    found = _forced_replacements(model, inputs)
    assert found
    for _, replaced in found:
        assert torch.allclose(replaced, model(*inputs), atol=1e-9)


# --- a value computed twice in two spellings (plan/algebra/shared.py: equal networks) --------

def _diagonal_both_sides(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """(a·diag(d))·b and a·(diag(d)·b): the scale on either side of the product."""
    return torch.softmax((a * d) @ b, -1) + torch.softmax(a @ (d[:, None] * b), -1)


@pytest.mark.parametrize(("forward", "products"), [
    # a·b·c and (a·c)·b, c a number: one product, the second softmax's input the first's
    # (value numbering then takes the softmax too); as written two
    (lambda a, b, d: torch.softmax(a @ b * 0.125, -1) + torch.softmax((a * 0.125) @ b, -1), 1),
    # a·b/2 and (a/4)·b: the second is half the first, one product and a scale
    (lambda a, b, d: torch.relu(a @ b * 0.5) + torch.relu((a * 0.25) @ b), 1),
    (_diagonal_both_sides, 1),
    # (a·b)·c and a·(b·c): one chain, two products (as written four)
    (lambda a, b, d: torch.relu(a @ b @ d) + torch.relu(a @ (b @ d)), 2),
    # a·b + a·d and a·(b + d): one sum of products, one product (as written three)
    (lambda a, b, d: torch.relu(a @ b + a @ d) + torch.relu(a @ (b + d)), 1),
    # an einsum and its (Bᵀ·Aᵀ)ᵀ, doubled: one product
    (lambda a, b, d: torch.relu(torch.einsum("ik,kj->ij", a, b) * 2) + torch.relu(
        (b.T @ a.T).T), 1),
], ids=["scalar", "ratio", "diagonal", "associated", "distributed", "einsum-transposed"])
def test_one_value_in_two_spellings_is_computed_once(forward, products: int) -> None:
    inputs = (meta(N, N), meta(N, N), meta(N) if forward is _diagonal_both_sides else meta(N, N))
    result = analyze(Fn(forward), *inputs)
    assert result.tensor_flops == products * PRODUCT


def _shifted_between(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    first = torch.relu(a @ b * 0.5)
    a.add_(1)  # the second product reads another a
    return first + torch.relu((a * 0.5) @ b)


def _twins_changed_between(change: Callable[[torch.Tensor, torch.Tensor], object]) -> Callable:
    """relu(a·b) + relu(a·b), ``change(a, d)`` made in place between the two products."""
    def forward(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        first = torch.relu(a @ b)
        change(a, d)
        return first + torch.relu(a @ b)

    return forward


#: two segments alike in spelling that compute other values: (the program, what it computes)
OTHER_VALUES = [
    pytest.param(lambda a, b, d: torch.relu(a @ b * 0.5) + torch.relu((a * 0.5) @ d),
                 id="other-operand"),
    # a nonlinearity inside one segment only: relu(a)·b is no a·b
    pytest.param(lambda a, b, d: torch.relu(a @ b) + torch.relu(torch.relu(a) @ b),
                 id="relu-between"),
    pytest.param(lambda a, b, d: torch.relu(a @ b) + torch.relu((a + 1) @ b), id="shifted"),
    pytest.param(_shifted_between, id="changed-in-place"),
    # an operand changed in place between two calls alike: a·b, then (a + 1)·b; a row of it;
    # all of it overwritten (a view of a read before the change reads the new value too)
    pytest.param(_twins_changed_between(lambda a, d: a.add_(1)), id="shifted-in-place"),
    pytest.param(_twins_changed_between(lambda a, d: a[0].add_(1)), id="row-shifted-in-place"),
    pytest.param(_twins_changed_between(lambda a, d: a.copy_(d)), id="overwritten"),
    # a scale by a full matrix is no diagonal: (a·b)∘d, (a∘d)·b and a·(b∘d) are three values
    pytest.param(lambda a, b, d: torch.relu(a @ b * d) + torch.relu((a * d) @ b),
                 id="elementwise-after"),
    pytest.param(lambda a, b, d: torch.relu(a @ (b * d)) + torch.relu((a * d) @ b),
                 id="elementwise-on-either-side"),
    # a permutation that is no symmetry: b·a is no (a·b)ᵀ = bᵀ·aᵀ, aᵀ·b no (a·bᵀ)ᵀ = b·aᵀ
    pytest.param(lambda a, b, d: torch.relu(a @ b) + torch.relu(b @ a), id="swapped"),
    pytest.param(lambda a, b, d: torch.relu(a @ b.T) + torch.relu(a.T @ b), id="transposed-one"),
    # a bias is another term: b + a·d is no a·d
    pytest.param(lambda a, b, d: torch.relu(torch.addmm(b[0], a, d)) + torch.relu(a @ d),
                 id="bias"),
]


@pytest.mark.parametrize("forward", OTHER_VALUES)
def test_other_values_in_like_spellings_are_not_one(forward) -> None:
    result = analyze(Fn(forward), *(meta(N, N) for _ in range(3)))
    assert result.tensor_flops == 2 * PRODUCT


def _numbered_equal(forward: Callable, *shapes: tuple[int, ...]) -> list[tuple[str, bool]]:
    """The ops value numbering (call by call, then over normal forms) finds equal to an earlier
    value, each with whether it is (the replacement's value against the program's, on float64
    data of ``shapes``, three 5×5 matrices unless given)."""
    model = Fn(forward)
    inputs = tuple(torch.randn(s, dtype=torch.float64) for s in shapes or [(5, 5)] * 3)
    trace = trace_model(model, tuple(x.clone() for x in inputs))
    values = _real_values(trace, model, tuple(x.clone() for x in inputs))
    graph = Graph.of(trace, known_values(trace.ops, trace.constants))
    found = []
    for match in common_values(graph) + equal_networks(graph):
        ours, theirs = trace.ops[match.root].writes[0], match.inputs[0]
        later = values[ours.value_id].as_strided(ours.shape, ours.strides, ours.offset)
        earlier = values[theirs.value_id].as_strided(theirs.shape, theirs.strides, theirs.offset)
        built = match.build(earlier) if match.build else earlier
        found.append((trace.ops[match.root].name, torch.allclose(built, later, atol=1e-9)))
    return found


@pytest.mark.parametrize("forward", OTHER_VALUES)
def test_other_values_are_never_numbered_equal(forward) -> None:
    # numbered as no earlier value: each keeps its own product (what the bound above charges)
    assert _numbered_equal(forward) == []


@pytest.mark.parametrize(("forward", "numbered"), [
    # a·b twice is one value whatever reads it (one call on one value); the softmaxes are
    # not: a column shift c[i, j] moves softmax(·, −1), so softmax(a·b + c) is another value
    (lambda a, b, c: torch.softmax(a @ b + c, -1) + torch.softmax(a @ b, -1),
     ["aten.mm.default"]),
    # a shift constant along the softmax's dim (c[i, 0] in every column) leaves it unchanged
    # (softmax(x + c) = softmax(x)): numbering it equal is sound, not doing so is not unsound;
    # the numbering sees only a·b
    (lambda a, b, c: torch.softmax(a @ b + c[:, :1], -1) + torch.softmax(a @ b, -1),
     ["aten.mm.default"]),
    # (a·aᵀ)ᵀ = a·aᵀ (a symmetry): the second value is the first, doubled
    (lambda a, b, c: torch.relu(a @ a.T) + torch.relu((a @ a.T).T * 2),
     ["aten.mm.default", "aten.mul.Tensor"]),
    # one call on one value laid out transposed (aᵀ·2 written in aᵀ's layout): one value
    (lambda a, b, c: torch.relu(a.T * 2) + torch.relu(a.T * 2),
     ["aten.mul.Tensor", "aten.relu.default"]),
], ids=["column-shift", "row-constant-shift", "symmetric", "transposed-layout"])
def test_only_equal_values_are_numbered_equal(forward, numbered: list[str]) -> None:
    found = _numbered_equal(forward)
    assert [name for name, _ in found] == numbered
    assert all(equal for _, equal in found)


def test_a_product_of_other_slices_at_the_same_strides_is_another_value() -> None:
    # bᵀ[:, :k']·aᵀ[:k'] read transposed and a[:, :k]·b[:k], k' ≠ k: their operands start and
    # step alike (the same offsets and strides), but the sums run over k' and k terms, so
    # 2·N²·(k' + k) FLOPs (it charged 2·N²·k': the call of one read as the other transposed)
    k, wider = N // 2, N // 2 + 64
    result = analyze(Fn(lambda a, b: torch.relu(b[:wider].T @ a[:, :wider].T) + torch.relu(
        a[:, :k] @ b[:k])), meta(N, N), meta(N, N))
    assert result.tensor_flops == 2 * N * N * (k + wider)


@pytest.mark.parametrize("forward", [
    lambda a, b, d: torch.relu(a @ b * 0.5) + torch.relu((a * 0.25) @ b),
    lambda a, b, d: torch.relu(a @ b @ d[:5] * 3) + torch.relu(-(a @ (b @ d[:5]))),
    lambda a, b, d: torch.relu((a * d[0]) @ b) + torch.relu(a @ (d[0][:, None] * b) / 2),
    # bᵀ·aᵀ = (a·b)ᵀ: the earlier value read transposed, a third of it
    lambda a, b, d: torch.relu(a @ b * 3) + torch.relu(b.T @ a.T).T,
    # a 1×1 convolution and its product over the channels of the image read channels-last:
    # the later value is the earlier one's elements permuted (a (1, 5, 5, 5) image)
    lambda a, b, d: torch.relu(F.conv2d(d.reshape(1, 5, 5, 5), a[:, :, None, None])) + torch.relu(
        (d.reshape(1, 5, 5, 5).permute(0, 2, 3, 1) @ a.T * 2).permute(0, 3, 1, 2)),
    # an einsum's (b, h) and a batched product's b·h: one value, read in the other's shape
    lambda a, b, d: torch.relu(torch.einsum("bhqd,bhkd->bhqk", d.reshape(5, 5, 5, 1), d.reshape(
        5, 5, 5, 1) * 3)) + torch.relu(d.reshape(5, 5, 5, 1) @ d.reshape(5, 5, 5, 1).transpose(
            -1, -2)),
], ids=["ratio", "negated-chain", "diagonal-halved", "transposed-third", "convolution-permuted",
        "batch-and-heads"])
def test_a_value_found_equal_is_its_twin_times_the_ratio(forward) -> None:
    # on float64 data: each later segment the value numbering over normal forms finds equals
    # the earlier one times the ratio it found (the replacement's value)
    found = _numbered_equal(forward, (5, 5), (5, 5), (25, 5))
    assert found
    assert all(equal for _, equal in found)


def _ref(value: int, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> (
    TensorRef
):
    return TensorRef(value, value, shape, "float64", math.prod(shape), True, 8, offset, strides,
                     20)


@pytest.mark.parametrize("written", [(5, 1), (1, 4)], ids=["contiguous", "transposed-layout"])
@pytest.mark.parametrize("earlier", [(5, 1), (1, 4)], ids=["contiguous", "transposed"])
def test_every_view_of_a_value_is_the_same_view_of_its_equal(written, earlier) -> None:
    # one 4×5 value laid out at two strides: each view of the later (whole, transposed, a row,
    # a column, a strided block) read through onto_equal from the earlier's storage holds the
    # same elements as read from the later's own
    value = torch.arange(20, dtype=torch.float64).reshape(4, 5)
    ours, theirs = _ref(1, (4, 5), written), _ref(2, (4, 5), earlier)
    storages = {ref.value_id: torch.empty_strided((4, 5), ref.strides, dtype=torch.float64).copy_(
        value).as_strided((20,), (1,)) for ref in (ours, theirs)}
    r, c = written
    views = [ours, _ref(1, (5, 4), (c, r)), _ref(1, (5,), (c,), 2 * r),
             _ref(1, (4,), (r,), 3 * c), _ref(1, (2, 3), (r, 2 * c), r)]
    for view in views:
        mapped = onto_equal(view, ours, theirs)
        assert mapped is not None and mapped.value_id == theirs.value_id
        assert torch.equal(
            storages[1].as_strided(view.shape, view.strides, view.offset),
            storages[2].as_strided(mapped.shape, mapped.strides, mapped.offset))
