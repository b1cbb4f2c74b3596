"""Two bounds: for any input values (``data="any"``) and for the given ones (``data="given"``).

A benchmark times a kernel on the inputs its ``get_inputs()`` makes, and a correct kernel may
exploit what they are: skip the zero half of a ``triu(randn(N, N))`` operand, read only the
experts its tokens are routed to. The bound for the given values lets the demand rules read
them (:mod:`torchroofline.demand.given`); the bound for any values is today's, valid whatever
the inputs hold. This module decides which bound an analysis computes and attaches the real
values to a trace: the forward arguments, and the small real parameters an index-producing
subgraph reads (a router's weight). Big tensors are never copied: a CPU tensor's storage is
read in place.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..errors import InputError
from ..trace._cuda_bindings import HostMoves
from ..trace.fast_fake import FACTORIES, direct_view, made_by_factory
from ..trace.refs import Trace
from .demand.constants import CONSTANT_LIMIT_ELEMENTS
from .demand.given import reads_values_of, value_sources
from .demand.sized import _sized_by_data

#: What a bound may assume of the input values.
DATA_CHOICES = ("any", "given")

#: Default ceiling on the real tensors a "given" bound may make (bytes): past it, or past a
#: quarter of it for one tensor, a problem file's tensors are made as shapes only
#: (:mod:`torchroofline.seeded`).
DATA_LIMIT_BYTES = 2 * 2**30


def _tensor_leaves(inputs: Any) -> list[torch.Tensor]:
    return [leaf for leaf in tree_leaves(inputs) if isinstance(leaf, torch.Tensor)]


def _real(tensor: torch.Tensor) -> bool:
    return not isinstance(tensor, FakeTensor) and not tensor.is_meta


def input_bytes(inputs: Any) -> int:
    """Bytes of the tensors among ``inputs`` (real, fake or meta alike)."""
    return sum(t.numel() * t.element_size() for t in _tensor_leaves(inputs))


def check_data(data: str | None) -> None:
    if data is not None and data not in DATA_CHOICES:
        raise InputError(f"data must be 'any' or 'given', got {data!r}")


def resolve_data(data: str | None, inputs: Any, limit_bytes: int) -> str:
    """The bound an analysis of ``inputs`` computes: ``data`` when set, else ``"given"`` when
    every input tensor is real and they fit in ``limit_bytes`` (``"any"`` otherwise). Raises
    :class:`InputError` for ``"given"`` with fake or meta inputs (no values to give)."""
    check_data(data)
    tensors = _tensor_leaves(inputs)
    every_real = all(map(_real, tensors))
    if data == "given" and not every_real:
        raise InputError(
            "data='given' needs real input tensors, and some are fake or meta; pass real "
            "tensors, or data='any' for the bound that holds for any input values"
        )
    if data is not None:
        return data
    return "given" if every_real and input_bytes(inputs) <= limit_bytes else "any"


def _flat_storage(tensor: torch.Tensor) -> torch.Tensor:
    """Every element of ``tensor``'s storage, flat, on the CPU (read in place there)."""
    elements = tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1)
    flat = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    flat.set_(tensor.untyped_storage(), 0, (elements,))
    return flat.detach().cpu()


def with_given_values(
    trace: Trace,
    arguments: Sequence[Any] | Callable[[bool], Sequence[Any] | None],
    module_tensors: Mapping[str, torch.Tensor],
) -> Trace:
    """``trace`` with its given values attached (``Trace.given``): each real forward-argument
    tensor's, and each small real parameter or buffer an index-producing subgraph reads
    (:func:`demand.given.value_sources`). ``arguments`` may be a function that makes them (a
    problem's seeded ``get_inputs()``): it is called only when some rule reads an argument's
    values, told whether only their zeros are read (no index is computed from them), and may
    then return None for values with no zero (:func:`drawn_dense`)."""
    wanted = value_sources(trace.ops)
    given: dict[int, torch.Tensor] = {}
    for name, tensor in module_tensors.items():
        value_id = trace.module_value_ids.get(name, 0)
        if value_id in wanted and _real(tensor) and tensor.numel() <= CONSTANT_LIMIT_ELEMENTS:
            given[value_id] = _flat_storage(tensor)
    if callable(arguments):
        argument_ids = set(trace.argument_value_ids)
        if not reads_values_of(trace, argument_ids):
            return dataclasses.replace(trace, given=given)
        arguments = arguments(argument_ids.isdisjoint(wanted))
        if arguments is None:  # values with no zero, read only for their zeros
            return dataclasses.replace(trace, given=given)
    tensors = _tensor_leaves(arguments)
    for value_id, tensor in zip(trace.argument_value_ids, tensors, strict=False):
        if value_id and _real(tensor):
            given[value_id] = _flat_storage(tensor)
    if not given and not any(map(_real, tensors)):
        return trace  # every value is a shape (made over the data limit): nothing is given
    return dataclasses.replace(trace, given=given)



