"""aten ops by name, resolved so that a name the installed PyTorch lacks never stops an import.

Releases drop and rename aten ops (2.14 removed ``aten.cholesky``; ``linalg_cholesky_ex`` stays).
Every rule table names ops as ``aten.<name>`` through :data:`aten` below: a present op is the real
``OpOverloadPacket``; an absent one is a :class:`MissingOp`, which no traced op can ever equal, so
its rule simply never fires. The names this PyTorch lacks are listed by :func:`missing_ops` and
shown by ``rule_coverage`` (README's rule-coverage block), never raised.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class MissingOp:
    """An aten op (or overload) the installed PyTorch does not have; ``qualified_name`` is
    ``"cholesky"`` or ``"max.dim"``. Its overloads are missing too."""

    qualified_name: str

    def __getattr__(self, overload: str) -> MissingOp:
        if overload.startswith("__"):  # dataclass, copy and pickle probes stay attribute errors
            raise AttributeError(overload)
        return MissingOp(f"{self.qualified_name}.{overload}")

    def __str__(self) -> str:  # as the real packet prints, so rule listings match across releases
        return f"aten.{self.qualified_name}"


_MISSING: dict[str, MissingOp] = {}


class _AtenNamespace:
    """``torch.ops.aten`` for rule tables: ``aten.add`` is the real packet, ``aten.gone`` a
    :class:`MissingOp` recorded in :func:`missing_ops`."""

    def __getattr__(self, name: str):
        try:
            return getattr(torch.ops.aten, name)
        except AttributeError:
            if name.startswith("__"):
                raise
            return _MISSING.setdefault(name, MissingOp(name))


#: Use as ``from .aten_ops import aten`` to name ops in tables. It never answers "absent", so a
#: probe for an optional op (``getattr(..., None)``) asks ``torch.ops.aten`` itself.
aten = _AtenNamespace()


def is_missing(op: object) -> bool:
    """Whether ``op`` is a name this PyTorch lacks (a :class:`MissingOp`)."""
    return isinstance(op, MissingOp)


def missing_ops() -> tuple[str, ...]:
    """aten op names the rule tables name but the installed PyTorch lacks, sorted."""
    return tuple(sorted(_MISSING))
