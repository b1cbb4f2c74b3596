"""One rank of a distributed job, traced without GPUs: tensor parallel (DTensor), FSDP2,
DDP, expert parallel or any mix a ``parallelize(model, mesh)`` function sets up.

The job runs on PyTorch's fake process group (``init_process_group("fake")``, from
``torch.testing._internal.distributed.fake_pg``): every collective returns at once without
moving data, so one process plays rank 0 of a ``world``-rank job. The trace then sees what
rank 0's GPU runs: its compute ops at per-rank shapes, and each collective as an op
(``_c10d_functional.all_reduce``, ``c10d._allgather_base_``...) with its tensors and its
process group. :func:`distributed_trace` owns the process group: it is made for the trace and
destroyed after it, whatever happens, so no state reaches another analysis.

How the trace is made, and why (each a trap a plain trace falls into):

1. The model is copied onto ``meta`` (no data), parallelized there outside the fake mode
   (2-D FSDP × TP works only so), then moved into the trace's fake mode with ``to_empty``.
2. DTensor ops reach the trace's mode before DTensor turns them into local ops and
   collectives: the mode declines them (``NotImplemented``, as ``CommDebugMode`` does) and
   records the local ops they become.
3. DTensor's sharding propagation runs new ops on global-shape fake tensors to learn their
   output shapes; those runs are no work of the rank, and are not recorded
   (:class:`_UnrecordedPropagation`).
4. A training step runs on fake CPU tensors, as every training trace does
   (:mod:`.training`).
5. DDP does not run on the fake process group: its gradient buckets are emulated
   (:class:`_DDPBuckets`) with the bucketing DDP itself uses
   (``dist._compute_bucket_assignment_by_size``).
6. c10d collectives (FSDP2's, DDP's) have no wait op: a collective's sync point is the first
   op that reads what it wrote, which the value table already knows.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

from ..errors import InputError, ModelError, TorchrooflineError
from .refs import Trace, TracedOp
from .tracer import _RecordingFakeMode, trace_model

#: ``parallel=`` presets for a plain module (:func:`preset`).
PRESETS = ("ddp", "fsdp", "tp")

#: Each collective op → its kind (the nccl-tests name its bus factor is keyed by). Its size in
#: bytes is nccl-tests' ``size``: the largest tensor argument or output (a list counts whole):
#: the buffer of an all-reduce or broadcast, the gathered output of an all-gather, the input of
#: a reduce-scatter, the send buffer of an all-to-all.
COLLECTIVE_KINDS: dict[str, str] = {
    "_c10d_functional.all_reduce": "all_reduce",
    "_c10d_functional.all_reduce_": "all_reduce",
    "_c10d_functional.all_reduce_coalesced": "all_reduce",
    "_c10d_functional.all_reduce_coalesced_": "all_reduce",
    "_c10d_functional.all_gather_into_tensor": "all_gather",
    "_c10d_functional.all_gather_into_tensor_out": "all_gather",
    "_c10d_functional.all_gather_into_tensor_coalesced": "all_gather",
    "_c10d_functional.reduce_scatter_tensor": "reduce_scatter",
    "_c10d_functional.reduce_scatter_tensor_out": "reduce_scatter",
    "_c10d_functional.reduce_scatter_tensor_coalesced": "reduce_scatter",
    "_c10d_functional.all_to_all_single": "all_to_all",
    "_c10d_functional.broadcast": "broadcast",
    "_c10d_functional.broadcast_": "broadcast",
    "_c10d_functional.isend": "send",
    "_c10d_functional.irecv": "recv",
    "c10d.allreduce_": "all_reduce",
    "c10d.allreduce_coalesced_": "all_reduce",
    "c10d._allgather_base_": "all_gather",
    "c10d.allgather_": "all_gather",
    "c10d.allgather_coalesced_": "all_gather",
    "c10d.allgather_into_tensor_coalesced_": "all_gather",
    "c10d._reduce_scatter_base_": "reduce_scatter",
    "c10d.reduce_scatter_": "reduce_scatter",
    "c10d.reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "c10d.alltoall_base_": "all_to_all",
    "c10d.alltoall_": "all_to_all",
    "c10d.broadcast_": "broadcast",
    "c10d.send": "send",
    "c10d.recv_": "recv",
}

#: The schema names of a collective's process-group argument (functional ops name the group).
_GROUP_ARGUMENTS = ("group_name", "process_group", "group")

#: Steady-state DDP buckets: the first holds ``dist._DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB), the
#: rest DDP's default ``bucket_cap_mb`` of 25 MiB (torch/nn/parallel/distributed.py).
DDP_BUCKET_CAP_BYTES = 25 * 2**20


def collective_kind(func: Any) -> str | None:
    """The :data:`COLLECTIVE_KINDS` kind of an op overload; None for any other op."""
    packet = getattr(func, "overloadpacket", None)
    if packet is None:
        return None
    return COLLECTIVE_KINDS.get(f"{packet._qualified_op_name.replace('::', '.')}")


@dataclass(frozen=True)
class Layout:
    """The job: ``world`` ranks as a named ``mesh`` (dim name → size, outermost first, their
    product the world), ``gpus_per_node`` GPUs per node (ranks are placed in order, so the
    innermost mesh dims stay inside a node), and the rank traced."""

    world: int
    mesh: tuple[tuple[str, int], ...]
    gpus_per_node: int = 8
    rank: int = 0

    @classmethod
    def resolve(cls, world: int, mesh: Mapping[str, int] | None, gpus_per_node: int) -> Layout:
        """Check the figures a user gave: a mesh of one dim ``dp`` when none is given."""
        if not isinstance(world, int) or world < 1:
            raise InputError(f"world must be a positive number of ranks, got {world!r}")
        if not isinstance(gpus_per_node, int) or gpus_per_node < 1:
            raise InputError(f"gpus_per_node must be a positive integer, got {gpus_per_node!r}")
        dims = tuple((mesh or {"dp": world}).items())
        if any(not isinstance(size, int) or size < 1 for _, size in dims):
            raise InputError(f"mesh sizes must be positive integers, got {dict(dims)}")
        if math.prod(size for _, size in dims) != world:
            raise InputError(
                f"the mesh {dict(dims)} holds {math.prod(s for _, s in dims)} ranks, not the "
                f"world's {world}; make the product of its sizes the world"
            )
        return cls(world, dims, gpus_per_node)

    @property
    def node_of_rank(self) -> int:
        return self.rank // self.gpus_per_node


@dataclass(frozen=True)
class CollectiveCall:
    """One collective the traced rank issued: op ``index`` in the trace, its ``kind``,
    nccl-tests' ``size_bytes`` (see :data:`COLLECTIVE_KINDS`), its dtype, and its group:
    ``group_size`` ranks on ``nodes`` nodes, ``ranks_per_node`` of them on each."""

    index: int
    op: str
    kind: str
    size_bytes: int
    dtype: str
    group_size: int
    nodes: int
    ranks_per_node: int
    phase: str
    module_path: str
    itemsize: int = 4
    is_float: bool = True
    group_ranks: tuple[int, ...] = ()  #: the global ranks of its process group

    def at_precision(self, float_bytes: int) -> CollectiveCall:
        """The call with a float payload at ``float_bytes`` per element where the program's
        own is wider (as every float tensor of an analysis is priced, :mod:`..costs`)."""
        if not self.is_float or float_bytes >= self.itemsize:
            return self
        return dataclasses.replace(self, size_bytes=self.size_bytes * float_bytes // self.itemsize,
                                   itemsize=float_bytes)

    @property
    def span(self) -> str:
        """"intra-node" (NVLink, xGMI) or "inter-node" (the NICs too)."""
        return "intra-node" if self.nodes == 1 else "inter-node"


@dataclass(frozen=True)
class DistributedTrace:
    """Rank ``layout.rank``'s trace and the collectives in it, in issue order."""

    trace: Trace
    layout: Layout
    collectives: tuple[CollectiveCall, ...]


