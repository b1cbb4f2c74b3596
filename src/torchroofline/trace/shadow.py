"""Real values of the small constants a model builds while it is built on fake tensors.

KernelBench problems are built under ``FakeTensorMode`` (a ``torch.randn(huge)`` weight costs
nothing), so a causal mask that ``__init__`` registers as ``torch.tril(torch.ones(n, n))`` is a
fake tensor whose values the bound never sees, and ``att.masked_fill(mask == 0, -inf)`` would
look like a data mask. While the model is built, :class:`ConstantShadow` runs for real every op
whose tensor inputs are all known, that draws no random numbers and whose outputs are small
(the factories ``ones``, ``arange``, ``eye`` and what is computed from them), and remembers the
value of each fake tensor it made. Outputs past :data:`CONSTANT_LIMIT_ELEMENTS` up to
:data:`INDEX_LIMIT_ELEMENTS` (``torch.arange(5 * 10**7) % 3 == 0``) are kept as their recipe
(:class:`_Recipe`: the op and the inputs' values or recipes), made for real only when a
buffer's value is asked. :func:`known_value` answers for a buffer: its value if it is a small
real tensor or a fake one the shadow saw built, within the limits the demand walk evaluates
values to (an index or mask to 64 M elements, float data to 4 M). The demand walk reads these
values (``Trace.constants``); weights and inputs are never taken as known.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from .fast_fake import FACTORIES, direct_view, made_by_factory, op_leaves

#: Elements a constant may have to be kept for real (a 2048 × 2048 causal mask is 4 M).
CONSTANT_LIMIT_ELEMENTS = 1 << 22
#: Elements an integer or boolean constant may have to be known (a mask over a whole big
#: tensor), as the demand walk evaluates values (plan/demand/constants.py): kept as a recipe
#: past :data:`CONSTANT_LIMIT_ELEMENTS`.
INDEX_LIMIT_ELEMENTS = 1 << 26


@dataclass(frozen=True, eq=False)
class _Recipe:
    """A constant too big to keep for real while the model is built: output ``index`` of
    ``func`` on ``args`` and ``kwargs``, whose tensors are the inputs' values or recipes."""

    func: Any
    args: tuple
    kwargs: dict
    index: int

    def made(self) -> torch.Tensor:
        """The value, made for real (on the CPU)."""
        args, kwargs = tree_map(_made, (self.args, self.kwargs))
        with unset_fake_temporarily():
            values = self.func(*args, **kwargs)
        return [leaf for leaf in tree_leaves(values) if isinstance(leaf, torch.Tensor)][self.index]

    def uses(self, value: Any) -> bool:
        """Whether ``value`` (a tensor or recipe) goes into this one, however deep."""
        return any(
            leaf is value or (isinstance(leaf, _Recipe) and leaf.uses(value))
            for leaf in tree_leaves((self.args, self.kwargs))
        )


def _made(leaf: Any) -> Any:
    return leaf.made() if isinstance(leaf, _Recipe) else leaf



