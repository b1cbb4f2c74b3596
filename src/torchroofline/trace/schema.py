"""What an op's schema says of its arguments: positions and defaults by name, the arguments it
writes (in-place, ``out=``), and whether its output is one of its inputs' storages."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # annotations only: refs builds on this module
    from .refs import TensorRef


#: :func:`_schema_positions`' mark of an argument without a default
_NO_DEFAULT = object()


@functools.cache
def _schema_positions(func: Any) -> dict[str, tuple[int, Any]]:
    """An op's schema arguments by name: (position, default or :data:`_NO_DEFAULT`)."""
    return {
        argument.name: (
            position, argument.default_value if argument.has_default_value() else _NO_DEFAULT
        )
        for position, argument in enumerate(func._schema.arguments)
    }


@functools.cache
def _argument_names(func: Any) -> tuple[str, ...]:
    return tuple(_schema_positions(func))


#: c10d collectives write their outputs in place, and their schemas mark no argument written
#: (torch/csrc/distributed/c10d/Ops.cpp): by op name, the arguments they write.
_WRITTEN_BY_COLLECTIVE: dict[str, frozenset[str]] = {
    "c10d::_allgather_base_": frozenset({"output_tensor"}),
    "c10d::_reduce_scatter_base_": frozenset({"output_tensor"}),
    "c10d::allreduce_": frozenset({"tensors"}),
    "c10d::broadcast_": frozenset({"tensors"}),
    "c10d::recv_": frozenset({"tensors"}),
    "c10d::alltoall_base_": frozenset({"output"}),
    "c10d::allgather_": frozenset({"output_tensors"}),
    "c10d::reduce_scatter_": frozenset({"output_tensors"}),
}


@functools.cache
def _written_arguments(func: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of the arguments an op's schema marks as written in place (a c10d
    collective's outputs: :data:`_WRITTEN_BY_COLLECTIVE`)."""
    unmarked = _WRITTEN_BY_COLLECTIVE.get(func._schema.name, frozenset())
    return tuple(
        (position, argument.name)
        for position, argument in enumerate(func._schema.arguments)
        if (argument.alias_info is not None and argument.alias_info.is_write)
        or argument.name in unmarked
    )


#: Arguments a schema marks written that the kernel writes only when another argument is
#: given: the fused optimizers unscale ``grads`` in place only with a ``grad_scale`` (AMP),
#: and otherwise only read them. Keyed by op packet name: (written argument, condition).
_WRITTEN_ONLY_WITH: dict[str, tuple[str, str]] = {
    name: ("grads", "grad_scale")
    for name in ("_fused_adamw_", "_fused_adam_", "_fused_sgd_", "_fused_adagrad_")
}


#: Arguments a kernel writes in place though its schema does not mark them: the batch norms
#: whose schemas predate alias annotations update ``running_mean`` and ``running_var`` in
#: training (``_native_batch_norm_legit`` marks them). Keyed by op packet name: (written
#: arguments, the flag argument that must be true).
_WRITTEN_UNMARKED: dict[str, tuple[tuple[str, ...], str]] = {
    name: (("running_mean", "running_var"), "training")
    for name in ("native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm")
}


def _mutated_arguments(func: Any, args: tuple, kwargs: dict, output: Any) -> list[torch.Tensor]:
    """Arguments the op writes in place that it does not also return (batch-norm running
    statistics): they are writes too."""
    written = [name for _, name in _written_arguments(func)]
    unmarked, flag = _WRITTEN_UNMARKED.get(func.overloadpacket.__name__, ((), ""))
    if not written and not unmarked:
        return []
    returned = {t.untyped_storage()._cdata for t in _tensors(output)}
    positions = _schema_positions(func)

    def value_of(name: str) -> Any:
        position = positions[name][0]
        return args[position] if position < len(args) else kwargs.get(name)

    if unmarked and value_of(flag):
        written += unmarked
    only_with = _WRITTEN_ONLY_WITH.get(func.overloadpacket.__name__)
    mutated = []
    for name in written:
        if only_with and name == only_with[0] and value_of(only_with[1]) is None:
            continue
        tensors = _tensors(value_of(name))
        mutated += [t for t in tensors if t.untyped_storage()._cdata not in returned]
    return mutated


@functools.cache
def _functional_form(func: Any) -> Any:
    """The overload whose result an ``out=`` overload writes into its ``out`` arguments
    (``aten.mm.out`` → ``aten.mm.default``, ``aten.max.dim_max`` → ``aten.max.dim``); None for
    any other op. The out tensor's old value is no input of the op: recorded as the functional
    op, it is neither read nor charged, and every rule sees the arguments it knows."""
    outs = _out_names(func)
    if not outs:
        return None
    inputs = [(a.name, str(a.type)) for a in func._schema.arguments if a.name not in outs]
    for name in func.overloadpacket.overloads():
        candidate = getattr(func.overloadpacket, name)
        schema = candidate._schema
        if (
            not _written_arguments(candidate)
            and [(a.name, str(a.type)) for a in schema.arguments] == inputs
            and len(schema.returns) == len(outs)
        ):
            return candidate
    return None


@functools.cache
def _out_names(func: Any) -> frozenset[str]:
    """The names of an ``out=`` overload's out arguments (keyword-only in every aten schema)."""
    return frozenset(argument.name for argument in func._schema.arguments if argument.is_out)


def _aliases_input(reads: Sequence[TensorRef], output: Any) -> bool:
    """Whether an op that writes none of its arguments returns the storage of one it read
    (``_unsafe_view``, ``alias``)."""
    out_tensors = _tensors(output)
    if not out_tensors:
        return False
    in_storages = {ref.storage_id for ref in reads}
    return all(t.untyped_storage()._cdata in in_storages for t in out_tensors)


def _tensors(tree: Any) -> list[torch.Tensor]:
    """Every tensor in nested tuples, lists and dicts (an op's arguments or outputs), in order.
    A plain scan: pytree's generality costs more than the op itself on this hot path."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    found: list[torch.Tensor] = []
    if isinstance(tree, (tuple, list, dict)):
        _collect_tensors(tree.values() if isinstance(tree, dict) else tree, found)
    return found


def _collect_tensors(items: Iterable[Any], found: list[torch.Tensor]) -> None:
    for item in items:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            _collect_tensors(item, found)
        elif isinstance(item, dict):
            _collect_tensors(item.values(), found)
