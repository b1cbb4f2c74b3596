"""Real values of the small constants a model builds while it is built on fake tensors.

KernelBench problems are built under ``FakeTensorMode`` (a ``torch.randn(huge)`` weight costs
nothing), so a causal mask that ``__init__`` registers as ``torch.tril(torch.ones(n, n))`` is a
fake tensor whose values the bound never sees, and ``att.masked_fill(mask == 0, -inf)`` would
look like a data mask. While the model is built, :class:`ConstantShadow` runs for real every op
whose tensor inputs are all known, that draws no random numbers and whose outputs are small
(the factories ``ones``, ``arange``, ``eye`` and what is computed from them), and remembers the
value of each fake tensor it made. :func:`known_value` answers for a buffer: its value if it
is a small real tensor or a fake one the shadow saw built. The demand walk reads these values
(``Trace.constants``); weights and inputs are never taken as known.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

#: Elements a constant may have to be kept for real (a 2048 × 2048 causal mask is 4 M).
CONSTANT_LIMIT_ELEMENTS = 1 << 22

_SHADOWS: weakref.WeakKeyDictionary[torch.Tensor, torch.Tensor] = weakref.WeakKeyDictionary()


def _small(tensor: torch.Tensor) -> bool:
    return tensor.numel() <= CONSTANT_LIMIT_ELEMENTS


class ConstantShadow(TorchDispatchMode):
    """Entered inside a ``FakeTensorMode`` while a model is built: keeps the real value of
    every small, non-random fake tensor computed only from constants."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        output = func(*args, **kwargs)
        made = [leaf for leaf in tree_leaves(output) if isinstance(leaf, FakeTensor)]
        inputs = [leaf for leaf in tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
        random = torch.Tag.nondeterministic_seeded in func.tags or "empty" in func.__name__
        if random or not made or not all(map(_small, made)) or any(
            t not in _SHADOWS for t in inputs
        ):
            if func._schema.is_mutable:  # an unknown write makes a known value unknown
                for tensor in inputs:
                    _SHADOWS.pop(tensor, None)
            return output
        to_real = {id(t): _SHADOWS[t] for t in inputs}

        def real(leaf: Any) -> Any:
            if isinstance(leaf, torch.Tensor):
                return to_real[id(leaf)]
            return torch.device("cpu") if isinstance(leaf, torch.device) else leaf

        real_args, real_kwargs = tree_map(real, (args, kwargs))
        try:
            with unset_fake_temporarily():
                values = func(*real_args, **real_kwargs)
        except Exception:  # noqa: BLE001 — an op the CPU cannot run leaves its output unknown
            return output
        real_made = [leaf for leaf in tree_leaves(values) if isinstance(leaf, torch.Tensor)]
        for fake, value in zip(made, real_made, strict=False):
            _SHADOWS[fake] = value
        return output


def known_value(tensor: torch.Tensor) -> torch.Tensor | None:
    """The real value of a model's buffer: itself if it is a small real tensor, the shadow's if
    :class:`ConstantShadow` saw it built; None when unknown (random, big, or from data)."""
    if isinstance(tensor, FakeTensor):
        return _SHADOWS.get(tensor)
    if tensor.is_meta or not _small(tensor):
        return None
    return tensor.detach()
