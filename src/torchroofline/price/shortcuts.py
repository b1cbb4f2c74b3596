"""Algebraic shortcuts priced: what each rewrite of :mod:`torchroofline.plan.algebra` saves on
a GPU, and which of the two bounds (the program as written, the cheapest equal program) is
lower."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..costs import OpRecord
from ..plan.demand import SHORTCUT_STRUCTURES, Necessary
from ..trace.refs import TracedOp

if TYPE_CHECKING:
    from .roofline import Result


@dataclass(frozen=True)
class Shortcut:
    """One algebraic shortcut on the bound's GPU: the identity (``rule``), the module and op it
    is named by, the necessary FLOPs of the ops it replaces (as written) and of the ops that
    replace them, and the time it saves (ms): how far the bound would rise were this shortcut
    alone not taken (:func:`shortcuts`)."""

    rule: str
    module: str
    op: str
    flops_before: int
    flops_after: int
    time_saved_ms: float

    @property
    def label(self) -> str:
        """Where and what, e.g. "fc, sum through the linear map"."""
        return f"{self.module or '<top level>'}, {self.rule}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "module": self.module,
            "op": self.op,
            "flops_before": self.flops_before,
            "flops_after": self.flops_after,
            "time_saved_ms": self.time_saved_ms,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Shortcut:
        """From :meth:`to_dict`'s layout (an entry of a saved result's ``rewrites``)."""
        return cls(**data)


def bound_work(result: Result) -> Necessary:
    """The work the bound charges: the cheapest equal program's where it prices lower here
    than the program as written (a shortcut may trade tensor-core FLOPs for CUDA-core ones),
    or prices the same in fewer FLOPs (both bound by the same bytes: a small ``tril(ones) @
    x``, charged its prefix sum's adds, not the triangle's multiply-adds)."""
    plans = result.plans
    cheapest = plans.cheapest
    if cheapest is None:
        return plans.necessary
    rewritten, written = result.sol_of(cheapest.necessary), result.sol_of(plans.necessary)
    if rewritten < written or rewritten == written and (
        _flops(cheapest.necessary.ops) < _flops(plans.necessary.ops)
    ):
        return cheapest.necessary
    return plans.necessary


def any_input_work(result: Result) -> Necessary | None:
    """The bound's work for any input values where :func:`bound_work` is for the given ones."""
    cheapest = result.plans.cheapest
    if cheapest is not None and result.necessary is cheapest.necessary:
        return cheapest.necessary_any_input
    return result.plans.necessary_any_input


def as_written_work(result: Result) -> Necessary:
    """The necessary work of the program as written: no rewrite, and no shortcut a demand rule
    takes inside the walk (``plans.as_written``: a reduced product)."""
    return result.plans.as_written or result.plans.necessary


def shortcuts(result: Result) -> tuple[Shortcut, ...]:
    """Every shortcut the bound takes, priced (none where the program as written is cheaper),
    whichever mechanism found it: a rewrite of :mod:`..plan.algebra`, or a structure rule of
    the demand walk taking the same identity (:data:`..plan.demand.SHORTCUT_STRUCTURES`, named
    as the rewrite is: a column sum moved into the product it reads, "sum through the linear
    map"; x − x = 0) — in the program as written, or in the rewritten one where a rewrite the
    walk's rule does not need (a matrix chain) made it the cheapest."""
    taken = _taken(result)
    if len(taken) == 1:
        # undoing the one shortcut is the program as written, whose walk also demands again
        # the work the shortcut left unneeded (the GEMM whose output an x − x = 0 made dead,
        # and the bytes it read), which re-pricing the shortcut's own ops cannot see
        return (taken[0].priced(result, result.sol_of(as_written_work(result)) - result.sol_s),)
    return tuple(shortcut.priced(result, _saved_s(result, shortcut)) for shortcut in taken)


@dataclass(frozen=True)
class _Taken:
    """A shortcut the bound takes, not yet priced: the ops of the program as written it
    replaces (their records, ``before``) and the bound's ops that replace them (``replacing``,
    indices into ``result.necessary.ops``)."""

    rule: str
    module: str
    op: str
    before: tuple[OpRecord, ...]
    replacing: tuple[int, ...]

    def priced(self, result: Result, saved_s: float) -> Shortcut:
        """The shortcut, saving ``saved_s`` seconds of the bound."""
        after = [result.necessary.ops[i] for i in self.replacing]
        return Shortcut(self.rule, self.module, self.op, _flops(self.before), _flops(after),
                        saved_s * 1e3)