class _Shadows:
    """Real values keyed by the identity of the fake tensor each shadows; an entry goes when its
    tensor does. (A ``WeakKeyDictionary`` compares keys with ``==``, which on tensors is
    element-wise: looking up any buffer of more than one element raised.)"""

    def __init__(self) -> None:
        self._values: dict[int, torch.Tensor] = {}

    def __contains__(self, tensor: torch.Tensor) -> bool:
        return id(tensor) in self._values

    def __getitem__(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._values[id(tensor)]

    def __setitem__(self, tensor: torch.Tensor, value: torch.Tensor) -> None:
        if id(tensor) not in self._values:
            weakref.finalize(tensor, self._values.pop, id(tensor), None)
        self._values[id(tensor)] = value

    def get(self, tensor: torch.Tensor) -> torch.Tensor | None:
        return self._values.get(id(tensor))

    def forget(self, tensor: torch.Tensor) -> None:
        """Drop ``tensor``'s value and those of its views (the values that share its storage):
        an unknown write to it changes them all."""
        value = self._values.pop(id(tensor), None)
        if value is None:
            return
        if isinstance(value, _Recipe):  # its views are recipes that use it
            views = [k for k, v in self._values.items() if isinstance(v, _Recipe) and v.uses(value)]
        else:
            storage = value.untyped_storage().data_ptr()
            views = [k for k, v in self._values.items()
                     if not isinstance(v, _Recipe) and v.untyped_storage().data_ptr() == storage]
        for key in views:
            del self._values[key]


_SHADOWS = _Shadows()


def _small(tensor: torch.Tensor) -> bool:
    return tensor.numel() <= CONSTANT_LIMIT_ELEMENTS


def _recordable(tensor: torch.Tensor) -> bool:
    return tensor.numel() <= INDEX_LIMIT_ELEMENTS


def _knowable(tensor: torch.Tensor) -> bool:
    """Within the limits the demand walk evaluates values to: 4 M floats, 64 M others."""
    return _small(tensor) or (not tensor.is_floating_point() and _recordable(tensor))


class ConstantShadow(TorchDispatchMode):
    """Entered inside a ``FakeTensorMode`` while a model is built: keeps the real value of
    every small, non-random fake tensor computed only from constants."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if func in _SELF_ONLY_WRITES and _written_alone(args, kwargs):
            # an initializer's draw or fill on a fake tensor: no metadata changes, so the fake
            # dispatch (most of building a model's cost) is skipped where the value is unknown
            # or the write is a fill, made for real on the known value and on the fake mode's
            # constant (a batch norm's step count, zeroed), as the mode writes it
            written, value = args[0], _SHADOWS.get(args[0])
            if value is None and written.constant is None:
                return written
            if not _random(func) and (value is None or isinstance(value, torch.Tensor)):
                with unset_fake_temporarily():
                    for known in (value, written.constant):
                        if known is not None:
                            func(known, *args[1:], **kwargs)
                return written
        fast = _FAST_FAKE.get(func)
        output = fast(func, args, kwargs) if fast is not None else None
        if output is None:
            output = func(*args, **kwargs)
        made = [leaf for leaf in op_leaves(output) if isinstance(leaf, FakeTensor)]
        inputs = [leaf for leaf in op_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
        random = _random(func) or "empty" in func.__name__
        to_real = {id(t): value for t in inputs if (value := _constant(t)) is not None}
        if random or not made or not all(map(_recordable, made)) or len(to_real) < len(inputs):
            if func._schema.is_mutable:  # an unknown write makes a known value unknown
                for tensor in inputs:
                    _SHADOWS.forget(tensor)
            return output

        def real(leaf: Any) -> Any:
            if isinstance(leaf, torch.Tensor):
                return to_real[id(leaf)]
            return torch.device("cpu") if isinstance(leaf, torch.device) else leaf

        real_args, real_kwargs = tree_map(real, (args, kwargs))
        if not all(map(_small, made)) or any(
            isinstance(leaf, _Recipe) for leaf in tree_leaves((real_args, real_kwargs))
        ):
            return self._recorded(func, real_args, real_kwargs, made, output)
        try:
            with unset_fake_temporarily():
                values = func(*real_args, **real_kwargs)
        except Exception:  # noqa: BLE001 — an op the CPU cannot run leaves its output unknown
            return output
        real_made = [leaf for leaf in tree_leaves(values) if isinstance(leaf, torch.Tensor)]
        for fake, value in zip(made, real_made, strict=False):
            _SHADOWS[fake] = value
        return output

    @staticmethod
    def _recorded(func: Any, args: tuple, kwargs: dict, made: list, output: Any) -> Any:
        """Outputs too big to keep for real, or made from such, kept as recipes; an in-place
        write to one (a recipe cannot replay it) makes what it writes unknown."""
        for index, fake in enumerate(made):
            if func._schema.is_mutable:
                _SHADOWS.forget(fake)
            else:
                _SHADOWS[fake] = _Recipe(func, args, kwargs, index)
        return output


#: In-place ops whose one tensor is the one they write, and which keep its metadata: what
#: ``nn.init`` and ``reset_parameters`` call on every weight while a model is built.
_SELF_ONLY_WRITES = frozenset({
    torch.ops.aten.uniform_.default,
    torch.ops.aten.normal_.default,
    torch.ops.aten.zero_.default,
    torch.ops.aten.fill_.Scalar,
    torch.ops.aten.bernoulli_.float,
    torch.ops.aten.exponential_.default,
    torch.ops.aten.random_.default,
    getattr(torch.ops.aten.random_, "from"),  # a keyword in Python
    torch.ops.aten.random_.to,
})


def _written_alone(args: tuple, kwargs: dict) -> bool:
    """Whether the op writes a fake tensor and reads no other tensor."""
    written = args[0] if args else None
    return (
        isinstance(written, FakeTensor)
        and not any(isinstance(leaf, torch.Tensor) for leaf in op_leaves((args[1:], kwargs)))
    )


def _random(func: Any) -> bool:
    return torch.Tag.nondeterministic_seeded in func.tags


def _fake_mode_below() -> FakeTensorMode | None:
    """The fake mode the shadow runs on, where no other mode is between them (one that is must
    see every op)."""
    if torch._C._len_torch_dispatch_stack() != 1:
        return None
    mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
    return mode if isinstance(mode, FakeTensorMode) and mode.shape_env is None else None


def _fake_factory(func: Any, args: tuple, kwargs: dict) -> FakeTensor | None:
    """A factory's fake output made as FakeTensorMode makes it
    (:func:`~.fast_fake.made_by_factory`; its dispatch is ~0.7 ms a call with the cache off, as
    while a model is built); None where the mode must make it."""
    mode = _fake_mode_below()
    return None if mode is None else made_by_factory(mode, func, args, kwargs)


def _fake_detached(func: Any, args: tuple, kwargs: dict) -> FakeTensor | None:
    """``detach`` of a fake tensor whose value is unknown (``nn.Parameter`` detaches each
    weight it wraps), made by its own kernel (:func:`~.fast_fake.direct_view`); None where
    FakeTensorMode must make it or the shadow must see it (a known value's view)."""
    mode = _fake_mode_below()
    if mode is None or (args and isinstance(args[0], FakeTensor) and args[0] in _SHADOWS):
        return None
    with unset_fake_temporarily():
        return direct_view(mode, func, args, kwargs)


def _fake_lifted(func: Any, args: tuple, kwargs: dict) -> FakeTensor | None:
    """``lift_fresh`` of a one-element real tensor (``torch.tensor(0)``: a batch norm's step
    count) made as FakeTensorMode makes it (a fake tensor with a copy of it as its constant)
    without converting the real tensor (~1 ms a call); None where the mode must make it."""
    mode = _fake_mode_below()
    source = args[0] if len(args) == 1 and not kwargs else None
    if (mode is None or type(source) is not torch.Tensor or source.requires_grad
            or not mode.may_turn_const(source)):
        return None
    with unset_fake_temporarily():
        meta = torch.empty_strided(source.shape, source.stride(), dtype=source.dtype,
                                   device="meta")
        constant = source.clone()
    return FakeTensor(mode, meta, source.device, constant=constant)


#: Ops whose fake outputs the shadow makes itself, by op (None: FakeTensorMode makes them).
_FAST_FAKE: dict[Any, Any] = {
    **dict.fromkeys(FACTORIES, _fake_factory),
    torch.ops.aten.detach.default: _fake_detached,
    torch.ops.aten.lift_fresh.default: _fake_lifted,
}


def _constant(tensor: torch.Tensor) -> torch.Tensor | _Recipe | None:
    """The value of an input of an op run while the model is built: the shadow's (a value or
    a recipe) for a fake tensor it made, the tensor itself for a small real one
    (``torch.tensor(2.0)`` lifts one)."""
    if isinstance(tensor, FakeTensor):
        return _SHADOWS.get(tensor)
    return None if tensor.is_meta or not _small(tensor) else tensor


def known_value(tensor: torch.Tensor) -> torch.Tensor | None:
    """The real value of a model's buffer: itself if it is a real tensor within the limits the
    demand walk evaluates values to, the shadow's (its recipe made, if it is one) if
    :class:`ConstantShadow` saw it built; None when unknown (random, too big, or from data)."""
    if isinstance(tensor, FakeTensor):
        value = _SHADOWS.get(tensor)
        return value.made() if isinstance(value, _Recipe) and _knowable(tensor) else (
            None if isinstance(value, _Recipe) else value
        )
    if tensor.is_meta or not _knowable(tensor):
        return None
    return tensor.detach()
