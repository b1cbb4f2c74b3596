"""A problem's tensors made under KernelBench's seed without the data of the big ones.

A bound for the given values (:mod:`torchroofline.given`) reads small tensors: a router's
weight, the token ids, a page table, a triangular operand. They are drawn from the same
random generator as the big ones, often after them (``nn.Linear`` experts, then a router), so
they can be reproduced only by consuming the generator exactly as the real construction does.
:class:`ShapeOnlyDraws` runs the construction with each big tensor made as a meta tensor (a
shape, no data) and the generator advanced past its draw by replaying the same random op on a
bounded buffer, chunk by chunk: 16 MiB of memory for a 15 GB expert bank. The advance is owed,
not paid, until a later draw needs the generator, so big tensors drawn last cost nothing.

Chunked replay consumes the CPU generator exactly as one call does when every chunk but the
last is a multiple of 16 elements and the last has at least 16 (the vectorised normal and
uniform kernels redraw a short tail of 16): ``tests/trace/test_seeded.py`` checks the generator's
state after each registered op, dtype and size against the real call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from ..errors import TorchrooflineError

aten = torch.ops.aten

#: Elements replayed per chunk when the generator is advanced past a shape-only draw (a
#: multiple of 16; 16 MiB of float32).
ADVANCE_CHUNK_ELEMENTS = 1 << 22

#: Share of the data limit one tensor may take and still be made for real.
TENSOR_SHARE_OF_LIMIT = 4

#: Random ops whose draws can be replayed chunk by chunk, keyed by op packet. Each consumes
#: the generator per element (tested): factories by their ``size`` argument, the in-place and
#: ``_like`` ops by their first (tensor) argument.
REPLAYABLE_DRAWS = frozenset({
    aten.randn, aten.rand, aten.randint, aten.randn_like, aten.rand_like, aten.randint_like,
    aten.normal_, aten.uniform_, aten.random_, aten.bernoulli_, aten.exponential_,
    aten.cauchy_, aten.log_normal_, aten.geometric_,
})


class ShapeOnlyError(TorchrooflineError):
    """A construction that cannot be made with shape-only big tensors (a draw that cannot be
    replayed, a real tensor written from a shape-only one)."""


def _draws(func: Any) -> bool:
    return torch.Tag.nondeterministic_seeded in func.tags


def _chunk_sizes(elements: int, chunk: int = ADVANCE_CHUNK_ELEMENTS) -> Iterator[int]:
    """Sizes that replay ``elements`` draws as one call does: every piece but the last a
    multiple of 16, the last at least 16 (or the whole, when under 16)."""
    while elements > chunk:
        piece = chunk if elements - chunk >= 16 else chunk - 16
        yield piece
        elements -= piece
    yield elements


def _replay(func: Any, args: tuple, kwargs: dict, elements: int, dtype: torch.dtype) -> None:
    """Draw ``elements`` values with ``func`` in chunks, into a buffer that is then dropped."""
    names = [argument.name for argument in func._schema.arguments]
    for piece in _chunk_sizes(elements):
        if "size" in names:
            position = names.index("size")
            call_args = list(args)
            if position < len(call_args):
                call_args[position] = [piece]
                call_kwargs = {**kwargs, "device": "cpu"}
            else:
                call_kwargs = {**kwargs, "size": [piece], "device": "cpu"}
            func(*call_args, **call_kwargs)
        else:  # an in-place or _like draw over its first argument
            buffer = torch.empty(piece, dtype=dtype)
            func(buffer, *args[1:], **kwargs)


def _to_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and not value.is_meta:
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, torch.device) or value in ("cpu", "cuda"):
        return torch.device("meta")
    return value


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


class ShapeOnlyDraws(TorchDispatchMode):
    """Runs a construction with every tensor over ``tensor_limit_bytes`` (or past a total of
    ``total_limit_bytes`` made for real) made as a meta tensor, and anything computed from one
    as well, while the CPU generator moves exactly as it would for real."""

    def __init__(self, tensor_limit_bytes: int, total_limit_bytes: int) -> None:
        super().__init__()
        self.tensor_limit_bytes = tensor_limit_bytes
        self.real_bytes_left = total_limit_bytes
        #: draws of shape-only tensors not yet replayed (paid when a later draw needs them)
        self.owed: list[Callable[[], None]] = []
        #: the generator's state when the last draw was owed: if it is another at payment,
        #: the generator was reseeded behind our back and the debts are void (a reseed to the
        #: same state shows only through :meth:`manual_seed`)
        self.owed_at: torch.Tensor | None = None

    @classmethod
    def within(cls, limit_bytes: int) -> ShapeOnlyDraws:
        """Real tensors up to ``limit_bytes`` in all, each at most a
        :data:`TENSOR_SHARE_OF_LIMIT`-th of it."""
        return cls(limit_bytes // TENSOR_SHARE_OF_LIMIT, limit_bytes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        leaves, spec = tree_flatten((args, kwargs))
        tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
        if any(isinstance(leaf, torch.device) and leaf.type == "cuda" for leaf in leaves):
            raise ShapeOnlyError(f"{func} makes a CUDA tensor, drawn from the GPU's generator")
        meta_args, meta_kwargs = tree_unflatten([_to_meta(leaf) for leaf in leaves], spec)
        try:
            meta_output = func(*meta_args, **meta_kwargs)
        except (NotImplementedError, RuntimeError):  # no meta kernel (data-sized): made real
            if any(t.is_meta for t in tensors):
                raise
            meta_output = None
        made = [t for t in tree_flatten(meta_output)[0] if isinstance(t, torch.Tensor)]
        made_bytes = sum(map(_nbytes, made))
        # a view or an in-place op (``uniform_`` filling a Linear's weight) makes no new tensor
        new = not func.is_view and not any(r.alias_info for r in func._schema.returns)
        shape_only = any(t.is_meta for t in tensors) or (
            meta_output is not None and new
            and (any(_nbytes(t) > self.tensor_limit_bytes for t in made)
                 or made_bytes > self.real_bytes_left)
        )
        if not shape_only:
            if _draws(func):
                self.pay()
            if new:
                self.real_bytes_left -= made_bytes
            return func(*args, **kwargs)
        if _draws(func):
            self._owe(func, args, kwargs, made)
        written = [a for a, arg in zip(func._schema.arguments, args, strict=False)
                   if a.alias_info is not None and a.alias_info.is_write
                   and isinstance(arg, torch.Tensor) and not arg.is_meta]
        if written:
            raise ShapeOnlyError(f"{func} writes a real tensor from a shape-only one")
        return meta_output

    def _owe(self, func: Any, args: tuple, kwargs: dict, made: list[torch.Tensor]) -> None:
        drawn = made[0] if made else None
        in_place = bool(func._schema.arguments) and func._schema.arguments[0].alias_info
        if func.overloadpacket not in REPLAYABLE_DRAWS or drawn is None or (
            in_place and not args[0].is_contiguous()
        ) or kwargs.get("generator") is not None:
            raise ShapeOnlyError(f"{func} draws a shape-only tensor and cannot be replayed")
        plain = tree_map(lambda v: v if not isinstance(v, torch.Tensor) else None, args)
        elements, dtype = drawn.numel(), drawn.dtype
        self.owed.append(lambda: _replay(func, plain, kwargs, elements, dtype))
        self.owed_at = torch.random.get_rng_state()

    def manual_seed(self, seed: int) -> None:
        """``torch.manual_seed(seed)``, voiding every owed draw (the generator starts over)."""
        self.owed = []
        torch.manual_seed(seed)

    def pay(self) -> None:
        """Advance the generator past every owed draw, in order (none, when it was reseeded
        since they were owed)."""
        owed, self.owed = self.owed, []
        if owed and torch.equal(torch.random.get_rng_state(), self.owed_at):
            for advance in owed:
                advance()
