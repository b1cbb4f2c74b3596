"""Converting the model and its inputs into the trace's tensors (fake, meta or real), and
checking what the user passed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import (
    FakeTensor,
    FakeTensorMode,
    unset_fake_temporarily,
)

from .schema import _tensors
from .shadow import known_value
from .values import local

#: Seed of the values the real-data fallback puts in place of fake and meta tensors: a branch
#: on them (``if x.sum() > 0``) takes the same side on every run, so the figures do too.
FALLBACK_FILL_SEED = 0


def _module_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers by qualified name, tied ones under every name."""
    tensors = dict(model.named_parameters(remove_duplicate=False))
    tensors.update(model.named_buffers(remove_duplicate=False))
    return tensors


def _plain_tensor_attributes(model: nn.Module) -> list[tuple[nn.Module, str, torch.Tensor]]:
    """Tensors kept as plain attributes (not parameters or buffers) of any submodule."""
    return [
        (module, name, value)
        for module in model.modules()
        for name, value in vars(module).items()
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
    ]


class _Converter:
    """Turns real, meta or foreign-fake tensors into tensors of the trace (fake or real)."""

    def __init__(self, fake_mode: FakeTensorMode | None, device: str,
                 shapes_over_bytes: int | None = None) -> None:
        self.fake_mode = fake_mode
        self.device = device
        #: real-data runs only: meta tensors, and fake ones over this many bytes, become
        #: meta (shapes whose values are unknown) instead of being filled at random
        self.shapes_over_bytes = shapes_over_bytes
        self._done: dict[int, torch.Tensor] = {}
        self._storages: dict[tuple[int, torch.dtype], torch.Tensor] = {}
        #: storage key of a converted buffer → its storage's known elements (flat, CPU)
        self.known_storages: dict[int, torch.Tensor] = {}
        #: whether a fake or meta tensor was replaced by random values (the real fallback)
        self.filled_at_random = False
        #: those values' generator: the same draws on every trace (:data:`FALLBACK_FILL_SEED`)
        self._fill = torch.Generator().manual_seed(FALLBACK_FILL_SEED)

    def buffer(self, tensor: torch.Tensor) -> torch.Tensor:
        """Convert a model's buffer (or plain tensor attribute), keeping its value where it is
        a known constant (:func:`shadow.known_value`); parameters and inputs are data."""
        converted = self(tensor)
        with unset_fake_temporarily():  # the caller may convert inside the fake mode
            value = known_value(tensor)
        if value is not None and not isinstance(tensor, nn.Parameter):
            _know(self.known_storages, converted, value)
        return converted

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        if id(tensor) not in self._done:
            self._done[id(tensor)] = self._convert(tensor)
        return self._done[id(tensor)]

    def _convert(self, tensor: torch.Tensor) -> torch.Tensor:
        held = local(tensor)
        if isinstance(held, FakeTensor) and held.fake_mode is self.fake_mode:
            return tensor  # made in the trace's mode already (a distributed model's shards)
        if self.fake_mode is None:
            if _kept_as_shape(tensor, self.shapes_over_bytes):
                return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype,
                                           device="meta")
            if isinstance(tensor, FakeTensor) or tensor.is_meta:
                self.filled_at_random = True
                return _random_like(tensor, self._fill)
            if tensor.is_inference():  # made under inference_mode: see :meth:`_plain_copy`
                return self._plain_copy(tensor)
            return tensor.detach()
        # views of one storage (two inputs sliced from one tensor, tied weights) stay views of
        # one fake storage, so the bound reads shared elements once
        key = (tensor.untyped_storage()._cdata, tensor.dtype)
        with self.fake_mode:
            if key not in self._storages:
                elements = tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1)
                if tensor.storage_offset() == 0 and elements == _extent(tensor):
                    # the whole storage (a parameter, most often): made as it is, which fake
                    # mode does ~6× faster than a flat storage and a strided view of it
                    made = _fake_empty(self.fake_mode, tensor, self.device)
                    self._storages[key] = made
                    return made
                self._storages[key] = torch.empty(
                    elements, dtype=tensor.dtype, device=self.device
                )
            return self._storages[key].as_strided(
                tensor.shape, tensor.stride(), tensor.storage_offset()
            )


    def _plain_copy(self, tensor: torch.Tensor) -> torch.Tensor:
        """A copy of an inference tensor that is none: ops on an inference tensor skip
        autograd's dispatch key, where composite ops decompose (``aten.linear`` would reach the
        recorder whole). Views of one storage stay views of one copy."""
        key = (tensor.untyped_storage()._cdata, tensor.dtype)
        if key not in self._storages:
            elements = tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1)
            self._storages[key] = tensor.as_strided((elements,), (1,), 0).clone()
        return self._storages[key].as_strided(
            tensor.shape, tensor.stride(), tensor.storage_offset()
        )


