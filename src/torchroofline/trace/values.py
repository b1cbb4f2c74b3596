"""The trace's value table: which version of which storage each tensor an op reads or writes
holds (:class:`ValueTable`), and a tensor as a :class:`~.refs.TensorRef` (:func:`tensor_ref`)."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .refs import TensorRef
from .regions import distinct_offsets


class ValueTable:
    """Maps storages to the current version's value id; keeps storages alive so ids never repeat."""

    def __init__(self) -> None:
        self._current: dict[int, int] = {}
        self._alive: list[Any] = []
        self._next_id = 0
        self.input_value_ids: set[int] = set()
        self.initial_value: dict[int, int] = {}
        #: storage key → known elements of a buffer's storage (:meth:`_Converter.buffer`)
        self.known_storages: dict[int, torch.Tensor] = {}
        #: (kind, tensor) of the storages that exist before the first op (Trace.resident)
        self.resident: tuple[tuple[str, TensorRef], ...] = ()
        #: Trace.argument_value_ids, Trace.module_value_ids, Trace.ran_on_given_values
        self.argument_value_ids: tuple[int, ...] = ()
        self.module_value_ids: dict[str, int] = {}
        self.ran_on_given_values = False

    def constants(self) -> dict[int, torch.Tensor]:
        """value id → known elements, for the known buffers the program read."""
        return {
            self.initial_value[key]: flat
            for key, flat in self.known_storages.items()
            if key in self.initial_value
        }

    def hold(self, tensor: torch.Tensor) -> None:
        """Keep ``tensor``'s storage alive for the trace: its key then names no later storage
        (a fake copy the mode made of a real index, freed, leaves its address to the next)."""
        self._alive.append(tensor.untyped_storage())

    def _new_value(self, key: int) -> int:
        self._next_id += 1
        self._current[key] = self._next_id
        return self._next_id

    def read(self, tensor: torch.Tensor) -> TensorRef:
        storage = tensor.untyped_storage()
        key = storage._cdata
        value = self._current.get(key)
        if value is None:
            if key not in self.initial_value:
                self._alive.append(storage)
            value = self._new_value(key)
            self.input_value_ids.add(value)
            self.initial_value[key] = value
        return tensor_ref(tensor, value, storage)

    def write(self, tensor: torch.Tensor) -> TensorRef:
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key not in self._current and key not in self.initial_value:
            self._alive.append(storage)
        return tensor_ref(tensor, self._new_value(key), storage)

    def current(self, tensor: torch.Tensor) -> int | None:
        return self._current.get(local(tensor).untyped_storage()._cdata)

    def output_ref(self, tensor: torch.Tensor) -> TensorRef | None:
        """The returned view ``tensor`` as a reference to its storage's current value."""
        tensor = local(tensor)
        storage = tensor.untyped_storage()
        value = self._current.get(storage._cdata)
        return None if value is None else tensor_ref(tensor, value, storage)

    def mutated_initial_values(self) -> set[int]:
        """Final values of storages that existed before the trace and were written in it."""
        return {
            self._current[key]
            for key, first in self.initial_value.items()
            if self._current[key] != first
        }


@functools.lru_cache(maxsize=4096)  # called for every tensor an op reads or writes
def local(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor this rank holds of a tensor subclass that wraps one (a DTensor's local
    shard, the first of its ``__tensor_flatten__`` attributes); a plain tensor itself. The
    ops of a distributed trace run on these (:mod:`.distributed`)."""
    while is_traceable_wrapper_subclass(tensor):
        tensor = getattr(tensor, tensor.__tensor_flatten__()[0][0])
    return tensor


@functools.lru_cache(maxsize=4096)  # every tensor an op reads or writes; few distinct layouts
def _touched_elements(
    shape: tuple[int, ...], strides: tuple[int, ...], storage_elements: int
) -> int:
    """Distinct elements a strided view touches (:func:`~.regions.distinct_offsets`: stride-0
    dims do not multiply, overlapping windows hold each element once), never more than its
    storage."""
    elements = distinct_offsets(shape, strides)
    return min(elements, storage_elements) if storage_elements else elements


#: dtype → (its name, e.g. ``"float32"``; bytes per element; whether it is floating point or
#: complex), filled as dtypes are met
_DTYPE_FACTS: dict[torch.dtype, tuple[str, int, bool]] = {}


def tensor_ref(tensor: torch.Tensor, value_id: int, storage: Any) -> TensorRef:
    """``tensor`` as a view of ``storage`` (its untyped storage) holding version ``value_id``."""
    dtype = tensor.dtype
    facts = _DTYPE_FACTS.get(dtype)
    if facts is None:
        facts = _DTYPE_FACTS[dtype] = (
            str(dtype).removeprefix("torch."), tensor.element_size(),
            dtype.is_floating_point or dtype.is_complex,
        )
    name, itemsize, is_float = facts
    shape = tuple(tensor.shape)
    strides = tensor.stride()
    storage_elements = storage.nbytes() // max(itemsize, 1)
    return TensorRef(
        value_id=value_id,
        storage_id=storage._cdata,
        shape=shape,
        dtype=name,
        elements=_touched_elements(shape, strides, storage_elements),
        is_float=is_float,
        itemsize=itemsize,
        offset=tensor.storage_offset(),
        strides=strides,
        storage_elements=storage_elements,
    )
