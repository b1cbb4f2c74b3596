"""Algebraic shortcuts priced: what each rewrite of :mod:`torchroofline.plan.algebra` saves on
a GPU, and which of the two bounds (the program as written, the cheapest equal program) is
lower."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..costs import OpRecord
from ..plan.demand import SHORTCUT_STRUCTURES, Necessary
from ..trace.refs import TracedOp
from .precision import compute_seconds

if TYPE_CHECKING:
    from .roofline import Result


@dataclass(frozen=True)
class Shortcut:
    """One algebraic shortcut on the bound's GPU: the identity (``rule``), the module and op it
    is named by, the necessary FLOPs of the ops it replaces (as written) and of the ops that
    replace them, and the compute time that saves (ms)."""

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
    than the program as written (a shortcut may trade tensor-core FLOPs for CUDA-core ones)."""
    plans = result.plans
    cheapest = plans.cheapest
    if cheapest is None or result.sol_of(cheapest.necessary) >= result.sol_of(plans.necessary):
        return plans.necessary
    return cheapest.necessary


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
    plans = result.plans
    cheapest = plans.cheapest
    if cheapest is not None and result.necessary is cheapest.necessary:
        written = as_written_work(result)
        program = cheapest.program
        return tuple(
            _priced(result, rewrite.rule, rewrite.module, rewrite.op,
                    [written.ops[i] for i in rewrite.removed],
                    [cheapest.necessary.ops[i] for i in rewrite.inserted])
            for rewrite in program.rewrites
        ) + _walked(result, program.trace.ops, program.ops, program.sources)
    if plans.as_written is None or result.sol_of(plans.as_written) <= result.sol_s:
        return ()
    ops = plans.trace.ops
    return _walked(result, ops, plans.ops, range(len(ops)))


def _walked(result: Result, ops: Sequence[TracedOp], executed: Sequence[OpRecord],
            sources: Sequence[int | None]) -> tuple[Shortcut, ...]:
    """The shortcuts the bound's demand walk took in the program of ``ops`` (``executed``
    their costs, ``sources`` each one's index in the program as written, None for an op a
    rewrite inserted): each reduced product's product and sum, and each op another structure
    rule made cheaper (a constant, one triangle of a symmetric product), as written (the
    executed records of an inserted op) and as the bound charges them."""
    written = as_written_work(result).ops

    def priced(rule: str, named: int, pair: Sequence[int]) -> Shortcut:
        before = [executed[i] if sources[i] is None else written[sources[i]] for i in pair]
        return _priced(result, rule, ops[named].module_path, ops[named].name, before,
                       [result.necessary.ops[i] for i in pair])

    necessary = result.necessary
    reduced = tuple(
        priced(SHORTCUT_STRUCTURES["reduced product"], product, (product, _reader(ops, product)))
        for product in necessary.absorbed_ops
    )
    return reduced + tuple(
        priced(SHORTCUT_STRUCTURES[structure], index, (index,))
        for index, structure in necessary.shortcut_ops if structure != "reduced product"
    )


def _reader(ops: Sequence[TracedOp], product: int) -> int:
    """The op that reads ``ops[product]``'s output (a reduced product's sum)."""
    value = ops[product].writes[0].value_id
    return next(i for i in range(product + 1, len(ops))
                if not ops[i].is_view and any(r.value_id == value for r in ops[i].reads))


def _priced(result: Result, rule: str, module: str, op: str, before: Sequence[OpRecord],
            after: Sequence[OpRecord]) -> Shortcut:
    return Shortcut(rule, module, op, _flops(before), _flops(after),
                    (_compute_s(result, before) - _compute_s(result, after)) * 1e3)


def charged_record(result: Result, index: int) -> OpRecord | None:
    """The bound's record of traced op ``index`` (``result.plans.trace.ops[index]``), or None
    where a shortcut replaced the op (its work is in the ops that replace it)."""
    cheapest = result.plans.cheapest
    if cheapest is None or result.necessary is not cheapest.necessary:
        # the program as written (a shortcut the demand walk took in it keeps its ops)
        return result.necessary.ops[index]
    program = cheapest.program.trace
    op = result.plans.trace.ops[index]
    position = {id(new): i for i, new in enumerate(program.ops)}.get(id(op))
    return None if position is None else result.necessary.ops[position]


def _flops(ops: Sequence) -> int:
    return sum(op.flops.tensor + op.flops.vector for op in ops)


def _compute_s(result: Result, ops: Sequence) -> float:
    return compute_seconds(ops, result.gpu, result.precision, result.switches, result.math)


def labels_of(rewrites: Sequence[dict[str, Any]] | None) -> str | None:
    """The labels of a saved result's ``rewrites`` (:meth:`Shortcut.to_dict` entries), joined
    as the verdict names them (:func:`.verdicts.verdict`); None when there are none."""
    names = "; ".join(Shortcut.from_dict(entry).label for entry in rewrites or ())
    return names or None