def needs_real_model(trace: Trace) -> bool:
    """Whether the bound for the given values needs the model's real parameters, which a
    model built on fake tensors lacks: an index-producing subgraph reads one (a router's
    weight) that :func:`with_given_values` would attach (one of at most
    :data:`CONSTANT_LIMIT_ELEMENTS` elements: a bigger one stays unknown, real or not), or the
    real-data fallback filled the model at random where data decides sizes."""
    wanted = value_sources(trace.ops)
    known = {**trace.constants, **(trace.given or {})}
    elements = {ref.value_id: math.prod(ref.shape) for op in trace.ops for ref in op.reads}
    missing = [
        v for v in trace.module_value_ids.values()
        if v in wanted and v not in known and elements.get(v, 0) <= CONSTANT_LIMIT_ELEMENTS
    ]
    return bool(missing) or (not trace.ran_on_given_values and bool(_sized_by_data(trace.ops)))


#: Random draws whose every element is nonzero with probability 1: a normal sample is exactly
#: zero with probability 0 (a uniform one is not: ``rand`` draws 0 once in 2^24).
_NONZERO_DRAWS = frozenset({"randn", "normal", "randn_like"})

#: Ops that give a tensor the elements of their input unchanged (a copy, a view, a move).
_SAME_ELEMENTS = frozenset({"clone", "contiguous", "_to_copy", "to", "detach", "alias",
                            "view", "reshape", "_unsafe_view", "t", "transpose", "permute"})


class _DrawTracker(TorchDispatchMode):
    """Under fake tensors: which tensors ``get_inputs()`` returns straight from a normal draw
    (through copies and views only), so hold no zero: their values hold no structure a rule
    could use, and need not be made."""

    def __init__(self, mode: FakeTensorMode) -> None:
        super().__init__()
        self.mode = mode  #: the fake mode below
        self.drawn: set[int] = set()  #: ids of the drawn tensors, kept alive in ``made``
        self.made: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        output = self._made_fast(func, args, kwargs)
        if output is None:
            output = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        drawn = name in _NONZERO_DRAWS or (
            name in _SAME_ELEMENTS and inputs and all(id(t) in self.drawn for t in inputs)
        )
        # a cast to an integer (or bool) dtype rounds most of a normal draw to zero
        if drawn and isinstance(output, torch.Tensor) and output.dtype.is_floating_point:
            self.drawn.add(id(output))
            self.made.append(output)
        return output

    def _made_fast(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """A draw's or a ``detach``'s fake output made as the fake mode makes it, without its
        dispatch (trace/fast_fake.py: a few ms a call, on a fresh mode); None where the mode
        must make it."""
        if func in FACTORIES:
            return made_by_factory(self.mode, func, args, kwargs)
        if func is torch.ops.aten.detach.default and torch._C._len_torch_dispatch_stack() == 1:
            with unset_fake_temporarily():
                return direct_view(self.mode, func, args, kwargs)
        return None


def drawn_dense(make_inputs: Callable[[], Sequence[Any]]) -> bool:
    """Whether every tensor ``make_inputs()`` returns is a normal draw (no zero, no index: a
    "given" bound reads nothing from it), found by running it on fake tensors (a move to the
    GPU keeping the tensor where it is, :class:`~..trace._cuda_bindings.HostMoves`)."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    tracker = _DrawTracker(mode)
    with mode, tracker, HostMoves():
        tensors = _tensor_leaves(make_inputs())
    return bool(tensors) and all(id(t) in tracker.drawn for t in tensors)
