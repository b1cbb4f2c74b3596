"""A bilinear sum Σᵢⱼ Cᵢⱼ·Lᵢ @ Rⱼ takes as many products as C has rank (plan/algebra/factors.py:
the terms read as one coefficient matrix over their distinct left and right factors, factored
exactly over fractions). Writing C = Σₖ uₖ·vₖᵀ gives Σₖ (Σᵢ uₖᵢ·Lᵢ) @ (Σⱼ vₖⱼ·Rⱼ); no fewer
products of sums of the L's and R's exist, since r such products are a rank-r factoring of C
(the Lᵢ and Rⱼ are independent generic matrices).

Groupings of terms (a common factor taken out) reach the rank only where C's rows or columns
are copies of few; the generated programs here draw C at random, so most need the rank. Terms
with a common middle, Σᵢⱼ Cᵢⱼ·Lᵢ @ M @ Rⱼ, are read the same way (M taken out of the matrix):
rank(C) chains of two products.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_tensor_network import _always_fire, _forced_replacements  # noqa: F401 (a fixture)

from conftest import Fn, analyze, meta
from oracle import oracle

FP32 = 4
#: left factors (P, Q) and right factors (Q, S) a generated sum draws from
LEFTS, RIGHTS = "ADG", "BCE"
#: meta sizes where one product is compute-bound on an H100 (2·P·Q·S = 2.7e11 FLOPs, 0.56 ms
#: of TF32, against 6 × 64 MiB of inputs and the 64 MiB output, 0.14 ms of HBM3)
P, Q, S = 4096, 4096, 4096

Matrix = tuple[tuple[int, ...], ...]


@st.composite
def _coefficients(draw: st.DrawFn) -> Matrix:
    """C over LEFTS × RIGHTS: Σₖ uₖ·vₖᵀ of one to three pairs of vectors in {−1, 0, 1}³ (a
    rank of at most their count: mostly below its distinct rows and columns), 2 to 8 nonzero
    (a network holds at most 8 terms)."""
    vector = st.tuples(*[st.sampled_from([-1, 0, 1])] * 3)
    pairs = draw(st.lists(st.tuples(vector, vector), min_size=1, max_size=3))
    matrix = tuple(tuple(sum(u[i] * v[j] for u, v in pairs) for j in range(3))
                   for i in range(3))
    assume(2 <= sum(c != 0 for row in matrix for c in row) <= 8)
    return matrix


def _program(matrix: Matrix, transposed: bool, middle: bool = False) -> tuple[Fn, list[str]]:
    """Σᵢⱼ Cᵢⱼ·Lᵢ @ Rⱼ written term by term (Lᵢ @ M @ Rⱼ where ``middle``, each product
    ``(Rⱼᵀ @ Lᵢᵀ)ᵀ`` where ``transposed``), and the names of the matrices it reads, in order."""
    cells = [(c, LEFTS[i], RIGHTS[j]) for i, row in enumerate(matrix) for j, c in enumerate(row)
             if c]
    names = sorted({n for _, left, right in cells for n in (left, right)} | (
        {"M"} if middle else set()))

    def body(*matrices: torch.Tensor) -> torch.Tensor:
        held = dict(zip(names, matrices, strict=True))
        total = None
        for c, left, right in cells:
            chain = [held[left], held["M"], held[right]] if middle else [
                held[left], held[right]]
            product = functools.reduce(operator.matmul, [m.T for m in reversed(chain)]).T if (
                transposed) else functools.reduce(operator.matmul, chain)
            term = product if c == 1 else -product if c == -1 else c * product  # c in −3..3
            total = term if total is None else total + term
        return total

    return Fn(body), names


def _shape(name: str, p: int, q: int, s: int) -> tuple[int, int]:
    return (p, q) if name in LEFTS else (q, q) if name == "M" else (q, s)


def _rank(matrix: Matrix) -> int:
    return int(torch.linalg.matrix_rank(torch.tensor(matrix, dtype=torch.float64)))


@settings(max_examples=25, deadline=None)
@given(_coefficients(), st.booleans())
def test_a_bilinear_sum_takes_as_many_products_as_its_coefficients_rank(
    matrix: Matrix, transposed: bool
) -> None:
    model, names = _program(matrix, transposed)
    shapes = [_shape(n, P, Q, S) for n in names]
    result = analyze(model, *(meta(*shape) for shape in shapes))
    # rank(C) products of 2·P·Q·S: fewer is no factoring of C, more is a product too many
    assert result.tensor_flops == _rank(matrix) * 2 * P * Q * S, (matrix, transposed)
    # every input read once, the output written once (each one changes the output)
    assert result.compulsory_bytes == FP32 * (sum(math.prod(s) for s in shapes) + P * S)


@settings(max_examples=12, deadline=None)
@given(_coefficients(), st.booleans())
def test_a_bilinear_sum_with_a_common_middle_takes_two_products_per_rank(
    matrix: Matrix, transposed: bool
) -> None:
    # Σᵢⱼ Cᵢⱼ·Lᵢ·M·Rⱼ = Σₖ (Σᵢ uₖᵢ·Lᵢ)·M·(Σⱼ vₖⱼ·Rⱼ): rank(C) chains of two products (the
    # hand minimum, square matrices: P = Q = S). As written, L·M is shared by value numbering
    # and each term costs one more: distinct lefts + nonzeros ≥ 2·rank
    model, names = _program(matrix, transposed, middle=True)
    result = analyze(model, *(meta(*_shape(n, P, Q, S)) for n in names))
    assert result.tensor_flops <= 2 * _rank(matrix) * 2 * P * Q * S, (matrix, transposed)


@pytest.mark.usefixtures("_always_fire")
@settings(max_examples=8, deadline=None)
@given(_coefficients(), st.booleans(), st.booleans())
def test_a_bilinear_sum_factored_computes_its_value(matrix: Matrix, transposed: bool,
                                                    middle: bool) -> None:
    # the replacement (forced: whatever the gain; there is one where the rank is below the
    # terms) equals the program's output on float64, and the bound reads at least what the
    # dependence oracle proves needed
    model, names = _program(matrix, transposed, middle)
    inputs = tuple(torch.randn(_shape(n, 3, 4, 5), dtype=torch.float64) for n in names)
    expected = model(*inputs)
    found = _forced_replacements(model, inputs)
    assert found or _rank(matrix) == sum(c != 0 for row in matrix for c in row)
    for _, replaced in found:
        assert torch.allclose(replaced, expected, atol=1e-9), (matrix, transposed, middle)
    proven = oracle(model, inputs)
    assert analyze(model, *(x.float() for x in inputs)).compulsory_bytes >= proven.bytes(FP32)


# (name, body over A, D, G (P, Q) and B, C, E (Q, S), products needed)
RANKED: list[tuple[str, Callable, int]] = [
    # AB + AE + DC + DE + GB + GC + 2·GE = (A + G)(B + E) + (D + G)(C + E): C = [[1, 0, 1],
    # [0, 1, 1], [1, 1, 2]], row 3 = row 1 + row 2, rank 2; its three rows and three columns
    # are distinct, so no common factor of terms reaches it (the groupings found 3)
    ("rank-2-of-7", lambda a, d, g, b, c, e: a @ b + a @ e + d @ c + d @ e + g @ b + g @ c
     + 2 * (g @ e), 2),
    # AB + AC + DC + DE + GB − GE = (A + G)(B + C) + (D − G)(C + E): C = [[1, 1, 0],
    # [0, 1, 1], [1, 0, −1]], row 3 = row 1 − row 2, rank 2; rows and columns distinct
    ("rank-2-of-6", lambda a, d, g, b, c, e: a @ b + a @ c + d @ c + d @ e + g @ b - g @ e, 2),
    # the same, every term scaled by 1/√32 (no fraction of a small denominator: C is read
    # relative to the first term's coefficient)
    ("rank-2-scaled", lambda a, d, g, b, c, e: (a @ b + a @ c + d @ c + d @ e + g @ b - g @ e)
     / math.sqrt(32), 2),
    # the rank-2-of-7 sum with a common middle M: L·M is shared as written (3 products), then
    # a product per term grouped by its left: L·M·(Σⱼ Cᵢⱼ Rⱼ), 6 products; (A + G)·M·(B + E)
    # + (D + G)·M·(C + E) takes 4
    ("rank-2-middle", lambda a, d, g, b, c, e, m: a @ m @ b + a @ m @ e + d @ m @ c
     + d @ m @ e + g @ m @ b + g @ m @ c + 2 * (g @ m @ e), 4),
]


@pytest.mark.parametrize(("body", "needed"), [r[1:] for r in RANKED],
                         ids=[r[0] for r in RANKED])
def test_a_bilinear_sum_of_low_rank(body: Callable, needed: int) -> None:
    shapes = [(P, Q)] * 3 + [(Q, S)] * 3 + [(Q, Q)] * (body.__code__.co_argcount - 6)
    result = analyze(Fn(body), *(meta(*shape) for shape in shapes))
    assert result.tensor_flops == needed * 2 * P * Q * S
    assert result.rewrites[-1].rule == "common factor taken out"
    assert result.time_ms["sol"] < result.time_ms["sol_as_written"]


def test_a_bilinear_sum_of_full_rank_keeps_its_products() -> None:
    # AB + DC + GE: C the identity, rank 3: three products, nothing taken out
    model = Fn(lambda a, d, g, b, c, e: a @ b + d @ c + g @ e)
    result = analyze(model, *(meta(*shape) for shape in [(P, Q)] * 3 + [(Q, S)] * 3))
    assert result.tensor_flops == 3 * 2 * P * Q * S
    assert not result.rewrites


def test_a_product_scaled_by_an_irrational_number_is_one_product() -> None:
    # level3/31_VisionAttention: q / √32 @ kᵀ, one term whose coefficient is no small fraction,
    # made no coefficient matrix and the search failed (IndexError); 2·B·P·Q·S
    model = Fn(lambda q, k: torch.bmm(q / math.sqrt(32), k.transpose(1, 2)))
    result = analyze(model, meta(4, P, Q), meta(4, S, Q))
    assert result.tensor_flops == 4 * 2 * P * Q * S


def _first_two_share(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                     *rest: torch.Tensor) -> torch.Tensor:
    """a @ b + a @ c + x₁ @ y₁ + …, added left to right."""
    total = a @ b + a @ c
    for x, y in zip(rest[::2], rest[1::2], strict=True):
        total = total + x @ y
    return total


@pytest.mark.parametrize("others", [3, 7])
def test_a_chain_of_adds_too_long_for_a_network_keeps_its_first_grouping(others: int) -> None:
    # an add that is a term of a longer sum is left to the add that reads it, but only where
    # that add makes a network (at most 8 terms): with 2 + 7 terms it does not, and a @ (b + c)
    # is taken by the first add (it was lost: 9 products). 1 + others products of 2·P·Q·S
    result = analyze(Fn(_first_two_share), *(meta(P, Q) for _ in range(3 + 2 * others)))
    assert result.tensor_flops == (1 + others) * 2 * P * Q * S
