"""A generated contraction program and a respelling of it, equal over the reals, made by
rewrites drawn at random (plan/algebra: the bound charges the cheapest equal program, found by
a search over a normal form, so no rewrite of the algebra needs a rule of its own):
(a·b)ᵀ = bᵀ·aᵀ, a number or a diagonal moved across a product, (a·b)·c = a·(b·c),
a·b + a·c = a·(b + c), einsum or a batch of one for matmul, and a product split into blocks of
rows, concatenated. tests/plan/test_algebra_spellings.py checks fixed families of spellings
against hand minima; here the spellings are drawn, each rewrite composed with the others.

For each: the respelling computes the program's value (float64, small sizes: the test's own
check of its rewrites), the bound never charges more than the spelling as written, and both
spellings get one bound (within the gain a rewrite needs to fire). And the program beside its
respelling (or beside another value: a number changed), every value the value numbering finds
equal to an earlier one is it.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_algebra_shared import _numbered_equal

from conftest import Fn, analyze, meta
from torchroofline.plan.algebra.contraction import MIN_GAIN


@dataclass(frozen=True)
class Term:
    """coeff · Π pool[i] over ``factors`` (positions in the pool), d (the pool's vector)
    scaling the columns of the first factor where ``diagonal``."""

    coeff: float
    factors: tuple[int, ...]
    diagonal: bool


@dataclass(frozen=True)
class Spelling:
    """How a term is written: ``right`` its chain grouped from the right, ``transposed`` as
    (… bᵀ·aᵀ)ᵀ, ``coeff_on`` the factor its number scales (None: the product), ``diagonal_on``
    the side of the first product the diagonal scales (0: the first factor's columns, 1: the
    second's rows), ``product`` the call of each product, ``blocks`` the outermost product
    split into two blocks of rows."""

    right: bool = False
    transposed: bool = False
    coeff_on: int | None = None
    diagonal_on: int = 0
    product: str = "matmul"
    blocks: bool = False


AS_WRITTEN = Spelling()

#: the pool: two sets of matrices, set s's n-th (sizes[n], sizes[n + 1]) at s·CHAIN + n, so
#: that a chain of n factors of one set from its first has matching inner dims and ends in
#: sizes[n]; last, the vector d of sizes[1] elements
CHAIN = 3
PRODUCTS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "matmul": operator.matmul,
    "einsum": functools.partial(torch.einsum, "ik,kj->ij"),
    "bmm": lambda x, y: torch.bmm(x[None], y[None])[0],
}


def _chain(matrices: list[torch.Tensor], spelling: Spelling) -> torch.Tensor:
    product = PRODUCTS[spelling.product]
    if spelling.transposed:  # (x₁·…·xₙ)ᵀ = xₙᵀ·…·x₁ᵀ, grouped the other way round
        flipped = replace(spelling, transposed=False, right=not spelling.right)
        return _chain([m.T for m in matrices[::-1]], flipped).T
    if spelling.blocks:  # [x₁[:h]; x₁[h:]]·y = [x₁[:h]·y; x₁[h:]·y]
        whole = replace(spelling, blocks=False)
        half = matrices[0].shape[0] // 2
        return torch.cat([_chain([matrices[0][:half], *matrices[1:]], whole),
                          _chain([matrices[0][half:], *matrices[1:]], whole)])
    if spelling.right:
        return functools.reduce(lambda acc, m: product(m, acc), matrices[-2::-1], matrices[-1])
    return functools.reduce(product, matrices[1:], matrices[0])


def _term(pool: tuple[torch.Tensor, ...], term: Term, spelling: Spelling) -> torch.Tensor:
    matrices = [pool[i] for i in term.factors]
    if term.diagonal:  # (x·D)·y = x·(D·y), D = diag(d)
        d = pool[-1]
        side = spelling.diagonal_on
        matrices[side] = matrices[side] * (d if side == 0 else d[:, None])
    scaled = spelling.coeff_on is not None
    if scaled:  # c·(x·y) = (c·x)·y = x·(c·y)
        matrices[spelling.coeff_on] = matrices[spelling.coeff_on] * term.coeff
    value = _chain(matrices, spelling)
    return value if scaled else value * term.coeff


@dataclass(frozen=True)
class Program:
    """Σ terms, each spelled its own way; ``distributed``: the two terms' common first factor
    taken out, x·y + x·z = x·(y + z) (their numbers and diagonals inside)."""

    terms: tuple[Term, ...]
    spellings: tuple[Spelling, ...]
    distributed: bool = False

    def __call__(self, *pool: torch.Tensor) -> torch.Tensor:
        if self.distributed:
            rests = [self._rest(pool, term) for term in self.terms]
            return PRODUCTS[self.spellings[0].product](pool[0], rests[0] + rests[1])
        return functools.reduce(operator.add, (
            _term(pool, term, spelling)
            for term, spelling in zip(self.terms, self.spellings, strict=True)))

    @staticmethod
    def _rest(pool: tuple[torch.Tensor, ...], term: Term) -> torch.Tensor:
        """What multiplies the term's first factor: c·D·y·…"""
        rest = functools.reduce(operator.matmul, (pool[i] for i in term.factors[2:]),
                                pool[term.factors[1]])
        return term.coeff * (rest * pool[-1][:, None] if term.diagonal else rest)


_SPELLINGS = st.builds(Spelling, st.booleans(), st.booleans(), st.sampled_from([None, 0, 1]),
                       st.sampled_from([0, 1]), st.sampled_from(sorted(PRODUCTS)), st.booleans())


@st.composite
def _programs(draw: st.DrawFn) -> tuple[Program, Program, tuple[int, ...]]:
    """(the program as written, a respelling, the pool's sizes): one or two terms, chains of
    two or three factors, the first the pool's first matrix (common to both terms), the
    others of the term's own set."""
    sizes = tuple(draw(st.sampled_from([64, 512, 2048])) for _ in range(CHAIN + 1))
    length = draw(st.integers(2, CHAIN))
    terms = tuple(Term(draw(st.sampled_from([1.0, 2.0, -0.5])),
                       (0, *range(s * CHAIN + 1, s * CHAIN + length)), draw(st.booleans()))
                  for s in range(draw(st.integers(1, 2))))
    spellings = tuple(draw(_SPELLINGS) for _ in terms)
    distributed = len(terms) == 2 and draw(st.booleans())
    written = Program(terms, tuple(AS_WRITTEN for _ in terms))
    return written, Program(terms, spellings, distributed), sizes


def _pool(sizes: tuple[int, ...], make: Callable[..., torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return (*(make(sizes[n], sizes[n + 1]) for _ in range(2) for n in range(CHAIN)),
            make(sizes[1]))


def _bounds(written: Program, respelled: Program, sizes: tuple[int, ...]) -> list[float]:
    """Each spelling's speed of light (ms), checked never above the spelling as written."""
    sols = []
    for program in (written, respelled):
        result = analyze(Fn(program), *_pool(sizes, meta))
        # the spelling itself is one of the equal programs: never more than it
        assert result.tensor_flops <= result.eager_cost.tensor_flops, program
        assert not result.rewrites or result.time_ms["sol"] <= result.time_ms["sol_as_written"]
        sols.append(result.time_ms["sol"])
    return sols


@settings(max_examples=6, deadline=None)
@given(_programs())
def test_a_respelled_program_has_the_programs_bound(program: tuple) -> None:
    written, respelled, sizes = program
    # the rewrites are equal over the reals: on float64 data at small sizes (2 to 4 a dim)
    small = tuple(2 + n % 3 for n in range(len(sizes)))
    data = _pool(small, lambda *shape: torch.randn(shape, dtype=torch.float64))
    assert torch.allclose(respelled(*data), written(*data), atol=1e-9)
    sols = _bounds(written, respelled, sizes)
    if any(spelling.blocks for spelling in respelled.spellings):
        # blocks of rows concatenated: a cat is no step of the normal form, so what the blocks
        # share is not seen (test_blocks_of_rows_have_the_programs_bound); never below the
        # program's bound, though (each block is its rows of the same algebra)
        assert sols[1] >= sols[0] * (1 - MIN_GAIN), (respelled, sizes, sols)
        return
    # one bound for both (a rewrite fires at a gain of MIN_GAIN, so within that)
    assert max(sols) <= min(sols) / (1 - MIN_GAIN), (respelled, sizes, sols)


@pytest.mark.xfail(strict=True, reason="a cat of row blocks is no step of the normal form: "
                   "the search sees each block alone, not the sub-product they share")
@pytest.mark.parametrize(("terms", "spelling", "sizes"), [
    # x·y·z + x·u·v in two blocks of x's rows: x·(y·z + u·v) takes three products of 64³,
    # the blocks four (each block's terms share only its own rows of x)
    ((Term(1.0, (0, 1, 2), False), Term(1.0, (0, 4, 5), False)), Spelling(blocks=True),
     (64, 64, 64, 64)),
    # ((zᵀ[:h]·yᵀ)·xᵀ) per block h: the blocks share yᵀ·xᵀ (x·y: 2·64·512·64 once, then
    # 2·64·64·64), each block alone takes it at its own rows (2·2·32·64·512 a block)
    ((Term(1.0, (0, 1, 2), False),), Spelling(right=True, transposed=True, blocks=True),
     (64, 512, 64, 64)),
], ids=["common-factor", "transposed-chain"])
def test_blocks_of_rows_have_the_programs_bound(terms: tuple, spelling: Spelling,
                                                sizes: tuple[int, ...]) -> None:
    written = Program(terms, tuple(AS_WRITTEN for _ in terms))
    sols = _bounds(written, Program(terms, tuple(spelling for _ in terms)), sizes)
    assert max(sols) <= min(sols) / (1 - MIN_GAIN)


@pytest.mark.parametrize(("spelling", "sizes", "products"), [
    # x·D·y·z, x 64×512, y 512×64, z 64×64, written ((zᵀ[:h]·(yᵀ·(x·D)ᵀ)) a block, h = 32:
    # the blocks share s = yᵀ·(x·D)ᵀ (one value: the same call twice), 2·64·512·64 once,
    # then 2·32·64·64 a block: 2·64·512·64 + 2·64³ as x·D·y·z (it charged 2·2·32·64·512
    # twice: each block contracted through s, as if the other no longer read it)
    (Spelling(transposed=True, product="bmm", blocks=True), (64, 512, 64, 64),
     [(64, 512, 64), (64, 64, 64)]),
    # x 64×64, y 64×512, z 512×2048, written ((zᵀ[:h]·(D·y)ᵀ)·xᵀ) a block, h = 1024: each
    # block's cheapest order reads (D·y)ᵀ·xᵀ, the same call in both (a value laid out
    # transposed, numbered one: it was two), 2·64·512·64 once, then 2·1024·512·64 a block
    (Spelling(right=True, transposed=True, diagonal_on=1, blocks=True), (64, 64, 512, 2048),
     [(64, 64, 512), (64, 512, 2048)]),
], ids=["one-shared-product", "one-inserted-product"])
def test_blocks_of_one_product_compute_their_common_part_once(
    spelling: Spelling, sizes: tuple[int, ...], products: list[tuple[int, int, int]]
) -> None:
    term = (Term(1.0, (0, 1, 2), True),)
    result = analyze(Fn(Program(term, (spelling,))), *_pool(sizes, meta))
    assert result.tensor_flops == sum(2 * m * k * n for m, k, n in products)


@settings(max_examples=6, deadline=None)
@given(_programs(), st.booleans())
def test_value_numbering_of_two_spellings_is_exact(program: tuple, changed: bool) -> None:
    # relu(program) + relu(respelling), the respelling's first number tripled where changed
    # (another value): every value the numbering finds equal to an earlier one is it (times
    # the ratio it found), on float64 data at small sizes
    written, respelled, _ = program
    if changed:
        first = replace(respelled.terms[0], coeff=3 * respelled.terms[0].coeff)
        respelled = replace(respelled, terms=(first, *respelled.terms[1:]))
    small = tuple(2 + n % 3 for n in range(CHAIN + 1))
    shapes = [tuple(x.shape) for x in _pool(small, meta)]
    found = _numbered_equal(lambda *pool: torch.relu(written(*pool)) + torch.relu(
        respelled(*pool)), *shapes)
    assert all(equal for _, equal in found), found