def job_trace(
    model: nn.Module,
    inputs: Any,
    layout: Layout,
    parallelize: Callable[[nn.Module, Any], Any] | None,
    parallel: str | None,
    tp_plan: Mapping[str, Any] | None = None,
    **trace_options: Any,
) -> DistributedTrace:
    """Rank 0 of ``layout``'s job, sharded by ``parallelize`` or the ``parallel`` preset
    (:func:`preset`); one rank alone is the model as it is (no process group, no collectives:
    the single-GPU trace)."""
    if layout.world == 1:
        return DistributedTrace(trace_model(model, inputs, **trace_options), layout, ())
    if (parallelize is None) == (parallel is None):
        raise InputError(
            "a distributed job needs one of parallelize (a function of the model and its "
            "DeviceMesh) or parallel ('ddp', 'fsdp', 'tp'); pass exactly one"
        )
    shard = parallelize if parallelize is not None else preset(parallel, tp_plan)
    return distributed_trace(model, inputs, layout, shard, **trace_options)


def distributed_trace(
    model: nn.Module,
    inputs: Any,
    layout: Layout,
    parallelize: Callable[[nn.Module, Any], Any],
    **trace_options: Any,
) -> DistributedTrace:
    """Trace rank 0 of ``layout``'s job: ``parallelize(model, mesh)`` runs on a meta copy of
    ``model`` (the caller's model is not changed) under a fake process group owned by this
    call, with ``mesh`` a ``DeviceMesh`` of ``layout.mesh``; ``inputs`` are the rank's own
    (its share of the batch). ``trace_options`` go to :func:`~.tracer.trace_model`."""
    from torch.distributed.device_mesh import init_device_mesh

    with fake_process_group(layout):
        names, sizes = zip(*layout.mesh, strict=True)
        mesh = init_device_mesh("cpu", sizes, mesh_dim_names=names)
        copied = meta_copy(model)
        try:
            parallelize(copied, mesh)
        except TorchrooflineError:
            raise
        except Exception as error:  # noqa: BLE001 — the user's function: one line
            raise ModelError(
                f"parallelize(model, mesh) raised {type(error).__name__}: "
                f"{str(error).strip().splitlines()[0] if str(error).strip() else ''} (fix it; "
                f"the mesh has dims {dict(layout.mesh)})"
            ) from error
        mode = _DistributedFakeMode()
        with mode, torch.no_grad():
            copied.to_empty(device="cpu")
        with _UnrecordedPropagation(mode):
            trace = trace_model(copied, inputs, fake_mode=mode, **{
                "name": type(model).__name__, **trace_options, "device": "cpu"})
        collectives = tuple(
            _collective_call(index, op, layout)
            for index, op in enumerate(trace.ops) if collective_kind(op.func)
        )
    return DistributedTrace(trace, layout, collectives)


