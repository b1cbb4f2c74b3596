"""The trace's facts: :class:`TensorRef` (one view of one value of one storage), :class:`TracedOp`,
:class:`Trace`, and how views of one value unite. Every later stage reads these."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .schema import _NO_DEFAULT, _argument_names, _schema_positions, _tensors, _written_arguments
from .storages import united_elements


@dataclass(frozen=True)
class TensorRef:
    """One tensor an op reads or writes.

    ``elements`` is the number of distinct memory elements the view touches (broadcast,
    stride-0 dimensions are not counted; capped at the storage size), so an expanded bias reads
    its own size, not the size it is broadcast to.
    """

    value_id: int
    storage_id: int
    shape: tuple[int, ...]
    dtype: str
    elements: int
    is_float: bool
    itemsize: int
    #: where the view sits in its storage (elements): the demand analysis maps views of one
    #: storage onto common coordinates with these
    offset: int = 0
    strides: tuple[int, ...] = ()
    storage_elements: int = 0


@dataclass(frozen=True)
class TracedOp:
    """One executed aten op (or one intercepted library call) with shape-only arguments."""

    name: str  #: e.g. ``"aten.addmm.default"``
    base: str  #: the op name without namespace, overload and in-place suffix, e.g. ``"addmm"``
    func: Any  #: the aten overload, or ``None`` for an intercepted library call
    args: tuple
    kwargs: dict
    output: Any
    reads: tuple[TensorRef, ...]
    writes: tuple[TensorRef, ...]
    module_path: str
    is_view: bool
    #: the part of a training step that ran it: ``"forward"`` (the only one in inference),
    #: ``"backward"`` (autograd's ops) or ``"optimizer"`` (the optimizer's step)
    phase: str = "forward"
    #: the Python-level torch call that issued it (1, 2, … in call order; 0 where unknown): a
    #: call that decomposes in C++ (``F.cosine_similarity``, ``F.cross_entropy``) issues all
    #: its aten ops under one number, the ops after its first from C++, with no Python between
    python_call: int = 0

    def argument(self, name: str, default: Any = None) -> Any:
        """An argument by its schema name: passed by keyword or by position, else the schema's
        default; ``default`` where the schema has none (or the op is an intercepted call with
        no aten schema, whose options are its kwargs)."""
        if name in self.kwargs:
            return self.kwargs[name]
        if self.func is None:
            return default
        found = _schema_positions(self.func).get(name)
        if found is None:
            return default
        position, schema_default = found
        if position < len(self.args):
            return self.args[position]
        return default if schema_default is _NO_DEFAULT else schema_default

    @property
    def argument_tensors(self) -> list[torch.Tensor]:
        """The tensors among the op's arguments, in order: those its reads were recorded from
        (an intercepted call's reads are not its arguments)."""
        return _tensors((self.args, self.kwargs))

    @property
    def argument_names(self) -> tuple[str, ...]:
        """The names of the op's schema arguments (none for an intercepted call)."""
        return () if self.func is None else _argument_names(self.func)

    @property
    def written_arguments(self) -> tuple[tuple[int, str], ...]:
        """(position, name) of the arguments the schema marks as written in place."""
        return () if self.func is None else _written_arguments(self.func)


@dataclass(frozen=True)
class StepTensors:
    """The roles of a training step's tensors (:mod:`torchroofline.training`), each as the
    value the step first sees (``value_id``; ``storage_id`` names the buffer across versions).

    ``parameters``: the trained parameters as the forward reads them (the optimizer writes new
    values of the same storages). ``gradients``: each parameter's ``.grad`` as backward leaves it
    for the optimizer (in a model without parameters, each floating input's: kept).
    ``optimizer_states``: the optimizer's state tensors (AdamW's ``exp_avg``, ``exp_avg_sq``,
    a device-side ``step``), alive across steps, as the step reads them.
    ``losses``: the values backward starts from (the loss, or the model's outputs when the
    gradient is seeded). Unused parameters (no gradient) are left out of every tuple.
    """

    parameters: tuple[TensorRef, ...]
    gradients: tuple[TensorRef, ...]
    optimizer_states: tuple[TensorRef, ...]
    losses: tuple[TensorRef, ...]
    optimizer: str  #: e.g. ``"adamw"``, or ``"none"`` for forward + backward only


@dataclass(frozen=True)
class Trace:
    """Everything the trace saw: the ops in execution order and the graph's boundary values."""

    model_name: str
    ops: tuple[TracedOp, ...]
    input_value_ids: frozenset[int]  #: values read before any op wrote them (inputs, params)
    output_value_ids: frozenset[int]  #: values the model returns or leaves in mutated buffers
    params: int  #: parameter count (elements)
    notes: tuple[str, ...]
    device: str
    #: the tensors the model returns, as the views it returns (not whole storages)
    output_refs: tuple[TensorRef, ...] = ()
    #: value id → its storage's elements (flat, CPU) for buffers whose values are known
    #: constants (:func:`shadow.known_value`: a causal mask built in ``__init__``)
    constants: Mapping[int, torch.Tensor] = dataclasses.field(default_factory=dict)
    #: the value id each forward-argument tensor starts as, in argument order (0: never read),
    #: and each parameter's or buffer's by name: where given values attach (:mod:`given`)
    argument_value_ids: tuple[int, ...] = ()
    module_value_ids: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: traced on real tensors (the real-data fallback) none of which was filled at random: the
    #: sizes a value decided (``nonzero``, a boolean mask) are those of the given values
    ran_on_given_values: bool = False
    #: value id → its storage's elements (flat, CPU) for the given input values the bound may
    #: read (:mod:`torchroofline.given`); None: the bound is for any input values
    given: Mapping[int, torch.Tensor] | None = None
    #: a training step's tensor roles; None for an inference trace
    step: StepTensors | None = None
    #: (kind, tensor) for every storage that exists before the first op, each once: the
    #: model's parameters and buffers (used or not) and the forward arguments; kind is
    #: "parameters", "buffers" or "inputs" (what the memory timeline starts from)
    resident: tuple[tuple[str, TensorRef], ...] = ()
    #: whether the model returns any tensor (False: ``forward`` returned None or Python
    #: numbers, so nothing it computes is kept)
    returns_tensor: bool = True


def largest_per_value(refs: Iterable[TensorRef]) -> tuple[TensorRef, ...]:
    """Each value once (a value read twice costs once), at the largest view of it among
    ``refs`` with the elements of all its views united (``x[:, :512] + x[:, 512:]`` reads all
    of ``x``)."""
    refs = tuple(refs)
    if len({ref.value_id for ref in refs}) == len(refs):  # each value once: nothing to unite
        return refs
    views: dict[int, list[TensorRef]] = {}
    for ref in refs:
        views.setdefault(ref.value_id, []).append(ref)
    united = []
    for group in views.values():
        largest = max(group, key=lambda ref: ref.elements)
        if len(group) > 1:
            largest = dataclasses.replace(largest, elements=united_elements(group))
        united.append(largest)
    return tuple(united)


def base_name(func: Any) -> str:
    """``aten.add_.Tensor`` → ``"add"``: the key of the cost registry (in-place shares a rule)."""
    name = func.overloadpacket.__name__
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name