def _fake_empty(fake_mode: FakeTensorMode, like: torch.Tensor, device: str) -> FakeTensor:
    """A fake tensor of ``like``'s shape, strides and dtype on ``device``, made as the fake
    mode's factories make theirs (a meta tensor wrapped) without dispatching one: a factory's
    dispatch misses the fake mode's cache for each new shape (~0.4 ms a parameter)."""
    with unset_fake_temporarily():
        meta = torch.empty_strided(like.shape, like.stride(), dtype=like.dtype, device="meta")
    return fake_mode.fake_tensor_converter.from_meta_and_device(
        fake_mode, meta, torch.device(device)
    )


def _extent(tensor: torch.Tensor) -> int:
    """Elements from a tensor's first to its last, in storage order (0 when empty)."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(),
                                                               strict=True))


def _random_like(tensor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Real data standing in for a fake/meta tensor in the real-data fallback: normal draws
    from ``generator`` for a floating tensor, zeros otherwise."""
    if tensor.is_floating_point():
        return torch.randn(tensor.shape, dtype=tensor.dtype, generator=generator)
    return torch.zeros(tensor.shape, dtype=tensor.dtype)


def _kept_as_shape(tensor: torch.Tensor, shapes_over_bytes: int | None) -> bool:
    """Whether a real-data trace keeps ``tensor`` as a meta shape: a meta tensor, or a fake
    one over ``shapes_over_bytes`` (never, when that is None)."""
    if shapes_over_bytes is None:
        return False
    if isinstance(tensor, FakeTensor):
        return tensor.numel() * tensor.element_size() > shapes_over_bytes
    return tensor.is_meta


def _materialized_bytes(
    model: nn.Module, inputs: Sequence[Any], shapes_over_bytes: int | None = None
) -> int:
    """Bytes of the real tensors a real-data trace would have to build: the fake and meta
    ones it does not keep as shapes (:func:`_kept_as_shape`)."""
    tensors = list(_module_tensors(model).values()) + _tensors(inputs)
    tensors += [value for _, _, value in _plain_tensor_attributes(model)]
    unique = {id(t): t for t in tensors}.values()
    return sum(
        t.numel() * t.element_size() for t in unique
        if (isinstance(t, FakeTensor) or t.is_meta) and not _kept_as_shape(t, shapes_over_bytes)
    )


@contextlib.contextmanager
def _swapped_attributes(
    attributes: Sequence[tuple[nn.Module, str, torch.Tensor]], convert: _Converter
) -> Iterator[None]:
    for module, name, value in attributes:
        setattr(module, name, convert.buffer(value))
    try:
        yield
    finally:
        for module, name, value in attributes:
            setattr(module, name, value)


def _know(known_storages: dict[int, torch.Tensor], tensor: torch.Tensor, value: Any) -> None:
    """Keep ``value`` as the known elements of ``tensor``'s part of its storage (flat, CPU)."""
    storage = tensor.untyped_storage()
    with unset_fake_temporarily():
        flat = known_storages.setdefault(
            storage._cdata,
            torch.zeros(storage.nbytes() // max(tensor.element_size(), 1), dtype=tensor.dtype),
        )
        flat.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset()).copy_(value)
