"""Stage 3: the plans of one traced program, built once and independent of the GPU.

From the costed ops (:mod:`torchroofline.costs`) three schedules are built, and every price is
read from them:

- the **eager plan**: one kernel per op, as PyTorch runs it
  (:func:`~torchroofline.fusion.eager_plan`);
- the **fused plan**: Inductor-style kernels (:func:`~torchroofline.fusion.fused_plan`);
- the **necessary work** the bound charges: what the kept outputs need
  (:func:`~torchroofline.demand.necessary_work`), of the program as written and of the
  cheapest equal program the algebraic rules find (:mod:`.algebra`).

None of them depends on the GPU, the precision or the cache mode. Their bytes depend only on
the float element size they are counted at (``float_bytes``). :func:`torchroofline.roofline.price`
prices them on a GPU, and ``Result.on`` prices the same plans again without rebuilding them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..costs import OpRecord, cost_trace
from ..trace.modes import one_thread
from ..trace.refs import Trace
from .algebra import Rewritten, cheapest_program
from .demand import Necessary, known_values, necessary_work
from .demand.given import given_necessary
from .demand.routing import floored
from .fusion import Plan, eager_plan, fused_plan
from .step_graphs import fused_step_plan


@dataclass(frozen=True)
class Cheapest:
    """The cheapest program equal to the traced one that the algebraic rules found
    (:mod:`.algebra`), and its necessary work (for any input values, where the first figure is
    for the given ones: see :attr:`Plans.necessary_any_input`)."""

    program: Rewritten = field(repr=False, compare=False)
    necessary: Necessary
    necessary_any_input: Necessary | None = None


@dataclass(frozen=True)
class Plans:
    """The GPU-independent facts of one traced program: its costed ops (execution order), the
    eager and fused kernel schedules, and the necessary work of the bound."""

    trace: Trace = field(repr=False, compare=False)
    ops: tuple[OpRecord, ...]
    eager: Plan
    fused: Plan
    necessary: Necessary
    #: the necessary work for any input values where it differs from :attr:`necessary`, which
    #: is then the work for the given ones (:mod:`torchroofline.demand.given`); else None
    necessary_any_input: Necessary | None = None
    #: the cheapest equal program and its necessary work, where that is less than
    #: :attr:`necessary` (the program as written's); the price takes the lower bound
    cheapest: Cheapest | None = None
    #: the necessary work of the program as written where :attr:`necessary` takes an
    #: algebraic shortcut inside a demand rule (a reduced product: a column sum moved into the
    #: product it reads; x − x = 0 …: :data:`.demand._core.SHORTCUT_STRUCTURES`); else None.
    #: The shortcut is named like the algebra's (:func:`torchroofline.price.shortcuts.shortcuts`)
    as_written: Necessary | None = None
    #: how the program was built (e.g. a problem file's real-tensor fallback), shown first in
    #: every price of these plans
    notes: tuple[str, ...] = ()

    @property
    def bound_data(self) -> str:
        """``"given"`` when the bound is for the given input values, ``"any"`` when for any."""
        return "any" if self.trace.given is None else "given"

    @property
    def unsupported_ops(self) -> dict[str, int]:
        """Op name → how many times it ran without a cost rule (priced as bytes, no FLOPs)."""
        return dict(Counter(op.name for op in self.ops if not op.has_rule))

    def unsupported_note(self, float_bytes: int) -> str | None:
        """A note naming the ops without a cost rule and their share of the eager bytes."""
        missing = [op for op in self.ops if not op.has_rule]
        if not missing:
            return None
        share = sum(op.eager_bytes(float_bytes) for op in missing) / max(
            self.eager.bytes(float_bytes), 1
        )
        names = ", ".join(f"{name} ×{count}" for name, count in self.unsupported_ops.items())
        return (
            f"no cost rule for {names}: costed as their input+output bytes with no FLOPs "
            f"({share:.1%} of unfused bytes)"
        )


def make_plans(trace: Trace, ops: Sequence[OpRecord] | None = None) -> Plans:
    """Cost ``trace`` (unless its costed ``ops`` are given) and build its three plans, and the
    necessary work of the cheapest equal program where it is less."""
    with one_thread():
        return _plans(trace, ops)


def _plans(trace: Trace, ops: Sequence[OpRecord] | None) -> Plans:
    """:func:`make_plans`."""
    ops = tuple(cost_trace(trace) if ops is None else ops)
    known_any = known_values(trace.ops, trace.constants)
    any_input, given = _necessary(trace, ops, known_any)
    necessary = any_input if given is None else given
    plain = None
    if necessary.shortcut_ops:
        plain_any, plain_given = _necessary(trace, ops, known_any, shortcuts=False)
        plain = plain_any if plain_given is None else plain_given
    return Plans(
        trace=trace,
        ops=ops,
        eager=eager_plan(ops),
        fused=fused_plan(ops, trace.output_value_ids) if trace.step is None
        else fused_step_plan(trace, ops),
        necessary=any_input if given is None else given,
        necessary_any_input=None if given is None else any_input,
        cheapest=_cheapest(trace, ops, necessary, known_any),
        as_written=plain,
    )


def _necessary(
    trace: Trace, ops: Sequence[OpRecord], known_any: dict[int, torch.Tensor],
    shortcuts: bool = True,
) -> tuple[Necessary, Necessary | None]:
    """The necessary work for any input values (with the routed work every input needs:
    :mod:`.demand.routing`), and for the given ones (None: no values given, or none that
    change it); ``known_any``: the values known from shapes and
    constants; ``shortcuts``: see :func:`.demand.necessary_work`."""
    any_input = necessary_work(trace, ops, known=known_any, shortcuts=shortcuts)
    return (floored(trace, ops, known_any, any_input, shortcuts),
            given_necessary(trace, ops, known_any, shortcuts))


def _cheapest(
    trace: Trace, ops: Sequence[OpRecord], as_written: Necessary,
    known_any: dict[int, torch.Tensor],
) -> Cheapest | None:
    """The cheapest equal program (:func:`.algebra.cheapest_program`) and its necessary work,
    where that is less than ``as_written`` in FLOPs or bytes (None otherwise)."""
    program = cheapest_program(trace, ops, known_any)
    if program is None:
        return None
    known = known_values(program.trace.ops, program.trace.constants)
    any_input, given = _necessary(program.trace, program.ops, known)
    necessary = any_input if given is None else given
    if _flops(necessary) >= _flops(as_written) and necessary.bytes(4) >= as_written.bytes(4):
        return None
    return Cheapest(program, necessary, None if given is None else any_input)


def _flops(necessary: Necessary) -> int:
    return sum(op.flops.tensor + op.flops.vector for op in necessary.ops)


__all__ = ["Cheapest", "Plans", "make_plans"]