@contextlib.contextmanager
def fake_process_group(layout: Layout) -> Iterator[None]:
    """The default process group of ``layout.world`` fake ranks, this process rank
    ``layout.rank``, for the block; destroyed on exit, errors included. A process group the
    caller holds already is refused: the fake one would replace it."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise InputError(
            "a process group is initialized already; analyze a distributed job outside "
            "torch.distributed.init_process_group (the analysis makes its own fake one)"
        )
    dist.init_process_group("fake", store=FakeStore(), rank=layout.rank,
                            world_size=layout.world)
    try:
        yield
    finally:
        dist.destroy_process_group()


def meta_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` whose parameters and buffers are meta tensors of the same shapes
    (nothing allocated): a parallelize function changes the module it gets."""
    memo: dict[int, Any] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        # made from the shape, not empty_like: a fake tensor's (a problem file's model, built
        # on fake tensors) stayed fake, and to_empty could not swap it ("Couldn't swap
        # Linear.weight", a raw traceback from --parallel ddp)
        meta = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype,
                                   device="meta")
        memo[id(tensor)] = (
            nn.Parameter(meta, requires_grad=tensor.requires_grad)
            if isinstance(tensor, nn.Parameter) else meta
        )
    return copy.deepcopy(model, memo)


class _DistributedFakeMode(_RecordingFakeMode):
    """The trace's fake mode, which declines a tensor subclass's op (a DTensor's) so that the
    subclass turns it into the local ops and collectives that are the rank's work."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if any(_wraps(kind) for kind in types):
            return NotImplemented
        return super().__torch_dispatch__(func, types, args, kwargs)


def _wraps(kind: type) -> bool:
    """Whether ``kind`` is a tensor subclass that wraps another tensor (DTensor)."""
    return kind is not torch.Tensor and hasattr(kind, "__tensor_flatten__") and not issubclass(
        kind, torch._subclasses.fake_tensor.FakeTensor
    )


class _UnrecordedPropagation:
    """DTensor's sharding propagation runs an op on global-shape fake tensors to learn its
    output's shape (``ShardingPropagator._propagate_tensor_meta_non_cached``, inside the
    ``_fake_mode_lock`` context it keeps for threads): no kernel of the rank. While the block
    runs, that context pauses the recorder, restoring what it was."""

    def __init__(self, mode: _RecordingFakeMode) -> None:
        self.mode = mode
        self._held: list[bool] = []

    def __enter__(self) -> _UnrecordedPropagation:
        from torch.distributed.tensor._sharding_prop import ShardingPropagator

        self.lock = ShardingPropagator.__dict__.get("_fake_mode_lock", contextlib.nullcontext())
        ShardingPropagator._fake_mode_lock = _Pausing(self)
        return self

    def __exit__(self, *exc: object) -> None:
        from torch.distributed.tensor._sharding_prop import ShardingPropagator

        ShardingPropagator._fake_mode_lock = self.lock

    def pause(self) -> None:
        recorder = self.mode.recorder
        self._held.append(recorder.paused if recorder is not None else False)
        if recorder is not None:
            recorder.paused = True

    def resume(self) -> None:
        held = self._held.pop()
        if self.mode.recorder is not None:
            self.mode.recorder.paused = held


class _Pausing:
    """The context :class:`_UnrecordedPropagation` puts in DTensor's lock's place (entered
    once per propagation, nested or not)."""

    def __init__(self, owner: _UnrecordedPropagation) -> None:
        self.owner = owner

    def __enter__(self) -> None:
        self.owner.lock.__enter__()
        self.owner.pause()

    def __exit__(self, *exc: object) -> None:
        self.owner.resume()
        self.owner.lock.__exit__(*exc)


def _collective_call(index: int, op: TracedOp, layout: Layout) -> CollectiveCall:
    import torch.distributed as dist

    group = _group(op)
    ranks = dist.get_process_group_ranks(group)
    nodes = {rank // layout.gpus_per_node for rank in ranks}
    on_node = sum(rank // layout.gpus_per_node == layout.node_of_rank for rank in ranks)
    sizes = [_bytes(value) for value in (*op.args, *op.kwargs.values(), op.output)]
    first = next(t for t in op.argument_tensors if isinstance(t, torch.Tensor))
    return CollectiveCall(
        index=index, op=op.name, kind=collective_kind(op.func), size_bytes=max(sizes),
        dtype=str(first.dtype).removeprefix("torch."), group_size=len(ranks), nodes=len(nodes),
        ranks_per_node=on_node, phase=op.phase, module_path=op.module_path,
        itemsize=first.element_size(), is_float=first.is_floating_point(),
        group_ranks=tuple(ranks),
    )


def _group(op: TracedOp) -> Any:
    """The process group a collective ran on: a functional op names it, a c10d op holds it."""
    from torch.distributed import ProcessGroup
    from torch.distributed.distributed_c10d import _resolve_process_group

    for name in _GROUP_ARGUMENTS:
        if name in op.argument_names:
            value = op.argument(name)
            if isinstance(value, str):
                return _resolve_process_group(value)
            return value if isinstance(value, ProcessGroup) else ProcessGroup.unbox(value)
    raise ValueError(f"{op.name}: no process-group argument")  # a new op: add its argument


def _bytes(tree: Any) -> int:
    """Bytes of the tensors in one argument or output (a list of tensors counts whole)."""
    if isinstance(tree, torch.Tensor):
        return tree.numel() * tree.element_size()
    if isinstance(tree, (list, tuple)):
        return sum(_bytes(item) for item in tree)
    return 0


# --- Presets for plain modules -----------------------------------------------------------


def preset(parallel: str, tp_plan: Mapping[str, Any] | None = None
           ) -> Callable[[nn.Module, Any], None]:
    """The ``parallelize(model, mesh)`` of a ``parallel=`` preset on a 1-D mesh: "ddp"
    (replicas, gradients all-reduced in DDP's buckets), "fsdp" (FSDP2's ``fully_shard`` on
    every block of each ``nn.ModuleList`` and on the root) or "tp" (``parallelize_module``
    with ``tp_plan``: module path patterns → "colwise", "rowwise" or a ``ParallelStyle``)."""
    if parallel not in PRESETS:
        raise InputError(f"unknown parallel preset '{parallel}'; use one of {', '.join(PRESETS)}")
    if (parallel == "tp") != (tp_plan is not None):
        raise InputError(
            "parallel='tp' needs tp_plan (module path → 'colwise' or 'rowwise'), and only it "
            "takes one; e.g. tp_plan={'blocks.*.up': 'colwise', 'blocks.*.down': 'rowwise'}"
        )
    return {"ddp": _data_parallel, "fsdp": _fully_shard_blocks,
            "tp": lambda model, mesh: _tensor_parallel(model, mesh, tp_plan)}[parallel]


def _fully_shard_blocks(model: nn.Module, mesh: Any) -> None:
    from torch.distributed.fsdp import fully_shard

    for module in model.modules():
        if isinstance(module, nn.ModuleList):
            for block in module:
                fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)


def _tensor_parallel(model: nn.Module, mesh: Any, plan: Mapping[str, Any]) -> None:
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    resolved = {}
    for path, style in plan.items():
        if isinstance(style, str) and style not in styles:
            raise InputError(f"unknown TP style '{style}' for '{path}'; use colwise or rowwise")
        resolved[path] = styles[style]() if isinstance(style, str) else style
    parallelize_module(model, mesh, resolved)


def _data_parallel(model: nn.Module, mesh: Any) -> None:
    """The "ddp" preset: :class:`_DDPBuckets` made at the first forward, when the parameters
    are the trace's (``to_empty`` makes new ones, without the old ones' hooks)."""

    def start(module: nn.Module, args: Any) -> None:
        handle.remove()
        _DDPBuckets(module, mesh.get_group())

    handle = model.register_forward_pre_hook(start)


class _DDPBuckets:
    """DDP's gradient all-reduces, emulated (DDP itself does not run on a fake process group):
    the parameters in backward order (the reverse of their definition, as DDP's rebuilt
    buckets approximate) go into ``dist._compute_bucket_assignment_by_size`` buckets. When a
    bucket's last gradient has accumulated, its gradients are copied into one flat buffer,
    divided by the group's size and all-reduced (DDP's default ``allreduce_hook``), and copied
    back when the backward ends (DDP's ``finalize_backward``)."""

    def __init__(self, model: nn.Module, group: Any) -> None:
        import torch.distributed as dist

        self.group = group
        parameters = [p for p in model.parameters() if p.requires_grad][::-1]
        if not parameters:  # it failed inside c10d: "!tensors.empty() INTERNAL ASSERT FAILED"
            raise InputError(
                f"parallel='ddp' needs a parameter that requires a gradient, as "
                f"DistributedDataParallel does; {type(model).__name__} has none: leave out "
                "--parallel (parallel=), or shard it with a parallelize(model, mesh)"
            )
        buckets, _ = dist._compute_bucket_assignment_by_size(
            parameters, [dist._DEFAULT_FIRST_BUCKET_BYTES, DDP_BUCKET_CAP_BYTES]
        )
        self.buckets = [[parameters[i] for i in bucket] for bucket in buckets]
        self.pending = [len(bucket) for bucket in self.buckets]
        self.reduced: list[tuple[torch.Tensor, list[torch.Tensor]]] = []
        for number, bucket in enumerate(self.buckets):
            for parameter in bucket:
                parameter.register_post_accumulate_grad_hook(
                    lambda p, number=number: self._ready(number)
                )

    def _ready(self, number: int) -> None:
        import torch.distributed as dist

        self.pending[number] -= 1
        if self.pending[number]:
            return
        bucket = self.buckets[number]
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        flat.div_(self.group.size())
        dist.all_reduce(flat, group=self.group)
        if not self.reduced:
            torch.autograd.Variable._execution_engine.queue_callback(self._copy_back)
        self.reduced.append((flat, [p.grad for p in bucket]))

    def _copy_back(self) -> None:
        for flat, grads in self.reduced:
            views = flat.split([g.numel() for g in grads])
            torch._foreach_copy_(grads, [v.view_as(g) for v, g in zip(views, grads,
                                                                      strict=True)])
        self.reduced = []
