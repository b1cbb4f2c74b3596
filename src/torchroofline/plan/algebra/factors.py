"""Common factors taken out of a sum of terms (distributivity), found by a search over the
normal form: Σₜ cₜ·P·Rₜ = P·(Σₜ cₜ·Rₜ), exact over the reals.

A tensor network (:mod:`.network`) is a sum of terms, each a coefficient times a product of
factors summed over the labels no output dim names, and :mod:`.contraction` contracts each term
on its own: ``A @ B @ C + A @ D`` is then three products where two are needed,
``A @ (B @ C + D)``. A *grouping* takes two or more terms and a part P of the first one's
factors that every other one holds too: the same values at each label under a renaming of its
summed labels (each product names its own contracted index), a value read through any view
(:func:`_same_value`). The terms become one, P times a factor that is the sum of what is left
of each (:class:`.network.Sum`, over the labels it shares with P or the output; a term's other
labels are summed inside it). Where nothing is left of any of them the coefficients add
(2·AB + 3·AB = 5·AB). A sum is itself a network, searched the same way, and a factor like any
other: the same sum in two terms is a common factor of theirs, so groupings compose,
AB + AC + DB + DC → A(B + C) + D(B + C) → (A + D)(B + C), one product where four were written.
A common left part of chains (a prefix), a right part (a suffix) and any other shared
sub-product are all groupings; terms with no factor in common but a broadcast output
(two biases) are grouped with nothing taken out, so that they are added at their own size.
A bilinear sum Σᵢⱼ Cᵢⱼ·Lᵢ·M·Rⱼ (any common middle M, or none) is also written as rank(C)
products of sums (:func:`_ranked`), which groupings reach only where C's rows or columns are
copies of few. A product two terms hold (or one term twice) is named once (:func:`_named`): a
sum of one term that the plan computes and charges once however often it is read.

Taking a factor out is not always cheaper: A·B·C + A·D with a thin A costs less as
(A·B)·C + A·D than as A·(B·C + D), which multiplies B·C out. So every set of terms the search
reaches is weighed by the contraction's own cost (``weigh``, passed in by
:mod:`.contraction`), and the cheapest is kept, the terms as written among them: every
sequence of groupings where there are at most :data:`EXHAUSTIVE_TERMS` terms, beyond that the
:data:`BEAM` groupings of two terms (or of every term that shares their part) that cost least,
step by step.
A rule rewrites, it never prices: the rewritten program is priced as any other.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from .network import Factor, Labels, Network, Sum, Term

#: most terms whose every sequence of groupings is weighed (then greedy, a grouping at a time)
EXHAUSTIVE_TERMS = 4
#: beyond :data:`EXHAUSTIVE_TERMS`, how many of the cheapest single moves the search goes on
#: from: the cheapest alone names a² and nests the rest (Horner), a + a² + … + a⁷ in 5 products;
#: the second names a⁴ = a²·a² and a³ = a²·a, then a⁴·(a + a² + a³): 4
BEAM = 2
#: most sets of terms the search weighs for one network (then it keeps the best found)
MAX_WEIGHED = 400
#: coefficients whose ratio is within this are one (a sum read twice, once scaled by 1/3)
RATIO_TOLERANCE = 1e-12
#: the largest denominator a coefficient is read as a fraction with, for the exact rank of a
#: bilinear sum's coefficients (1/3 is 1/3; a coefficient no such fraction gives is left alone)
RANK_DENOMINATOR = 10**6
#: most renamings of a term's summed labels tried onto another's (labels of one size and role)
MAX_RENAMINGS = 24
#: most factors of a term read as a bilinear one (two in the roles, the rest its middle: each
#: order of a member's factors is tried, n! of them)
MOST_RANKED_FACTORS = 4
#: most factors of a term whose sub-products are tried as one named value (2ⁿ subsets, the
#: connected ones weighed: a chain's runs); a term's most (:data:`.network.MAX_FACTORS`)
MOST_NAMED_FACTORS = 8

Item = Factor | Sum
#: (compute seconds, seconds) of a set of terms, or None where it cannot be run
Weigh = Callable[[Sequence[Term], Labels], tuple[float, float] | None]


def atoms(net: Network, factor: Item) -> Labels:
    """The labels ``factor`` carries, one atom each."""
    if isinstance(factor, Sum):
        return factor.labels
    return net.dims_atoms(factor.dims)


def _term_labels(net: Network, term: Term) -> set[int]:
    return {a for f in term.factors for a in atoms(net, f)}


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
        atoms_a, atoms_b = atoms(net, first), atoms(net, second)
        return _extended(net, list(zip(atoms_a, atoms_b, strict=True)), names, fixed) if len(
            atoms_a) == len(atoms_b) else None
    a_strides, b_strides = _storage_strides(net, first), _storage_strides(net, second)
    if a_strides is None or b_strides is None or len(a_strides) != len(b_strides) or (
        (first.refs[0].value_id, first.refs[0].offset)
        != (second.refs[0].value_id, second.refs[0].offset)
    ):
        return None
    by_stride = {stride: atom for atom, stride in a_strides.items()}
    if len(by_stride) != len(a_strides):
        return None
    pairs = []
    for b, stride in b_strides.items():
        if stride not in by_stride:
            return None
        pairs.append((by_stride[stride], b))
    return _extended(net, pairs, names, fixed)


def _same_sum(net: Network, first: Sum, second: Sum, names: dict[int, int],
              fixed: frozenset[int]) -> tuple[dict[int, int], float] | None:
    """``names`` extended so that ``second`` is r·``first`` (each term of one a term of the
    other, the same product, their coefficients in one ratio r), and r. A label a term sums
    inside the sum is renamed for that term alone; a label of the sum's to one of the other's."""
    if len(first.terms) != len(second.terms) or len(first.labels) != len(second.labels):
        return None
    return _terms_matched(net, first, second, fixed, 0, frozenset(), names, None)


def _terms_matched(net: Network, first: Sum, second: Sum, fixed: frozenset[int], i: int,
                   used: frozenset[int], names: dict[int, int],
                   ratio: float | None) -> tuple[dict[int, int], float] | None:
    """:func:`_same_sum` from ``first``'s term ``i`` on, ``second``'s terms ``used`` taken. A
    function of the module, not a closure of ``_same_sum``'s: a closure that calls itself is a
    reference cycle, garbage only the cyclic collector frees (thousands per analysis, and the
    full collections they bring)."""
    outer, inner = set(first.labels), set(second.labels)
    if i == len(first.terms):
        return (names, ratio or 1.0) if all(names.get(b) in outer for b in inner) else None
    a = first.terms[i]
    for j, b in enumerate(second.terms):
        # a label summed inside the term is no label of the sum's term outside it
        found = None if j in used or not a.coeff or (
            _term_labels(net, b) - inner
        ) & set(names) else _embedded(net, a.factors, b.factors, names, fixed)
        if found is None or len(b.factors) != len(a.factors):
            continue
        _, renamed, factor_ratio = found
        # a label inside one sum is inside the other, a label of the sum's one of the other's
        if any((k in inner) != (v in outer) for k, v in renamed.items() if k not in names):
            continue
        term_ratio = b.coeff * factor_ratio / a.coeff
        if ratio is not None and not math.isclose(term_ratio, ratio, rel_tol=RATIO_TOLERANCE):
            continue
        kept = {k: v for k, v in renamed.items() if k in names or k in inner}
        found_all = _terms_matched(net, first, second, fixed, i + 1, used | {j}, kept,
                                   term_ratio)
        if found_all is not None:
            return found_all
    return None


def _matched(net: Network, first: Item, second: Item, names: dict[int, int],
             fixed: frozenset[int]) -> tuple[dict[int, int], float] | None:
    """``names`` extended so that ``second`` is r·``first``, and r (1 for a value read)."""
    if isinstance(first, Factor) and isinstance(second, Factor):
        found = _same_value(net, first, second, names, fixed)
        return None if found is None else (found, 1.0)
    if isinstance(first, Sum) and isinstance(second, Sum):
        return _same_sum(net, first, second, names, fixed)
    return None


def _embedded(net: Network, part: Sequence[Item], whole: Sequence[Item], names: dict[int, int],
              fixed: frozenset[int], used: tuple[int, ...] = (),
              ratio: float = 1.0) -> tuple[tuple[int, ...], dict[int, int], float] | None:
    """Each factor of ``part`` paired with a factor of ``whole`` (each one once, none of
    ``used``) that is it, times a ratio, under one extension of ``names``: the positions in
    ``whole`` (after ``used``), the names and the product of the ratios (times ``ratio``); None
    where no pairing exists."""
    if not part:
        return used, names, ratio
    for j, factor in enumerate(whole):
        found = None if j in used else _matched(net, part[0], factor, names, fixed)
        if found is not None:
            result = _embedded(net, part[1:], whole, found[0], fixed, (*used, j),
                               ratio * found[1])
            if result is not None:
                return result
    return None


def _renamed(net: Network, factor: Item, names: dict[int, int]) -> Item | None:
    """``factor`` with its labels renamed (a label ``names`` does not name kept); None where a
    label a sum's term sums inside it would become one of the sum's own."""
    if isinstance(factor, Factor):
        dims = tuple(tuple(names.get(a, a) for a in net.atoms(group)) for group in factor.dims)
        return Factor(factor.refs, dims, factor.make)
    own = {a: names.get(a, a) for a in factor.labels}
    terms = []
    for term in factor.terms:
        inside = _term_labels(net, term) - set(own)
        if inside & set(own.values()):
            return None
        factors = tuple(_renamed(net, f, own) for f in term.factors)
        if None in factors:
            return None
        terms.append(Term(term.coeff, factors))
    return Sum(tuple(terms), tuple(own.values()))


def _rest(net: Network, term: Term, used: Sequence[int], names: dict[int, int],
          part_labels: set[int]) -> tuple[Item, ...] | None:
    """The factors of ``term`` the grouping does not take out, renamed to the first term's
    labels; None where a label of theirs no name maps would meet one of the part's (it is
    summed with the rest, inside the sum)."""
    rest = [f for j, f in enumerate(term.factors) if j not in used]
    unnamed = {a for f in rest for a in atoms(net, f)} - set(names)
    if unnamed & (part_labels | set(names.values())):
        return None
    renamed = tuple(_renamed(net, f, names) for f in rest)
    return None if None in renamed else renamed


def _key(terms: Sequence[Term], output: Labels) -> object:
    """A set of terms (in any order) over ``output``."""
    return frozenset(Counter(terms).items()), output


def _elements(net: Network, labels: set[int] | Labels) -> int:
    return math.prod(net.sizes[a] for a in labels)


@dataclass
class _Search:
    """One network's search: its labels, the cost, and the cheapest terms found per set of
    terms (a set reached by two sequences of groupings is searched once)."""

    net: Network
    weigh: Weigh
    found: dict[object, tuple[Term, ...]] = field(default_factory=dict)
    weights: dict[object, tuple[float, float]] = field(default_factory=dict)

    def weight(self, terms: Sequence[Term], output: Labels) -> tuple[float, float]:
        key = _key(terms, output)
        if key not in self.weights:
            self.weights[key] = self.weigh(terms, output) or (math.inf, math.inf)
        return self.weights[key]

    def cheapest(self, terms: tuple[Term, ...], output: Labels) -> tuple[Term, ...]:
        key = _key(terms, output)
        if key in self.found:
            return self.found[key]
        best, least = terms, self.weight(terms, output)
        moves = itertools.chain(_ranked(self.net, terms, output),
                                _named(self.net, terms, output))
        if len(terms) <= EXHAUSTIVE_TERMS:
            reached = [*self._groupings(terms, output, every_subset=True), *moves]
        else:  # the cheapest few single groupings (or other moves), then on from each
            options = [(self.weight(t, output), n, t) for n, t in enumerate(itertools.chain(
                self._groupings(terms, output, every_subset=False), moves))]
            reached = [t for *_, t in sorted(options, key=lambda o: o[:2])[:BEAM]]
        for grouped in reached:
            found = self.cheapest(grouped, output)
            weight = self.weight(found, output)
            if weight < least:
                best, least = found, weight
        self.found[key] = best
        return best

    def _groupings(self, terms: tuple[Term, ...], output: Labels,
                   every_subset: bool) -> Iterator[tuple[Term, ...]]:
        """Every set of terms one grouping makes of ``terms``: of every subset of two or more
        terms (``every_subset``), or of every pair and of every term that shares the pair's
        part; the grouped term last."""
        count = len(terms)
        subsets = (itertools.chain.from_iterable(
            itertools.combinations(range(count), r) for r in range(2, count + 1))
            if every_subset else itertools.combinations(range(count), 2))
        for members in subsets:
            for part in self._parts(terms, members, output):
                widened = members if every_subset else tuple(
                    m for m in range(count) if m in members or _embedded(
                        self.net, part, terms[m].factors, {}, frozenset(output)) is not None)
                for group in dict.fromkeys((members, widened)):
                    if len(self.weights) > MAX_WEIGHED:
                        return
                    rest = tuple(t for n, t in enumerate(terms) if n not in group)
                    for grouped in self._grouped(terms, group, part, output):
                        yield rest + ((grouped,) if grouped.coeff else ())

    def _parts(self, terms: tuple[Term, ...], members: tuple[int, ...],
               output: Labels) -> Iterator[tuple[Item, ...]]:
        """The parts of the first member's factors that every other member may hold (each
        factor the same value as one of theirs), largest first; the empty part too."""
        fixed = frozenset(output)
        first = terms[members[0]].factors
        shared = [f for f in first if all(
            any(_matched(self.net, f, g, {}, fixed) is not None for g in terms[m].factors)
            for m in members[1:])]
        for size in range(len(shared), -1, -1):
            yield from itertools.combinations(shared, size)

    def _grouped(self, terms: tuple[Term, ...], members: tuple[int, ...],
                 part: tuple[Item, ...], output: Labels) -> list[Term]:
        """The terms the ``members`` make with ``part`` taken out: part × the sum of their
        rests (searched in its turn), its coefficient 1 or the first member's (the sum's
        coefficients relative to it: each choice leaves other multiplies); part with their
        coefficients added where nothing is left. [] where a member does not hold the part
        or nothing is gained by the sum."""
        net, fixed = self.net, frozenset(output)
        # with nothing taken out, only a sum over fewer labels than the output's is worth it
        if not part and _elements(net, set().union(*(
            _term_labels(net, terms[m]) for m in members)) & fixed) >= _elements(net, output):
            return []
        part_labels = {a for f in part for a in atoms(net, f)}
        rests = []
        for m in members:
            term = terms[m]
            found = _embedded(net, part, term.factors, {}, fixed)
            rest = None if found is None else _rest(net, term, found[0], found[1], part_labels)
            if rest is None:
                return []
            rests.append(Term(term.coeff * found[2], rest))
        if not any(rest.factors for rest in rests):
            return [Term(sum(rest.coeff for rest in rests), part)]
        each = [_term_labels(net, rest) for rest in rests]
        shared = frozenset().union(*each) & (part_labels | fixed)
        # a label every rest sums may be summed inside the sum or after it: Σⱼ bⱼ − Σⱼ cⱼ =
        # Σⱼ (bⱼ − cⱼ)
        after = set.intersection(*each) - part_labels - fixed
        grouped = []
        for lead, labels in itertools.product(dict.fromkeys((1.0, rests[0].coeff)),
                                              dict.fromkeys((shared, shared | after))):
            ordered = tuple(sorted(labels))
            summed = self.cheapest(tuple(Term(t.coeff / lead, t.factors) for t in rests),
                                   ordered)
            if not summed:
                return [Term(0.0, ())]
            grouped.append(
                # one term: its factors join the part's (the labels it sums are its own)
                Term(lead * summed[0].coeff, part + summed[0].factors) if len(summed) == 1
                else Term(lead, (*part, Sum(summed, ordered))))
        return grouped


# --- a bilinear sum: its products are as few as its coefficients' rank -------------------------
# Σᵢⱼ Cᵢⱼ·Xᵢ·Yⱼ with C = U·V (r columns of U, r rows of V) is Σₖ (Σᵢ Uᵢₖ·Xᵢ)·(Σⱼ Vₖⱼ·Yⱼ):
# r products where the terms were as many as C's nonzeros. Groupings reach the rank only where
# C's rows (or columns) are copies of few; with 2·G·E written once they miss
# (A + G)(B + E) + (D + G)(C + E) = AB + AE + DC + DE + GB + GC + 2·GE, whose C has rank 2 with
# three distinct rows and columns.


def _fraction(value: float) -> Fraction | None:
    """``value`` as a fraction of a small denominator (exact elimination), if it is one."""
    found = Fraction(value).limit_denominator(RANK_DENOMINATOR)
    return found if math.isclose(float(found), value, rel_tol=RATIO_TOLERANCE) else None


def _summed_by_role(net: Network, factors: Sequence[Item],
                    output: frozenset[int]) -> dict[tuple, list[int]] | None:
    """The summed labels of a product of ``factors`` by role (the factors that carry it) and
    size; None where a factor repeats a label (a diagonal)."""
    carried = [atoms(net, f) for f in factors]
    if any(len(set(labels)) != len(labels) for labels in carried):
        return None
    roles: dict[tuple, list[int]] = {}
    for label in dict.fromkeys(itertools.chain(*carried)):
        if label not in output:
            key = (*(label in labels for labels in carried), net.sizes[label])
            roles.setdefault(key, []).append(label)
    return roles


#: what :func:`_onto` reads of an anchor's factors: the output labels of each, and the labels
#: they sum by role (:func:`_summed_by_role`)
Anchor = tuple[tuple[set[int], ...], dict[tuple, list[int]] | None]


def _anchored(net: Network, anchor: Sequence[Item], output: frozenset[int]) -> Anchor:
    """What :func:`_onto` reads of ``anchor``, found once for every term renamed onto it."""
    return (tuple({a for a in atoms(net, f) if a in output} for f in anchor),
            _summed_by_role(net, anchor, output))


def _onto(net: Network, anchor: Anchor, factors: Sequence[Item],
          output: frozenset[int]) -> Iterator[tuple[Item, ...]]:
    """``factors`` renamed onto an anchor's labels role by role (each the same output labels as
    the anchor's factor of its role, its summed labels onto the anchor's of that role and
    size): the same product of other values, in each such renaming."""
    anchor_outputs, target = anchor
    if target is None:
        return
    for mine, theirs in zip(factors, anchor_outputs, strict=True):
        if {a for a in atoms(net, mine) if a in output} != theirs:
            return
    source = _summed_by_role(net, factors, output)
    if source is None or {k: len(v) for k, v in target.items()} != {
            k: len(v) for k, v in source.items()}:
        return
    roles = sorted(target)
    renamings = itertools.product(*(itertools.permutations(target[k]) for k in roles))
    for chosen in itertools.islice(renamings, MAX_RENAMINGS):
        names = {b: a for k, labels in zip(roles, chosen, strict=True)
                 for b, a in zip(source[k], labels, strict=True)}
        renamed = tuple(_renamed(net, f, names) for f in factors)
        if None not in renamed:
            yield renamed


def _found(net: Network, items: Sequence[Item], item: Item,
           fixed: frozenset[int]) -> tuple[int, Fraction] | None:
    """The position of the value ``item`` is r times, and r; None where it is a new one."""
    for n, held in enumerate(items):
        found = _matched(net, held, item, {}, fixed)
        ratio = None if found is None else _fraction(found[1])
        if ratio is not None:
            return n, ratio
    return None


@dataclass
class _Bilinear:
    """Terms ``members`` of a sum read as ``scale``·Σᵢⱼ Cᵢⱼ·Xᵢ·M·Yⱼ, M the factors every member
    holds (``middle``, the first member's; none for a sum of products of two): the distinct
    values in each role (renamed onto the first member's labels) and C (``coeffs``, by
    position pair), each coefficient a fraction of the first member's (1/√d on every term is
    ``scale``)."""

    scale: float
    middle: tuple[Item, ...]
    members: list[int] = field(default_factory=list)
    roles: tuple[list[Item], list[Item]] = field(default_factory=lambda: ([], []))
    coeffs: dict[tuple[int, int], Fraction] = field(default_factory=dict)

    def add(self, net: Network, member: int, coeff: Fraction,
            options: Iterator[tuple[Item, ...]], fixed: frozenset[int]) -> None:
        """Take in a member whose factors (read the ways of ``options``: its two in the roles,
        then the middle) hold the middle; of those ways the one most of whose values in the
        roles are held already."""
        best = None
        for factors in options:
            middle = [_found(net, [held], f, fixed) for held, f in zip(
                self.middle, factors[2:], strict=True)]
            if None in middle:
                continue
            places = [_found(net, held, f, fixed) for held, f in zip(self.roles, factors[:2],
                                                                     strict=True)]
            known = sum(place is not None for place in places)
            if best is None or known > best[0]:
                ratio = math.prod((place[1] for place in middle), start=Fraction(1))
                best = (known, factors, places, ratio)
        if best is None:
            return
        _, factors, places, ratio = best
        coeff *= ratio
        position = []
        for held, factor, place in zip(self.roles, factors[:2], places, strict=True):
            if place is None:
                held.append(factor)
                place = (len(held) - 1, Fraction(1))
            position.append(place[0])
            coeff *= place[1]
        key = (position[0], position[1])
        self.coeffs[key] = self.coeffs.get(key, Fraction(0)) + coeff
        self.members.append(member)


def _bilinear(net: Network, terms: Sequence[Term], anchor: int, roles: tuple[int, int],
              fixed: frozenset[int]) -> _Bilinear:
    """The terms read as products of the same shape as term ``anchor``'s, its factors
    ``roles`` in the roles and the others the middle, over its labels."""
    held = terms[anchor].factors
    first = (*(held[r] for r in roles), *(f for n, f in enumerate(held) if n not in roles))
    family = _Bilinear(terms[anchor].coeff, first[2:])
    labels = frozenset(fixed | set(_term_labels(net, terms[anchor])))
    anchored = _anchored(net, first, fixed)
    for n, term in enumerate(terms):
        coeff = _fraction(term.coeff / family.scale) if term.coeff else None
        if n < anchor or len(term.factors) != len(first) or coeff is None:
            continue
        options = itertools.chain.from_iterable(
            _onto(net, anchored, factors, fixed)
            for factors in itertools.permutations(term.factors))
        family.add(net, n, coeff, options, labels)
    return family


def _rank_factors(rows: list[list[Fraction]]) -> list[tuple[list[Fraction], list[Fraction]]]:
    """C = Σₖ uₖ·vₖᵀ in as many pairs as C's rank: vₖ the rows of C's reduced row echelon form,
    uₖ the columns of C at its pivots (exact, over fractions)."""
    reduced = [list(row) for row in rows]
    pivots: list[int] = []
    for column in range(len(reduced[0])):
        top = len(pivots)
        pick = next((i for i in range(top, len(reduced)) if reduced[i][column]), None)
        if pick is None:
            continue
        reduced[top], reduced[pick] = reduced[pick], reduced[top]
        lead = reduced[top][column]
        reduced[top] = [v / lead for v in reduced[top]]
        for i, row in enumerate(reduced):
            if i != top and row[column]:
                scale = row[column]
                reduced[i] = [a - scale * b for a, b in zip(row, reduced[top], strict=True)]
        pivots.append(column)
    return [([row[p] for row in rows], reduced[k]) for k, p in enumerate(pivots)]


def _combined(items: Sequence[Item], coeffs: Sequence[Fraction],
              labels: Labels) -> tuple[Fraction, Item]:
    """Σᵢ cᵢ·itemsᵢ as a number times one item: the item itself where one cᵢ is nonzero, else a
    sum over ``labels`` (its first coefficient taken out)."""
    used = [(c, item) for c, item in zip(coeffs, items, strict=True) if c]
    lead = used[0][0]
    if len(used) == 1:
        return lead, used[0][1]
    return lead, Sum(tuple(Term(float(c / lead), (item,)) for c, item in used), labels)


def _ranked(net: Network, terms: tuple[Term, ...], output: Labels) -> Iterator[tuple[Term, ...]]:
    """Each bilinear family of ``terms`` (:class:`_Bilinear`: any two factors of a term of at
    most :data:`MOST_RANKED_FACTORS` in the roles) whose coefficients have a lower rank than it
    has terms, as that many products of sums: the sums' coefficients from the reduced rows of
    C and of Cᵀ (each leaves other adds)."""
    fixed = frozenset(output)
    placed: set[int] = set()
    for anchor, term in enumerate(terms):
        if anchor in placed or not 2 <= len(term.factors) <= MOST_RANKED_FACTORS or (
            not term.coeff
        ):
            continue
        for roles in itertools.combinations(range(len(term.factors)), 2):
            family = _bilinear(net, terms, anchor, roles, fixed)
            lefts, rights = family.roles
            matrix = [[family.coeffs.get((i, j), Fraction(0)) for j in range(len(rights))]
                      for i in range(len(lefts))]
            if len(family.members) < 2:
                continue
            pairs = _rank_factors(matrix)
            if len(pairs) >= len(family.members):
                continue
            placed.update(family.members)
            yield from _products(net, terms, family, fixed, pairs, matrix)


def _products(net: Network, terms: tuple[Term, ...], family: _Bilinear, fixed: frozenset[int],
              pairs: Sequence[tuple[list[Fraction], list[Fraction]]],
              matrix: list[list[Fraction]]) -> Iterator[tuple[Term, ...]]:
    """The family's terms as Σₖ (Σᵢ uₖᵢ·Xᵢ)·M·(Σⱼ vₖⱼ·Yⱼ), the pairs of C's rows and of Cᵀ's,
    beside the other terms."""
    lefts, rights = family.roles
    columns = [list(column) for column in zip(*matrix, strict=True)]
    transposed = [(u, v) for v, u in _rank_factors(columns)]
    # a sum carries the labels its role's factor shares with the rest of its term or the output
    each = [lefts[0], rights[0], *family.middle]
    shared = [tuple(a for a in atoms(net, f) if a in fixed or any(
        a in atoms(net, other) for m, other in enumerate(each) if m != n))
        for n, f in enumerate(each[:2])]
    rest = tuple(t for n, t in enumerate(terms) if n not in family.members)
    for factoring in (pairs, transposed):
        made = []
        for u, v in factoring:
            (a, left), (b, right) = (_combined(lefts, u, shared[0]),
                                     _combined(rights, v, shared[1]))
            made.append(Term(family.scale * float(a * b), (left, right, *family.middle)))
        yield rest + tuple(made)


# --- a shared sub-product named once ------------------------------------------------------------
# A product of factors that two terms hold (or one term twice: a⁴ = a²·a²) is one value: named
# as a sum of one term over the labels it shares with the rest of its term or the output, each
# occurrence is that value read (renamed), computed and charged once by the plan
# (:func:`shared_key`); groupings then run over the terms that read it. With s = a·a,
# a⁴ + a³ + a² = s·s + s·a + s = s·(s + a) + s: two products where three were written.


def _canonical(net: Network, item: Item, names: dict[int, int]) -> object:
    """``item`` with its labels numbered in order of first appearance (``names``, filled in). A
    value read as it is stands for its elements: its value, offset and each label's stride in
    its storage (labels met from the outermost), so that every view of it (Aᵀ read transposed,
    a batch of one) is one factor, as :func:`_same_value` reads it."""
    if isinstance(item, Factor):
        strides = _storage_strides(net, item)
        if strides is not None:
            ref = item.refs[0]
            placed = sorted(strides.items(), key=lambda pair: -pair[1])
            return ref.value_id, ref.offset, ref.dtype, tuple(
                (stride, names.setdefault(a, len(names))) for a, stride in placed)
        return item.refs, item.make, tuple(tuple(names.setdefault(a, len(names)) for a in
                                                 net.atoms(group)) for group in item.dims)
    labels = tuple(names.setdefault(a, len(names)) for a in item.labels)
    return labels, tuple((t.coeff, tuple(_canonical(net, f, names) for f in t.factors))
                         for t in item.terms)


def shared_key(net: Network, item: Sum) -> object:
    """What ``item`` computes, up to the names of its labels: two sums of one key are one value
    (each read at its own labels, in the order of ``labels``)."""
    names: dict[int, int] = {}
    body = _canonical(net, item, names)
    return body, tuple(net.sizes[a] for a in names)


def network_key(net: Network, terms: Sequence[Term], output: Labels) -> tuple[object, float] | None:
    """What ``terms`` compute over ``output`` (its labels in the order of the value's dims), up
    to one nonzero number, and that number: two networks of one key compute values in the
    ratio of their numbers, element by element, however spelled (``a @ b * c`` and
    ``(a * c) @ b``; a diagonal scale on either side of a product). Each term is keyed with
    its factors in an order that no name of a summed label decides and those labels numbered
    in it; the terms sorted, and their coefficients divided by the first's. Two output labels
    next to one another that every factor reads as one (the outer's stride the inner's times
    its size, or neither) are one label (:func:`_fused`): a batch and a head read through a
    batched product's (B·H, …) view are the (B, H) of an einsum's output. None for no terms
    (the value is 0)."""
    dropped, sizes = _fused(net, terms, output)
    fixed = {a: n for n, a in enumerate(a for a in output if a not in dropped)}
    keyed = []
    for term in terms:
        factors = sorted(term.factors, key=lambda f: repr(
            _fused_canonical(net, f, dict(fixed), dropped)))
        names = dict(fixed)
        body = tuple(_fused_canonical(net, f, names, dropped) for f in factors)
        numbered = tuple(sizes.get(a, net.sizes[a]) for a in sorted(names, key=names.__getitem__))
        keyed.append((repr((body, numbered)), term.coeff))
    keyed.sort(key=lambda pair: pair[0])
    if not keyed or not keyed[0][1]:
        return None
    first = keyed[0][1]
    # coefficients within rounding of one ratio are one (as :data:`RATIO_TOLERANCE` takes them)
    return tuple((body, float(f"{coeff / first:.12g}")) for body, coeff in keyed), first


def _fused(net: Network, terms: Sequence[Term], output: Labels) -> tuple[set[int], dict[int, int]]:
    """The output labels read as part of the next one out (dropped) and the size of each label
    that reads them too: ``output[n]`` and ``output[n + 1]`` are one where every factor of
    every term is a value read as it is that carries both, the outer at the inner's stride
    times its size, or neither."""
    dropped: set[int] = set()
    factors = [f for term in terms for f in term.factors]
    strides = [_storage_strides(net, f) if isinstance(f, Factor) else None for f in factors]
    carried = [set(atoms(net, f)) for f in factors]
    for outer, inner in itertools.pairwise(output):
        if all(not {outer, inner} & held or {outer, inner} <= held and found is not None and (
            found[outer] == found[inner] * net.sizes[inner]) for held, found in zip(
                carried, strides, strict=True)):
            dropped.add(outer)
    # a run fused into its innermost label: that label's size is the run's
    run: dict[int, int] = {}
    for outer, inner in itertools.pairwise(output):
        if outer in dropped:
            run[inner] = run.get(outer, net.sizes[outer]) * net.sizes[inner]
    return dropped, run


def _fused_canonical(net: Network, item: Item, names: dict[int, int], dropped: set[int]) -> (
    object
):
    """:func:`_canonical` with the labels of ``dropped`` left out (read as part of the next
    label in: :func:`_fused`)."""
    if not dropped or not isinstance(item, Factor) or not dropped & set(atoms(net, item)):
        return _canonical(net, item, names)
    strides = _storage_strides(net, item)
    ref = item.refs[0]
    placed = sorted(((a, s) for a, s in strides.items() if a not in dropped),
                    key=lambda pair: -pair[1])
    return ref.value_id, ref.offset, ref.dtype, tuple(
        (stride, names.setdefault(a, len(names))) for a, stride in placed)


def _connected(net: Network, part: Sequence[Item]) -> bool:
    """Whether ``part``'s factors are one product (each reached from the first by labels)."""
    reached, labels = {0}, set(atoms(net, part[0]))
    grown = True
    while grown:
        grown = False
        for n, f in enumerate(part):
            if n not in reached and labels & set(atoms(net, f)):
                reached.add(n)
                labels |= set(atoms(net, f))
                grown = True
    return len(reached) == len(part)


def _occurrences(net: Network, part: Sequence[Item], outer: Labels, term: Term,
                 fixed: frozenset[int]) -> tuple[Term, int]:
    """``term`` with each occurrence of ``part`` (the same values under a renaming of every
    label, its own labels summed nowhere else) read as one sum over the images of ``outer``,
    and how many there were."""
    factors, made, coeff = list(term.factors), [], term.coeff
    inner = {a for f in part for a in atoms(net, f)} - set(outer)
    while (found := _embedded(net, part, factors, {}, frozenset())) is not None:
        # a sum held r times over (its coefficients in one ratio) is r times the one named
        used, names, ratio = found
        image = {mine: theirs for theirs, mine in names.items()}
        left = [f for n, f in enumerate(factors) if n not in used]
        elsewhere = fixed | {a for f in (*left, *made) for a in atoms(net, f)}
        if {image[a] for a in inner} & elsewhere:
            break
        made.append(Sum((Term(1.0, tuple(factors[n] for n in used)),),
                        tuple(image[a] for a in outer)))
        factors, coeff = left, coeff * ratio
    return Term(coeff, (*factors, *made)), len(made)


def _named(net: Network, terms: tuple[Term, ...], output: Labels) -> Iterator[tuple[Term, ...]]:
    """Each connected product of two or more factors of a term (of at most
    :data:`MOST_NAMED_FACTORS`) that occurs at least twice in ``terms``, named in every term
    that holds it. A factor may be a product named before (s = a·a, then t = s·s in s·s·s·s:
    a⁸ in three products, as repeated squaring takes)."""
    fixed = frozenset(output)
    tried: set[object] = set()
    for term in terms:
        if len(term.factors) > MOST_NAMED_FACTORS:
            continue
        for size in range(2, len(term.factors) + 1):
            for positions in itertools.combinations(range(len(term.factors)), size):
                part = tuple(term.factors[n] for n in positions)
                held = {a for f in part for a in atoms(net, f)}
                if not held or not _connected(net, part):
                    continue
                others = [f for n, f in enumerate(term.factors) if n not in positions]
                outer = tuple(a for a in dict.fromkeys(
                    a for f in part for a in atoms(net, f)) if a in fixed or any(
                    a in atoms(net, f) for f in others))
                key = shared_key(net, Sum((Term(1.0, part),), outer))
                if key in tried:
                    continue
                tried.add(key)
                found = [_occurrences(net, part, outer, t, fixed) for t in terms]
                if sum(count for _, count in found) >= 2:
                    yield tuple(t for t, _ in found)


def reads(terms: Sequence[Term]) -> int:
    """How many values ``terms`` read as factors (a sum's through its terms): fewer where a
    common factor was taken out."""
    return sum(reads(f.terms) if isinstance(f, Sum) else 1 for t in terms for f in t.factors)


def factored_terms(net: Network, terms: Sequence[Term], output: Labels, weigh: Weigh) -> list[
    Term
]:
    """The cheapest set of terms equal to ``terms`` that the groupings reach (the module doc),
    weighed by ``weigh``: ``terms`` themselves where no grouping costs less. A term whose
    coefficients cancel is dropped."""
    return list(_Search(net, weigh).cheapest(tuple(terms), output))