def _taken(result: Result) -> tuple[_Taken, ...]:
    """The shortcuts of :func:`shortcuts`, not yet priced."""
    plans = result.plans
    cheapest = plans.cheapest
    if cheapest is not None and result.necessary is cheapest.necessary:
        written = as_written_work(result)
        program = cheapest.program
        return tuple(
            _Taken(rewrite.rule, rewrite.module, rewrite.op,
                   tuple(written.ops[i] for i in rewrite.removed), rewrite.inserted)
            for rewrite in program.rewrites
        ) + _walked(result, program.trace.ops, program.ops, program.sources)
    if plans.as_written is None or result.sol_of(plans.as_written) <= result.sol_s:
        return ()
    ops = plans.trace.ops
    return _walked(result, ops, plans.ops, range(len(ops)))


def _walked(result: Result, ops: Sequence[TracedOp], executed: Sequence[OpRecord],
            sources: Sequence[int | None]) -> tuple[_Taken, ...]:
    """The shortcuts the bound's demand walk took in the program of ``ops`` (``executed``
    their costs, ``sources`` each one's index in the program as written, None for an op a
    rewrite inserted): each reduced product's product and sum, and each op another structure
    rule made cheaper (a constant, one triangle of a symmetric product), as written (the
    executed records of an inserted op) and as the bound charges them."""
    written = as_written_work(result).ops

    def taken(rule: str, named: int, pair: tuple[int, ...]) -> _Taken:
        before = tuple(executed[i] if sources[i] is None else written[sources[i]] for i in pair)
        return _Taken(rule, ops[named].module_path, ops[named].name, before, pair)

    necessary = result.necessary
    reduced = tuple(
        taken(SHORTCUT_STRUCTURES["reduced product"], product, (product, _reader(ops, product)))
        for product in necessary.absorbed_ops
    )
    return reduced + tuple(
        taken(SHORTCUT_STRUCTURES[structure], index, (index,))
        for index, structure in necessary.shortcut_ops if structure != "reduced product"
    )


def _reader(ops: Sequence[TracedOp], product: int) -> int:
    """The op that reads ``ops[product]``'s output (a reduced product's sum)."""
    value = ops[product].writes[0].value_id
    return next(i for i in range(product + 1, len(ops))
                if not ops[i].is_view and any(r.value_id == value for r in ops[i].reads))


def _saved_s(result: Result, shortcut: _Taken) -> float:
    """The seconds the bound would rise by with one shortcut undone, every other one kept: the
    speed of light of the bound's work with the shortcut's ops charged as written again, less
    the bound. Priced in the whole program, not on its own: tensor cores and CUDA cores run
    side by side, so a shortcut that moves work from one to the other (a transition layer's
    1×1 convolution on TF32 tensor cores, pooled first, an fp32 product on CUDA cores) saves
    the time it takes off the busier unit, which the other's idle time may absorb. Work the
    shortcut's output left unneeded upstream is not charged again (that needs a walk of the
    program with this shortcut alone undone): where there is one shortcut, :func:`shortcuts`
    prices it against the program as written instead."""
    dropped = set(shortcut.replacing)
    kept = [op for i, op in enumerate(result.necessary.ops) if i not in dropped]
    return result.sol_of(replace(result.necessary, ops=(*kept, *shortcut.before))) - result.sol_s


def charged_record(result: Result, index: int) -> OpRecord | None:
    """The bound's record of traced op ``index`` (``result.plans.trace.ops[index]``), or None
    where a shortcut replaced the op (its work is in the ops that replace it) or a structure
    rule of the demand walk took one in it (``Necessary.shortcut_ops``: a sum moved into the
    product it reads prices the product at the shortcut's FLOPs, not at a share of its own)."""
    cheapest = result.plans.cheapest
    if cheapest is None or result.necessary is not cheapest.necessary:
        position: int | None = index  # the program as written
    else:
        op = result.plans.trace.ops[index]
        position = {id(new): i for i, new in enumerate(cheapest.program.trace.ops)}.get(id(op))
    taken = {i for i, _ in result.necessary.shortcut_ops}
    return None if position is None or position in taken else result.necessary.ops[position]


def _flops(ops: Sequence) -> int:
    return sum(op.flops.tensor + op.flops.vector for op in ops)


def labels_of(rewrites: Sequence[dict[str, Any]] | None) -> str | None:
    """The labels of a saved result's ``rewrites`` (:meth:`Shortcut.to_dict` entries), joined
    as the verdict names them (:func:`.verdicts.verdict`); None when there are none."""
    names = "; ".join(Shortcut.from_dict(entry).label for entry in rewrites or ())
    return names or None
