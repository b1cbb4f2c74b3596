"""Data-sized ops traced without data: ``nonzero``, ``masked_select``, boolean-mask indexing,
``unique``, ``bincount``, ``repeat_interleave`` (torch tags them ``dynamic_output_shape``) on
stand-in values, so a model whose real tensors are too big to build still traces.

The sizes they get are one draw, as the real-data fallback's are: the bound
(:mod:`torchroofline.plan.demand`) charges every value a data-sized op computes as possibly
empty — no FLOPs, none of what it picks — so it holds for every size the data could give. The
stand-ins are those of the real-data fallback: integers zero; floats one (nonzero almost
everywhere, as its random normal values are); booleans, which the model computed from data
(a routing mask), true at a seeded half of their elements — a size neither empty nor full, so
the draw is no edge case (an empty output makes ``x[:5]`` of it whole and skips
``if idx.numel() == 0`` branches; a full one keeps the size of the tensor it selects from, which
would pass for a size shapes chose)."""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

#: Seed of the booleans' stand-in values (the same draw on every run).
_SEED = 0


def stand_in_output(func: Any, args: tuple, kwargs: dict) -> Any:
    """``func``'s outputs on stand-in values of its arguments (module docstring), made on the
    arguments' (fake) device with ``torch.empty_strided``: call it inside the fake mode."""
    tensors = [leaf for leaf in tree_flatten((args, kwargs))[0] if isinstance(leaf, torch.Tensor)]
    device = tensors[0].device if tensors else torch.device("cpu")
    generator = torch.Generator().manual_seed(_SEED)
    with unset_fake_temporarily():
        on_meta = _ON_META.get(func)
        if on_meta is not None:
            output = on_meta(generator, *args, **kwargs)
        else:
            real_args, real_kwargs = tree_map(
                lambda leaf: _stand_in(leaf, generator), (args, kwargs)
            )
            output = func(*real_args, **real_kwargs)
    flat, spec = tree_flatten(output)
    made = [
        torch.empty_strided(leaf.shape, leaf.stride(), dtype=leaf.dtype, device=device)
        if isinstance(leaf, torch.Tensor) else leaf
        for leaf in flat
    ]
    return tree_unflatten(made, spec)


def _stand_in(leaf: Any, generator: torch.Generator) -> Any:
    """A CPU tensor of ``leaf``'s shape and dtype holding its stand-in values (one element
    broadcast where all are equal: no memory however big); other arguments as they are."""
    if isinstance(leaf, torch.device):
        return torch.device("cpu")
    if not isinstance(leaf, torch.Tensor):
        return leaf
    if leaf.dtype == torch.bool:
        return torch.rand(leaf.shape, generator=generator) < 0.5
    fill = 1 if leaf.is_floating_point() or leaf.is_complex() else 0
    return torch.full((), fill, dtype=leaf.dtype).expand(leaf.shape)


def _meta(tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device="meta")


def _index_on_meta(generator: torch.Generator, source: torch.Tensor, indices: list) -> Any:
    """``source[indices]`` with its boolean masks' stand-in values and no element of
    ``source`` or of the output made: each mask becomes the index tensors of its nonzeros (as
    indexing itself does), and the gather runs on meta tensors. ``x[x[:, 0] > 0]`` of a
    (5·10⁷, 64) fp32 ``x`` took 6.8 GB for its stand-in output; now the mask and its nonzeros
    (~0.3 GB)."""
    converted: list[torch.Tensor | None] = []
    for index in indices:
        if index is None:
            converted.append(None)
        elif index.dtype == torch.bool:
            picked = _stand_in(index, generator).nonzero()
            converted += [_meta(column) for column in picked.unbind(1)]
        else:
            converted.append(_meta(index))
    return torch.ops.aten.index.Tensor(_meta(source), converted)


def _masked_select_on_meta(
    generator: torch.Generator, source: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``masked_select(source, mask)``: one element per true stand-in of the broadcast mask."""
    shape = torch.broadcast_shapes(source.shape, mask.shape)
    picked = int(_stand_in(mask, generator).expand(shape).sum())
    return torch.empty(picked, dtype=source.dtype, device="meta")


#: Data-sized ops whose stand-in outputs are made on meta tensors from their deciding values
#: alone (their real outputs could be as big as their inputs).
_ON_META = {
    torch.ops.aten.index.Tensor: _index_on_meta,
    torch.ops.aten.masked_select.default: _masked_select_on_meta,
}
