"""The backwards walk: from the kept values through every op's demand rule to the demanded
graph inputs, and the :class:`Necessary` work the bound charges."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from ...costs import (
    NO_FLOPS,
    Category,
    FlopCount,
    OpRecord,
    aten,
    lookup,
    tensor_bytes,
)
from ...trace.refs import TensorRef, Trace, TracedOp
from ...trace.regions import (
    NOWHERE,
    Region,
    box_size,
    full_box,
    set_size,
)
from ...trace.storages import (
    Storages,
)
from ._core import (
    DEMAND_RULES,
    LIBRARY_DEMAND,
    SHORTCUT_STRUCTURES,
    Demand,
    Rule,
    _Context,
    _one_of,
    _op_set,
    _proportional,
)
from .constants import CONSTANT_LIMIT_ELEMENTS, INDEX_LIMIT_ELEMENTS, known_values
from .reductions import pointwise_demand
from .selection import _data_chosen_write
from .sized import _deciding_reads, _sized_by_data
from .structures import STRUCTURE_RULES


@dataclass(frozen=True)
class Necessary:
    """The bound's work: each op with its necessary FLOPs, the demanded elements of each input
    storage and the kept elements of each written storage (``TensorRef.elements``)."""

    ops: tuple[OpRecord, ...]
    input_refs: tuple[TensorRef, ...]
    output_refs: tuple[TensorRef, ...]
    structures: tuple[str, ...]
    dead_ops: int
    #: indices into ``Trace.ops`` of the ops a structure rule priced inside a later op (a
    #: product moved into the column sum that reads it): charged nothing themselves, not dead
    absorbed_ops: tuple[int, ...] = ()
    #: (index into ``Trace.ops``, structure) of each op where a structure rule took an
    #: algebraic shortcut (:data:`._core.SHORTCUT_STRUCTURES`), a reduced product's sum included
    shortcut_ops: tuple[tuple[int, str], ...] = ()
    #: "op in 'module'" of each op on a given value's index path too big to run for real
    #: (:func:`.constants.too_big_to_evaluate`): the bound for any values holds there
    unevaluated: tuple[str, ...] = ()
    #: the executed FLOPs of every op, and those of them whose results no kept value uses
    #: (each op's FLOPs times the share of its output nothing kept needs)
    executed_flops: int = 0
    unkept_flops: int = 0
    #: the value nearest the kept outputs of which they keep half or less: what makes the
    #: unkept work unkept ("transformer.layers.5.norm2's output (native_layer_norm,
    #: 197×10×512): 0.51% kept, as mlp_head.0 (addmm) reads it")
    narrowed_at: str | None = None
    #: the model returns no tensor (``forward`` returned None, or Python numbers from
    #: ``.item()``): the bound is only what it keeps otherwise (in-place writes to its inputs
    #: or buffers), 0 where it keeps nothing
    returns_no_tensor: bool = False

    def bytes(self, float_bytes: int) -> int:
        """Compulsory HBM bytes at a float element size of ``float_bytes``."""
        return sum(tensor_bytes(ref, float_bytes) for ref in (*self.input_refs, *self.output_refs))

    @property
    def unkept_share(self) -> float:
        """The share (0..1) of the executed FLOPs that feed no kept value."""
        return self.unkept_flops / self.executed_flops if self.executed_flops else 0.0

    @property
    def constant_output(self) -> bool:
        """Whether the kept outputs need no element of any input (``x - x.max(1, keepdim=True)``
        over a dim of size 1 is zeros whatever ``x`` holds): the bound is the writing of a
        constant, not a kernel's worth of work. Empty outputs are not one: nothing is written
        (:attr:`keeps_empty_tensors`)."""
        return bool(self.output_refs) and not self.input_refs and not self.keeps_empty_tensors

    @property
    def keeps_empty_tensors(self) -> bool:
        """Whether every kept output has no elements (a dim of size 0): nothing to compute."""
        return bool(self.output_refs) and all(0 in ref.shape for ref in self.output_refs)

    @property
    def notes(self) -> tuple[str, ...]:
        notes = [
            f"structured operand: {name} ({STRUCTURE_RULES[name].split(':')[0]})"
            for name in self.structures
        ]
        if self.returns_no_tensor:
            # an in-place write to an input (x.mul_(2)) and a value .item() hands the host
            # are kept: the note said "the bound is 0" beside a bound of 9.78 ns
            kept = ("the bound is what it keeps otherwise (in-place writes to inputs and "
                    "buffers, values .item() hands the host)"
                    if self.output_refs or self.input_refs
                    else "nothing is kept, so the bound is 0")
            notes.append(
                "the model returns no tensor (forward returned None or Python numbers): "
                f"{kept}; return the tensors it computes"
            )
        if self.keeps_empty_tensors:
            shapes = ", ".join(str(list(ref.shape)) for ref in self.output_refs)
            notes.append(
                f"the outputs have no elements (shape {shapes}): there is nothing to compute "
                "or write, so the bound is 0; check the input sizes"
            )
        if self.constant_output:
            notes.append(
                "the output is a constant: it needs no element of any input, so the bound is "
                "the writing of it and the executed work is all unkept"
            )
        elif self.unkept_share >= UNKEPT_NOTE_SHARE:
            where = f": {self.narrowed_at}" if self.narrowed_at else ""
            notes.append(
                f"{self.unkept_share:.1%} of the executed FLOPs feed no kept value, so the bound "
                f"charges them nothing{where}"
            )
        if self.dead_ops:
            notes.append(
                f"{self.dead_ops} op(s) feed no kept value (dead code or unused slices): "
                "the bound charges them nothing"
            )
        if self.unevaluated:
            notes.append(
                f"given values not evaluated at {', '.join(self.unevaluated)} (over "
                f"{CONSTANT_LIMIT_ELEMENTS:,} floats or {INDEX_LIMIT_ELEMENTS:,} indices): the "
                "bound falls back to any values there"
            )
        return tuple(notes)


@dataclass(frozen=True)
class Floor:
    """Work on data-sized values that every input needs all the same (:mod:`.routing`): the
    FLOPs of some ops (trace index → FLOPs), and the ops whose inputs of fixed size are
    needed (their rows may be any, but at least one)."""

    flops: Mapping[int, FlopCount]
    reads: frozenset[int]


#: The share of the executed FLOPs feeding no kept value above which the notes say so, and
#: where: a bound that far below the work run is read as a bug unless its reason is given.
UNKEPT_NOTE_SHARE = 0.5


def necessary_work(
    trace: Trace,
    records: Sequence[OpRecord],
    *,
    known: dict[int, torch.Tensor] | None = None,
    sizes_given: bool = False,
    shortcuts: bool = True,
    floor: Floor | None = None,
) -> Necessary:
    """Walk ``trace`` backwards from its kept values; see the module docstring. ``known``: the
    values rules may read (default: :func:`known_values` of shapes and constants);
    ``sizes_given``: the sizes values decided are those of the given inputs (the bound for
    them, :mod:`.given`), not sizes any input may make empty; ``shortcuts=False``: no
    structure rule takes an algebraic shortcut (:data:`._core.SHORTCUT_STRUCTURES`), the
    program as written;
    ``floor``: work on data-sized values that every input still needs (:mod:`.routing`)."""
    all_refs = [r for op in trace.ops for r in (*op.writes, *op.reads)] + list(trace.output_refs)
    storages = Storages(all_refs)
    producers = {w.value_id: op for op in trace.ops if not op.is_view for w in op.writes}
    previous = _previous_versions(trace.ops)
    demand: dict[int, Region] = {}
    #: the part of each value's demand that an op reads or the model returns (see _Context.read)
    read: dict[int, Region] = {}
    kept, kept_writes = _kept_regions(trace, storages, producers)
    if known is None:
        known = known_values(trace.ops, trace.constants)
    sized_by_data = {} if sizes_given else _sized_by_data(trace.ops, known)

    # the same layer's values, repeated, ask the same questions of regions: asked once each
    inside = functools.cache(_inside)

    def add(value_id: int, region: Region, read_part: Region) -> None:
        if region:
            demand[value_id] = demand.get(value_id, NOWHERE).union(region)
        if read_part:
            read[value_id] = read.get(value_id, NOWHERE).union(read_part)

    # final values of inputs and buffers the model overwrote: until an op reads them, only the
    # end state wants them, and what an op leaves unchanged there is already in memory
    input_storages = {r.storage_id for r in all_refs if r.value_id in trace.input_value_ids}
    in_place = {w.value_id for op in trace.ops for w in op.writes if w.storage_id in input_storages}
    for value_id, region in kept.items():
        add(value_id, region, NOWHERE if value_id in in_place else region)
    necessary_records = list(records)
    structures: list[str] = []
    dead = 0
    unkept = 0.0
    narrowed: tuple[int, float, Region] | None = None
    absorbed: list[int] = []
    absorbed_values: set[int] = set()
    shortcut_ops: list[tuple[int, str]] = []
    #: values a live op reads or the model keeps, however few of their elements
    used = set(trace.output_value_ids) | {ref.value_id for ref in trace.output_refs}
    readers = dict.fromkeys(used, 1)
    parts = _kept_parts(trace, storages)
    for op in trace.ops:
        for ref in op.reads if not op.is_view else ():
            readers[ref.value_id] = readers.get(ref.value_id, 0) + 1
    for index in range(len(trace.ops) - 1, -1, -1):
        op = trace.ops[index]
        if not op.writes and _one_of(op, HOST_READS):
            for ref in op.reads:
                if ref.value_id in producers:  # an input's value is copied, not computed
                    whole = storages.region_of(ref)
                    add(ref.value_id, whole, whole)
                    used.add(ref.value_id)
            continue
        if op.is_view or not op.writes:
            continue
        record = records[index]
        if record.category is Category.ZERO_COPY:
            # an in-place metadata op (transpose_, unsqueeze_…) makes a new version of the
            # same elements: what is demanded of it is demanded of the version before
            for write in op.writes:
                wanted = demand.pop(write.value_id, NOWHERE)
                read_wanted = read.pop(write.value_id, NOWHERE)
                source = previous.get(write.value_id, _handed_on(record, write))
                if source is not None:
                    add(source, wanted, read_wanted)
            necessary_records[index] = _with_flops(record, NO_FLOPS)
            continue
        outputs, read_outputs = [], []
        # rules of writes at positions chosen by data split old and new elements themselves
        splits_old_and_new = not _data_chosen_write(op)
        for write in op.writes:
            wanted = demand.pop(write.value_id, NOWHERE)
            read_wanted = read.pop(write.value_id, NOWHERE)
            written = storages.region_of(write)
            if splits_old_and_new:
                if write.value_id in previous:
                    add(
                        previous[write.value_id],
                        _outside(wanted, written),
                        _outside(read_wanted, written),
                    )
                total = write.storage_elements or write.elements
                read_wanted = inside(read_wanted, written, total)
                wanted = inside(wanted, written, total)
            outputs.append(storages.in_view(write, wanted))
            read_outputs.append(
                outputs[-1] if read_wanted == wanted else storages.in_view(write, read_wanted)
            )
        # an empty output sized by data (the fallback's zero-filled masks pick nothing) still
        # needs its deciding inputs when anything uses it: only they show it is empty
        empty_but_used = (
            op.writes[0].value_id in sized_by_data
            and op.writes[0].value_id in used
            and not any(math.prod(w.shape) for w in op.writes)
        )
        if not any(outputs) and not empty_but_used:
            if any(w.value_id in absorbed_values for w in op.writes):
                absorbed.append(index)
            else:
                dead += 1
                unkept += record.total_flops
            necessary_records[index] = _with_flops(record, NO_FLOPS)
            continue
        used.update(ref.value_id for ref in op.reads)
        context = _Context(
            op, record, tuple(outputs), producers, tuple(read_outputs), known, readers,
            shortcuts, parts,
        )
        if record.total_flops:
            kept_share = context.fraction
            unkept += record.total_flops * (1 - kept_share)
            if narrowed is None and kept_share <= UNKEPT_NOTE_SHARE:
                narrowed = (index, kept_share, outputs[0])
        # (most programs size nothing by data: then no value is looked up)
        sized_writes = bool(sized_by_data) and any(w.value_id in sized_by_data for w in op.writes)
        sized_reads = bool(sized_by_data) and any(r.value_id in sized_by_data for r in op.reads)
        rule = data_sized_demand if sized_writes and not sized_reads else _rule(op, record)
        result = rule(context)
        flops = result.flops
        if sized_reads or sized_writes:
            # on data-sized values, which any input may leave empty, unless a floor holds
            flops = NO_FLOPS if floor is None else floor.flops.get(index, NO_FLOPS)
        # an op computing a data-sized value (x[x > 0] + y) may compute nothing: its other
        # inputs may be needed nowhere (the data-sized ones lead back to what decides the size)
        may_be_empty = sized_writes and sized_reads and (floor is None or index not in floor.reads)
        host = _host_scalars(op, producers if trace.device == "cpu" else None)
        for position, (ref, region) in enumerate(zip(op.reads, result.inputs, strict=False)):
            if position not in host and (ref.value_id in sized_by_data or not may_be_empty):
                in_storage = storages.region_of(ref, region)
                add(ref.value_id, in_storage, in_storage)
        for ref, region in result.extra:
            if ref.value_id in sized_by_data or not may_be_empty:
                in_storage = storages.region_of(ref, region)
                add(ref.value_id, in_storage, in_storage)
        absorbed_values.update(result.absorbed)
        if result.structure in SHORTCUT_STRUCTURES:
            shortcut_ops.append((index, result.structure))
        if result.structure and result.structure not in structures:
            structures.append(result.structure)
        necessary_records[index] = _with_flops(record, flops)
    written_by_model = {v: r for v, r in kept_writes.items() if v not in sized_by_data}
    by_value = _representative(all_refs, storages)
    # a kept view of one part of each complex element (``z.real``) writes that part only
    parts = {ref.value_id: ref for ref in trace.output_refs if storages.picks_part(ref)}
    return Necessary(
        ops=tuple(necessary_records),
        input_refs=_counted(trace, demand, by_value),
        output_refs=_kept_refs(written_by_model, {**by_value, **parts}),
        structures=tuple(structures),
        dead_ops=dead,
        absorbed_ops=tuple(sorted(absorbed)),
        shortcut_ops=tuple(sorted(shortcut_ops)),
        executed_flops=sum(record.total_flops for record in records),
        unkept_flops=int(unkept),
        narrowed_at=None if narrowed is None else _narrowed_at(trace, *narrowed),
        returns_no_tensor=not trace.returns_tensor,
    )


def _kept_parts(trace: Trace, storages: Storages) -> dict[int, int]:
    """Complex value id → the part (0 real, 1 imaginary) that every read of it by an op and
    every view of it the model returns keeps, where all keep one and the same (``fft(x).imag``:
    a float view of every other float of the storage, from the first or the second)."""
    seen: dict[int, set[int | None]] = {}
    for ref in [r for op in trace.ops if not op.is_view for r in op.reads] + list(
        trace.output_refs
    ):
        halves = storages.unit(ref.storage_id) == 2 * ref.itemsize and storages.picks_part(ref)
        seen.setdefault(ref.value_id, set()).add(ref.offset % 2 if halves else None)
    return {
        value_id: part for value_id, found in seen.items()
        if len(found) == 1 and (part := next(iter(found))) is not None
    }


def _narrowed_at(trace: Trace, index: int, kept_share: float, kept: Region) -> str:
    """Where the kept outputs leave most of a value unused: the value op ``index`` writes, of
    which they keep ``kept_share`` (``kept``: that part, in the value's coordinates), and the
    first op that reads it (or the model's output)."""
    op = trace.ops[index]
    write = op.writes[0]
    reader = next(
        (later for later in trace.ops[index + 1:] if not later.is_view
         and any(ref.storage_id == write.storage_id for ref in later.reads)),
        None,
    )
    read_by = (
        f"as {reader.module_path or 'the model'} ({reader.base}) reads it" if reader is not None
        else "as the model returns a part of it"
    )
    shape = "×".join(map(str, write.shape))
    return (
        f"{op.module_path or 'the model'}'s output ({op.base}, {shape}) is {kept_share:.2%} "
        f"kept{_kept_slice(kept, write.shape)}, {read_by}"
    )


def _kept_slice(kept: Region, shape: Sequence[int]) -> str:
    """`` (1 of 197 along dim 1)``: the dims a one-box part of a value cuts, else ``""``."""
    if len(kept.boxes) != 1 or kept.opaque or len(kept.boxes[0]) != len(shape):
        return ""
    cut = [
        f"{set_size(index_set)} of {size} along dim {dim}"
        for dim, (index_set, size) in enumerate(zip(kept.boxes[0], shape, strict=True))
        if set_size(index_set) < size
    ]
    return f" ({', '.join(cut)})" if cut else ""


def _with_flops(record: OpRecord, flops: FlopCount) -> OpRecord:
    """``record`` charged ``flops`` (itself when it already is: most ops are wholly needed),
    the family its work may also run as kept (:attr:`FlopCount.alternative`)."""
    if record.flops is flops or record.flops == flops:  # (most rules return the same count)
        return record
    if record.flops.alternative is not None and flops.kind is record.flops.kind:
        flops = replace(flops, alternative=record.flops.alternative)
    return replace(record, flops=flops)


def _rule(op: TracedOp, record: OpRecord) -> Rule:
    """The demand rule of an ``op`` whose output sizes no value chose: its own, else the
    pointwise rule or :func:`_proportional` by category."""
    return lookup(DEMAND_RULES, op) or _library_rule(op) or (
        pointwise_demand if record.category is Category.POINTWISE else _proportional
    )


def _library_rule(op: TracedOp) -> Rule | None:
    """A library op's rule by its name (:data:`._core.LIBRARY_DEMAND`)."""
    if op.func is None or not LIBRARY_DEMAND:
        return None
    return LIBRARY_DEMAND.get(op.func.overloadpacket._qualified_op_name.replace("::", "."))


def data_sized_demand(context: _Context) -> Demand:
    """An op whose output sizes depend on values: any input may leave its output empty, so the
    values it picks are needed nowhere, but finding out which it picks needs its deciding
    inputs (its boolean masks, or every input when none is one): all of them for the whole
    output — an empty one is known only after every element — and for part of it at least one
    element each (the first positions examined may already yield that part). No FLOPs."""
    reads = context.op.reads
    deciding_ids = {id(ref) for ref in _deciding_reads(context.op)}
    deciding = [id(ref) in deciding_ids for ref in reads]
    whole = context.fraction >= 1.0 or not any(math.prod(w.shape) for w in context.op.writes)
    inputs = tuple(
        NOWHERE
        if not decides
        else Region.of([full_box(ref.shape)])
        if whole
        else Region(opaque=min(1, ref.elements))
        for ref, decides in zip(reads, deciding, strict=True)
    )
    return Demand(inputs, NO_FLOPS)


#: Ops that hand a value to the host (``.item()``, ``bool(t)``, ``torch.equal``): the Python
#: value they return steers the program (``y * x.abs().max().item()``), which the trace cannot
#: follow, so a value the program computed is kept as an output is (a program that drops it is
#: charged too); an input read so is a copy to the host, no kernel's read.
HOST_READS = _op_set([aten._local_scalar_dense, aten.equal])


def _host_scalars(op: TracedOp, computed: Mapping[int, TracedOp] | None = None) -> set[int]:
    """Positions of the reads that are 0-d CPU tensors: a CUDA kernel takes them by value as an
    argument (TensorIterator's CPU scalars), not from GPU memory. In a trace that ran on the
    CPU (fake CPU tensors, the real-data fallback) every tensor is there, so a value an op of
    the trace ``computed`` (producers by value id: ``x.sum()``) is on the device."""
    if all(ref.shape for ref in op.reads):  # no 0-d read: no need to collect the arguments
        return set()
    tensors = op.argument_tensors
    if len(tensors) != len(op.reads):  # an intercepted call: its reads are not its arguments
        return set()
    return {
        position
        for position, (tensor, ref) in enumerate(zip(tensors, op.reads, strict=True))
        if tensor.dim() == 0 and tensor.device.type == "cpu"
        and (computed is None or ref.value_id not in computed)
    }


def _inside(wanted: Region, written: Region, total: int) -> Region:
    """The part of ``wanted`` inside the ``written`` part of a storage of ``total`` elements."""
    if not written.boxes:
        return wanted
    result = NOWHERE
    for box in written.boxes:
        result = result.union(wanted.intersect_box(box, box_size(box), total))
    return result


def _outside(wanted: Region, written: Region) -> Region:
    if not written.boxes:
        return Region(opaque=wanted.count - written.count)
    result = wanted
    for box in written.boxes:
        result = result.minus_box(box)
    return result


def _handed_on(record: OpRecord, write: TensorRef) -> int | None:
    """The value a zero-copy op hands on as a tensor of a new storage laid out as the one
    tensor it reads (a collective's ``wait_tensor`` returns the buffer it waited for): what is
    demanded of the write is demanded of that read. None for any other op (a template such as
    ``empty_like`` reads nothing)."""
    if len(record.reads) != 1:
        return None
    ref = record.reads[0]
    layout = (ref.shape, ref.strides, ref.offset, ref.storage_elements)
    return ref.value_id if layout == (write.shape, write.strides, write.offset,
                                      write.storage_elements) else None


def _previous_versions(ops: Sequence[TracedOp]) -> dict[int, int]:
    """value id → the value of the same storage it overwrote (in-place and partial writes)."""
    latest: dict[int, int] = {}
    previous: dict[int, int] = {}
    for op in ops:
        for ref in op.reads:
            latest[ref.storage_id] = ref.value_id
        for ref in op.writes:
            if ref.storage_id in latest and latest[ref.storage_id] != ref.value_id:
                previous[ref.value_id] = latest[ref.storage_id]
            latest[ref.storage_id] = ref.value_id
    return previous


def _kept_regions(
    trace: Trace, storages: Storages, producers: dict[int, TracedOp]
) -> tuple[dict[int, Region], dict[int, Region]]:
    """What must be in memory at the end, per final value: the returned views of values the
    model computed, and every element the model overwrote in an input or buffer (what it left
    untouched is already there). Returns (the demand to walk back from, the elements that must
    be written: positions chosen by data may be none)."""
    kept: dict[int, Region] = {}
    written: dict[int, Region] = {}
    returned_values = set()
    initial_storages = {
        ref.storage_id
        for op in trace.ops
        for ref in op.reads
        if ref.value_id in trace.input_value_ids
    }
    for ref in trace.output_refs:
        returned_values.add(ref.value_id)
        if ref.storage_id in initial_storages or ref.value_id not in producers:
            continue  # an input (or what was overwritten in it, below) needs no other write
        kept[ref.value_id] = kept.get(ref.value_id, NOWHERE).union(storages.region_of(ref))
        written[ref.value_id] = kept[ref.value_id]
    final_of_storage = {}
    for op in trace.ops:
        for ref in op.writes:
            final_of_storage[ref.storage_id] = ref.value_id
    for op in trace.ops:
        for ref in op.writes:
            if ref.storage_id in initial_storages:
                final = final_of_storage[ref.storage_id]
                region = storages.region_of(ref)
                kept[final] = kept.get(final, NOWHERE).union(region)
                if not _data_chosen_write(op):
                    written[final] = written.get(final, NOWHERE).union(region)
    for value_id in trace.output_value_ids - returned_values - set(kept):
        if value_id in producers:  # returned without a recorded view: all of its writes
            writes = [w for w in producers[value_id].writes if w.value_id == value_id]
            for ref in writes:
                kept[value_id] = kept.get(value_id, NOWHERE).union(storages.region_of(ref))
            written[value_id] = kept[value_id]
    return kept, written


def _representative(all_refs: Sequence[TensorRef], storages: Storages) -> dict[int, TensorRef]:
    """A reference per value, in the element size its storage's regions count in."""
    by_value: dict[int, TensorRef] = {}
    for ref in all_refs:
        current = by_value.get(ref.value_id)
        unit = storages.unit(ref.storage_id)
        if current is None or (current.itemsize != unit and ref.itemsize == unit):
            by_value[ref.value_id] = ref
    return by_value


def _counted(
    trace: Trace, demand: dict[int, Region], by_value: dict[int, TensorRef]
) -> tuple[TensorRef, ...]:
    """Each graph input storage once, with its demanded elements (all its views united);
    ``by_value``: :func:`_representative`'s reference per value."""
    refs = []
    for value_id in sorted(trace.input_value_ids):
        region = demand.get(value_id)
        if region and value_id in by_value:
            refs.append(_with_elements(by_value[value_id], region.count))
    return tuple(refs)


def _kept_refs(
    kept: dict[int, Region], by_value: dict[int, TensorRef]
) -> tuple[TensorRef, ...]:
    """Each kept storage once, with the elements that must be written to it;
    ``by_value``: :func:`_representative`'s reference per value."""
    by_storage: dict[int, tuple[TensorRef, Region]] = {}
    for value_id, region in kept.items():
        ref = by_value.get(value_id)
        if ref is None:
            continue
        if ref.storage_id in by_storage:
            first, united = by_storage[ref.storage_id]
            by_storage[ref.storage_id] = (first, united.union(region))
        else:
            by_storage[ref.storage_id] = (ref, region)
    return tuple(_with_elements(ref, region.count) for ref, region in by_storage.values())


def _with_elements(ref: TensorRef, elements: int) -> TensorRef:
    """``ref`` counting ``elements`` (itself when it already does: most storages are wholly
    needed, and ``dataclasses.replace`` is slow)."""
    return ref if ref.elements == elements else replace(ref, elements=elements)
