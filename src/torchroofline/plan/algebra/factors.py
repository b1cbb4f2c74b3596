"""A common factor taken out of a sum of terms (distributivity): c₁·F·G₁ + c₂·F·G₂ =
c₁·F·(G₁ + (c₂/c₁)·G₂), exact over the reals.

A tensor network (:mod:`.network`) is a sum of terms, and :mod:`.contraction` contracts each
on its own; ``A @ B + A @ C`` is then two products where one is needed, ``A @ (B + C)``. Two
terms are one where they are the same product up to the names of their summed labels (each
product names its own contracted index) but for one factor in each, of the same shape and
labels: the two factors are added first (one add per element) and the term is contracted once.
Equal products (no factor differs: ``2·(A @ B) + A @ B``) are one term whose coefficients
add; where a difference of equal values cancels to nothing the identities name it (``x − x =
0``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .network import Factor, Labels, Network, Term

#: most labels of a factor whose orders are all tried against another's (a transposed read)
MAX_PERMUTED = 4


@dataclass(frozen=True)
class Difference:
    """The one pair of factors two terms do not share: positions in each term, and the order
    of the second's labels (row-major) that puts them in the first's."""

    first: int
    second: int
    order: tuple[int, ...]


#: a pairing of two terms: the pair of factors that differs (None: none), and the second
#: term's labels renamed to the first's
Pairing = tuple[Difference | None, dict[int, int]]


def _atoms(net: Network, factor: Factor) -> list[int]:
    return [a for group in factor.dims for a in net.atoms(group)]


def _extended(net: Network, pairs: Sequence[tuple[int, int]], names: dict[int, int],
              fixed: frozenset[int]) -> dict[int, int] | None:
    """``names`` (the second term's labels → the first's) extended by ``pairs`` (a label of
    the first, one of the second); None where they conflict (other sizes, an output label
    moved, two labels made one)."""
    names = dict(names)
    taken = set(names.values())
    for a, b in pairs:
        if net.sizes[a] != net.sizes[b] or (a in fixed or b in fixed) and a != b:
            return None
        if b in names:
            if names[b] != a:
                return None
        elif a in taken:
            return None
        else:
            names[b] = a
            taken.add(a)
    return names


def _renamed(net: Network, first: Factor, second: Factor, names: dict[int, int],
             fixed: frozenset[int]) -> tuple[dict[int, int], tuple[int, ...]] | None:
    """``names`` extended so that ``second``'s labels, in some order, are ``first``'s (in
    row-major order as read first, then every order of a factor of few labels), and that
    order."""
    atoms_a, atoms_b = _atoms(net, first), _atoms(net, second)
    if len(atoms_a) != len(atoms_b):
        return None
    identity = tuple(range(len(atoms_b)))
    orders = itertools.permutations(identity) if len(identity) <= MAX_PERMUTED else [identity]
    for order in orders:
        found = _extended(net, [(a, atoms_b[k]) for a, k in zip(atoms_a, order, strict=True)],
                          names, fixed)
        if found is not None:
            return found, order
    return None


def _storage_strides(net: Network, factor: Factor) -> dict[int, int] | None:
    """Each label of a factor read as it is (no ``make``) → its stride in the value's storage
    (a label a view split: each atom its own); None where a label repeats (a diagonal)."""
    if factor.make is not None or len(factor.refs) != 1:
        return None
    ref = factor.refs[0]
    strides: dict[int, int] = {}
    for group, stride in zip(factor.dims, ref.strides, strict=True):
        for atom in reversed(net.atoms(group)):
            if atom in strides:
                return None
            strides[atom] = stride
            stride *= net.sizes[atom]
    return strides


def _same_value(net: Network, first: Factor, second: Factor, names: dict[int, int],
                fixed: frozenset[int]) -> dict[int, int] | None:
    """``names`` extended so that ``second`` is ``first`` (the same elements of one value at
    each label, read through any view: a transpose, a reshape); None where it is not."""
    if first.refs == second.refs and first.make is second.make:
        atoms_a, atoms_b = _atoms(net, first), _atoms(net, second)
        return _extended(net, list(zip(atoms_a, atoms_b, strict=True)), names, fixed) if len(
            atoms_a) == len(atoms_b) else None
    a_strides, b_strides = _storage_strides(net, first), _storage_strides(net, second)
    if a_strides is None or b_strides is None or len(a_strides) != len(b_strides) or (
        (first.refs[0].value_id, first.refs[0].offset)
        != (second.refs[0].value_id, second.refs[0].offset)
    ):
        return None
    by_stride = {stride: atom for atom, stride in a_strides.items()}
    names = dict(names)
    taken = set(names.values())
    for b, stride in b_strides.items():
        a = by_stride.get(stride)
        if a is None or len(by_stride) != len(a_strides) or net.sizes[a] != net.sizes[b] or (
            (a in fixed or b in fixed) and a != b
        ) or names.get(b, a) != a or (b not in names and a in taken):
            return None
        names[b] = a
        taken.add(a)
    return names


def _addable(first: Factor, second: Factor) -> bool:
    """Whether the two factors' values can be added element by element once the second is
    reshaped to the first: as many elements, none broadcast (a dim without labels has size 1;
    a factor's value has its first value's shape: a value as read, its reciprocal, a
    per-channel scale, a sum made here)."""
    def whole(factor: Factor) -> bool:
        shape = factor.refs[0].shape
        return all(group or size == 1 for group, size in zip(factor.dims, shape, strict=True))

    return (whole(first) and whole(second)
            and math.prod(first.refs[0].shape) == math.prod(second.refs[0].shape))


def _pairing(net: Network, first: Term, second: Term, fixed: frozenset[int]) -> Pairing | None:
    """Each factor of ``second`` paired with one of ``first``, all the same value under one
    renaming of the summed labels but at most one pair (addable); None where none exists."""
    count = len(first.factors)
    if count != len(second.factors) or not count:
        return None

    def search(i: int, used: frozenset[int], names: dict[int, int],
               differs: Difference | None) -> Pairing | None:
        if i == count:
            return differs, names
        a = first.factors[i]
        for j in range(count):
            if j in used:
                continue
            b = second.factors[j]
            renamed = _same_value(net, a, b, names, fixed)
            if renamed is not None:
                found = search(i + 1, used | {j}, renamed, differs)
            elif differs is None and _addable(a, b) and (
                aligned := _renamed(net, a, b, names, fixed)
            ) is not None:
                found = search(i + 1, used | {j}, aligned[0], Difference(i, j, aligned[1]))
            else:
                continue
            if found is not None:
                return found
        return None

    return search(0, frozenset(), {}, None)


def _value(factor: Factor, values: Sequence[torch.Tensor]) -> torch.Tensor:
    return values[0] if factor.make is None else factor.make(*values)


def _added(net: Network, first: Factor, second: Factor, ratio: float,
           order: tuple[int, ...]) -> Factor:
    """The factor ``first + ratio · second`` (labels of ``first``; the second's value, as its
    labels, put in their ``order``)."""
    split = len(first.refs)
    sizes = [net.sizes[b] for b in _atoms(net, second)]
    shape = first.refs[0].shape

    def make(*values: torch.Tensor) -> torch.Tensor:
        a, b = _value(first, values[:split]), _value(second, values[split:])
        b = b.reshape(sizes).permute(order).reshape(shape)
        return a + b if ratio == 1 else a - b if ratio == -1 else a + ratio * b

    return Factor(first.refs + second.refs, first.dims, make)


def _joined(net: Network, first: Term, second: Term, fixed: frozenset[int]) -> tuple[
    Term, int
] | None:
    """The one term ``first + second`` where they share every factor but one (the two added
    first) or all of them (the coefficients added), and the FLOPs of that add."""
    pairing = _pairing(net, first, second, fixed)
    if pairing is None or not first.coeff:
        return None
    differs = pairing[0]
    if differs is None:
        return Term(first.coeff + second.coeff, first.factors), 0
    i = differs.first
    factors = list(first.factors)
    ratio = second.coeff / first.coeff
    factors[i] = _added(net, first.factors[i], second.factors[differs.second], ratio,
                        differs.order)
    # an add per element, and a multiply where the ratio is no sign
    writes = math.prod(first.factors[i].refs[0].shape) * (1 if abs(ratio) == 1 else 2)
    return Term(first.coeff, tuple(factors)), writes


def factored_terms(net: Network, terms: Sequence[Term], output: Labels) -> tuple[list[Term], int]:
    """``terms`` with every pair that shares all factors but one made one term (the two
    differing factors added first) and equal products made one (their coefficients added; a
    term whose coefficients cancel dropped), repeated until no pair joins; and the elements
    the factors' adds cost (FLOPs)."""
    fixed = frozenset(output)
    out = list(terms)
    added = 0
    joined = True
    while joined:
        joined = False
        for x, y in itertools.combinations(range(len(out)), 2):
            found = _joined(net, out[x], out[y], fixed)
            if found is not None:
                out[x], writes = found
                added += writes
                del out[y]
                joined = True
                break
    return [term for term in out if term.coeff], added
