"""The public entry point: trace → costs → plans → price, in one call."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn
from torch.utils._pytree import tree_leaves

from .costs import float_element_bytes
from .errors import InputError, ModelError
from .plan.given import DATA_LIMIT_BYTES, resolve_data, with_given_values
from .plan.memory import Allocation, BatchFit, allocations, batch_scaled, largest_batch, replay
from .plan.plans import make_plans
from .price.context import PricingContext
from .price.hardware import GPUSpec
from .price.interconnect import interconnect_for
from .price.roofline import Result, price
from .price.step_figures import with_checkpoint
from .trace.collector import paused
from .trace.distributed import Layout, job_trace
from .trace.inputs import _module_tensors
from .trace.modes import caller_autocast
from .trace.tracer import REAL_FALLBACK_LIMIT_BYTES, check_inputs, trace_model
from .trace.training import step_trace_options

if TYPE_CHECKING:
    from .price.estimate_params import EstimateParams
    from .trace.distributed import DistributedTrace
    from .trace.refs import Trace


@paused()
def analyze(
    model: nn.Module,
    inputs: Any,
    gpu: str | GPUSpec = "h100-sxm",
    precision: str = "fp32",
    *,
    cache: str = "cold",
    actual_ms: float | None = None,
    real_fallback_limit_bytes: int = REAL_FALLBACK_LIMIT_BYTES,
    name: str | None = None,
    estimate_params: EstimateParams | None = None,
    math: str = "program",
    data: str | None = None,
    data_limit_bytes: int = DATA_LIMIT_BYTES,
    input_values: Callable[[bool], Sequence[Any] | None] | None = None,
    mode: str = "inference",
    loss: Callable[[Any], Any] | None = None,
    optimizer: str = "adamw",
    optimizer_options: Mapping[str, Any] | None = None,
    autocast: str | None = None,
    checkpoint: Sequence[str] = (),
    clock_mhz: float | None = None,
    mem_clock_mhz: float | None = None,
    world: int | None = None,
    mesh: Mapping[str, int] | None = None,
    parallelize: Callable[[nn.Module, Any], Any] | None = None,
    parallel: str | None = None,
    tp_plan: Mapping[str, Any] | None = None,
    gpus_per_node: int = 8,
) -> Result:
    """How fast could ``model(*inputs)`` run on ``gpu`` at ``precision``?

    ``inputs`` is a tensor or a tuple/list of forward arguments; tensors and parameters may be
    real, ``meta`` or fake, in any mix — the model is traced once on fake tensors and no tensor
    data is allocated. ``cache`` is ``"cold"`` (L2 flushed between runs, KernelBench's timing)
    or ``"warm"``. ``actual_ms`` sets a measured time (ms) against the bound. fp32 matmuls,
    convolutions and RNNs run where the torch switches set now allow (``allow_tf32``,
    ``torch.set_float32_matmul_precision``, ``torch.backends.cudnn.allow_tf32``).
    ``estimate_params`` replaces the performance model's fitted constants (e.g. your own host
    costs, :class:`~torchroofline.price.estimate_params.EstimateParams`). ``math`` is the math the speed of
    light assumes: "program" (the program's own, the default), or a rung a benchmark's tolerance
    admits ("tf32", "bf16", "fp16", "fp8", "fp4"; :data:`~torchroofline.precision.MATH_RUNGS`;
    fp4 appears in the ladder on GPUs with FP4 tensor cores, and elsewhere when chosen, priced
    at the fp8 rate); every rung's bound is in ``time_ms["sol_by_math"]`` whichever is chosen.

    ``data`` is what the bound may assume of the input values: "any" (valid for every value)
    or "given" (for these values: a matmul skips the zero products of a triangular input, a
    gather charges the distinct rows its indices pick; :mod:`~torchroofline.given`). Default:
    "given" when every input tensor is real and they fit in ``data_limit_bytes``, else "any".
    With "given", ``time_ms["sol_any_input"]`` holds the bound for any values where it differs.
    ``input_values`` makes real values for fake ``inputs`` (a problem file's seeded
    ``get_inputs()``), called only when a rule reads them (see
    :func:`~torchroofline.given.with_given_values`).

    ``mode="train"`` analyses one training step (:mod:`~torchroofline.training`): the forward,
    ``loss(output)`` (default: a gradient of ones seeded on each output, as ``output.sum()``
    would), autograd's backward and one step of ``optimizer`` ("adamw", "adam", "sgd",
    "adafactor" or "none") built with ``optimizer_options`` (e.g. ``{"fused": True}``); the
    Result's ``phases`` split its figures by forward, backward and optimizer. ``autocast``
    ("bf16", "fp16"; default: that of a ``torch.autocast`` block around the call) runs the
    forward under ``torch.autocast`` (mixed precision), in inference and in a training step;
    ``checkpoint`` names modules (``fnmatch`` patterns of module paths, ``["blocks.*"]``) whose
    activation checkpointing the Result prices (``checkpoint_what_if``: recompute FLOPs and
    time added, activation bytes saved).

    ``clock_mhz`` prices a GPU whose SM clock is locked there (``nvidia-smi -lgc``; benchmarks
    often lock a B200 at 1,500 MHz): compute peaks scale by the locked clock over the clock the
    datasheet figures assume (:meth:`~torchroofline.gpu_spec.GPUSpec.at_clocks`).
    ``mem_clock_mhz`` likewise scales the bandwidth by the locked over the nominal memory clock.

    ``world`` ranks make it one rank of a distributed job (docs/distributed.md): ``mesh`` names
    its dims (``{"dp": 8, "tp": 8}``; default ``{"dp": world}``), ``gpus_per_node`` places them
    on nodes, and ``parallelize(model, mesh)`` (torchtitan style: ``fully_shard``,
    ``parallelize_module``) or a ``parallel`` preset ("ddp", "fsdp", "tp" with ``tp_plan``)
    shards the model. ``inputs`` are one rank's. The trace runs on a fake process group;
    ``Result.distributed`` holds the collectives, communication, exposed communication, step
    time and per-rank memory. ``world=1`` is the single-GPU analysis.
    """
    # resolved once, before tracing (a bad GPU name or precision fails first); fp32
    # matmul-class units follow the torch switches as the user holds them now
    context = PricingContext.resolve(
        gpu, precision, cache, math=math, estimate_params=estimate_params,
        clock_mhz=clock_mhz, mem_clock_mhz=mem_clock_mhz,
    )
    if world is not None and world > 1:  # a GPU without interconnect figures fails first
        interconnect_for(context.gpu)
    model, notes = _uncompiled(model)
    notes += _train_mode_notes(model, mode)
    _check_dense(model, inputs)
    if mode == "train" and data == "given":
        raise InputError(
            "data='given' is for inference: a training step's bound holds for any input "
            "values; leave data unset or pass data='any'"
        )
    autocast = autocast or caller_autocast()
    bound_data = "given" if input_values is not None else resolve_data(
        data, inputs, data_limit_bytes
    )
    options = step_trace_options(mode, loss, optimizer, optimizer_options, autocast, checkpoint)
    with _compiled_code_eager():
        trace, job = _traced(
            model, inputs, dict(options, real_fallback_limit_bytes=real_fallback_limit_bytes,
                                name=name),
            {"world": world, "mesh": mesh, "parallelize": parallelize, "parallel": parallel,
             "tp_plan": tp_plan, "gpus_per_node": gpus_per_node},
        )
    if bound_data == "given" and trace.step is None and (job is None or job.layout.world == 1):
        trace = with_given_values(trace, input_values or inputs, _module_tensors(model))
    result = with_checkpoint(price(make_plans(trace), context, actual_ms), checkpoint)
    if job is not None:
        result = result.with_job(job)
    return result.with_notes(notes)


def _uncompiled(model: Any) -> tuple[Any, list[str]]:
    """The module ``torch.compile(model)`` wraps (its ``_orig_mod``), with a note; else
    ``model``. The wrapper would run Dynamo on the fake tensors, which needs a GPU driver."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # loaded once torch.compile ran
    if eval_frame is None or not isinstance(model, nn.Module):
        return model, []
    compiled = [name or "<top level>" for name, module in model.named_modules()
                if isinstance(module, eval_frame.OptimizedModule)]
    if not compiled:
        return model, []
    return getattr(model, "_orig_mod", model) if compiled[0] == "<top level>" else model, [
        f"analyzed the modules torch.compile wraps ({', '.join(compiled[:3])}"
        f"{' and more' if len(compiled) > 3 else ''}) as written: the bound is the program's "
        "own, whatever Inductor makes of it, and the compile estimate models Inductor's fusion"
    ]


@contextlib.contextmanager
def _compiled_code_eager() -> Iterator[None]:
    """Within: code ``torch.compile`` wraps (a submodule, a function the forward calls) runs as
    written (``torch._dynamo.config.disable``), its ops traced one by one; compiled, Inductor
    ran on the fake tensors and failed (a device mismatch in its generated code)."""
    if "torch._dynamo.eval_frame" not in sys.modules:  # nothing was compiled
        yield
        return
    from torch._dynamo import config

    with config.patch(disable=True):
        yield


#: The modules that run otherwise in train mode (a module is built in it; only ``.eval()``
#: leaves it), each with what is priced then: their kind's name, whether a module runs so, and
#: what it does.
TRAIN_MODE_BEHAVIOURS: tuple[tuple[str, type, Callable[[nn.Module], bool], str], ...] = (
    ("BatchNorm", nn.modules.batchnorm._BatchNorm, lambda module: True,
     "normalized by the batch's statistics, their running statistics updated"),
    # p = 0 draws no mask worth a note; a Dropout in train mode draws one and scales by it
    ("Dropout", nn.modules.dropout._DropoutNd, lambda module: module.p > 0,
     "a random mask drawn and applied"),
)


def _train_mode_notes(model: Any, mode: str) -> list[str]:
    """A note per kind of module (:data:`TRAIN_MODE_BEHAVIOURS`) an inference analysis meets
    left in train mode: what gets priced is what train mode runs, silently until this note."""
    if mode == "train" or not isinstance(model, nn.Module):
        return []
    notes = []
    for kind, module_class, acts, what in TRAIN_MODE_BEHAVIOURS:
        training = [name or type(module).__name__ for name, module in model.named_modules()
                    if isinstance(module, module_class) and module.training and acts(module)]
        if not training:
            continue
        listed = ", ".join(f"'{name}'" for name in training[:3])
        listed += f" and {len(training) - 3} more" if training[3:] else ""
        notes.append(
            f"{len(training)} {kind} module(s) in train mode ({listed}) are priced as training "
            f"runs them: {what}; call model.eval() to price inference (KernelBench times a "
            "problem as built: in train mode)"
        )
    return notes


def _check_dense(model: Any, inputs: Any) -> None:
    """Refuse a sparse (or other non-strided) input, parameter or buffer in one line: the trace
    runs on fake strided tensors, which cannot hold a sparse tensor's storage."""
    named = [(f"input {index}", value) for index, value in enumerate(tree_leaves(inputs))]
    if isinstance(model, nn.Module):
        named += [(f"the model's '{name}'", t) for name, t in _module_tensors(model).items()]
    for name, value in named:
        if isinstance(value, torch.Tensor) and value.is_quantized:
            raise InputError(
                f"{name} is a quantized ({str(value.dtype).removeprefix('torch.')}) tensor, and "
                "torchroofline traces plain dtypes only; pass it as .int_repr() (its integers) "
                "or .dequantize()"
            )
        if isinstance(value, torch.Tensor) and (value.is_nested or value.layout != torch.strided):
            kind = "nested" if value.is_nested else str(value.layout).removeprefix("torch.")
            raise InputError(
                f"{name} is a {kind} tensor, and torchroofline traces dense (strided) tensors "
                "only; pass it as .to_dense() (a nested one as .to_padded_tensor(0))"
            )


def max_batch(
    model: nn.Module,
    inputs: Any,
    gpu: str | GPUSpec = "h100-sxm",
    precision: str = "fp32",
    *,
    mode: str = "inference",
    loss: Callable[[Any], Any] | None = None,
    optimizer: str = "adamw",
    optimizer_options: Mapping[str, Any] | None = None,
    batch_dim: int = 0,
    limit: int = 2**24,
    traces: int = 12,
    **job: Any,
) -> BatchFit:
    """The largest batch of ``model(*inputs)`` (or of its training step, ``mode="train"``)
    whose eager peak memory fits ``gpu``'s memory at ``precision`` (:mod:`memory`).

    The batch is the size of dimension ``batch_dim`` of the first tensor in ``inputs``; every
    input tensor with that size there is resized with it (as shape-only meta tensors: nothing
    is allocated). The program is traced at that batch and at twice it (no plans, no
    pricing); when the two runs differ only in sizes, each storage's size is a line in the
    batch, and the search re-prices those sizes without tracing, then traces its answer and
    the batch above (where the search tried it) to confirm them. Otherwise every batch tried
    is one trace, at most ``traces``. ``job``: :func:`analyze`'s distributed keywords
    (``world``, ``mesh``, ``parallelize``...): the batch and the memory are one rank's."""
    from .price.hardware import get_gpu
    from .price.precision import check_precision

    spec = get_gpu(gpu)
    float_bytes = float_element_bytes(check_precision(precision))
    model = _uncompiled(model)[0]
    _check_dense(model, inputs)
    options = step_trace_options(mode, loss, optimizer, optimizer_options)
    arguments = check_inputs(model, inputs)
    start = _batch_size(arguments, batch_dim)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < start:
        # the search starts at the inputs' own batch: it answered that batch, above the limit
        raise InputError(f"limit {limit!r} is below the inputs' own batch ({start}); pass a "
                         f"whole number of at least {start}, the largest batch to try")
    traced: dict[int, tuple[tuple[Allocation, ...], int]] = {}

    def lives_at(batch: int) -> tuple[tuple[Allocation, ...], int]:
        """The allocations of a trace at ``batch`` and its op count (each batch traced once)."""
        if batch not in traced:
            resized = _with_batch(arguments, batch_dim, start, batch)
            try:
                trace = _traced(model, resized, options, job)[0]
            except ModelError as error:
                if batch == start:  # the model fails as given: its own error
                    raise
                raise InputError(
                    f"resizing dimension {batch_dim} of the inputs from {start} to {batch} "
                    f"breaks the model ({error}); it is no batch dimension: pass batch_dim, the "
                    "batch's dimension (--batch-dim on the command line)"
                ) from error
            traced[batch] = (allocations(trace, float_bytes), len(trace.ops))
        return traced[batch]

    def traced_peak(batch: int) -> int:
        return replay(*lives_at(batch)).peak_bytes

    found = _repriced_search(lives_at, traced_peak, start, spec.memory_bytes, limit)
    if found is None:
        found = largest_batch(traced_peak, spec.memory_bytes, start, limit=limit, traces=traces)
    batch, peaks, exact = found
    return BatchFit(spec.name, spec.memory_bytes, batch, peaks, exact, tuple(sorted(traced)))


#: :func:`analyze`'s keywords of a distributed job (``max_batch`` takes them as ``**job``).
JOB_KEYWORDS = ("world", "mesh", "parallelize", "parallel", "tp_plan", "gpus_per_node")


def _traced(model: nn.Module, inputs: Any, options: Mapping[str, Any], job: Mapping[str, Any]
            ) -> tuple[Trace, DistributedTrace | None]:
    """The trace of ``model(*inputs)`` with ``options`` (:func:`trace_model`'s keywords), or of
    one rank of the distributed job ``job`` describes (:data:`JOB_KEYWORDS`; none where its
    ``world`` is None), with its collectives (:func:`job_trace`)."""
    unknown = sorted(set(job) - set(JOB_KEYWORDS))
    if unknown:
        raise InputError(f"unknown keyword(s) {', '.join(unknown)}; a distributed job takes "
                         f"{', '.join(JOB_KEYWORDS)}")
    if job.get("world") is None:
        given = [name for name in JOB_KEYWORDS[1:-1] if job.get(name) is not None]
        if given:  # silently a one-GPU analysis, where the command line refuses --mesh alone
            raise InputError(
                f"{', '.join(given)}: distributed-job option(s), which a one-GPU analysis has "
                "no use for; add world=N (CLI: --world N) or leave them out"
            )
        return trace_model(model, inputs, **options), None
    layout = Layout.resolve(job["world"], job.get("mesh"), job.get("gpus_per_node", 8))
    traced = job_trace(model, inputs, layout, job.get("parallelize"), job.get("parallel"),
                       job.get("tp_plan"), **options)
    return traced.trace, traced


def _repriced_search(
    lives_at: Callable[[int], tuple[tuple[Allocation, ...], int]],
    traced_peak: Callable[[int], int],
    start: int,
    capacity_bytes: int,
    limit: int,
) -> tuple[int, dict[int, int], bool] | None:
    """:func:`memory.largest_batch` over sizes re-priced from two traces (``start`` and twice
    it), its answer and the batch above it confirmed by traces (:func:`_traces_agree`); None
    where the two traces differ in more than sizes or a confirming trace disagrees."""
    second = min(2 * start, limit)
    (first_lives, op_count), (second_lives, second_count) = lives_at(start), lives_at(second)
    if second == start or op_count != second_count:
        return None
    scaled = batch_scaled(first_lives, second_lives, start, second)
    if scaled is None:
        return None
    batch, peaks, exact = largest_batch(
        lambda size: replay(scaled(size), op_count).peak_bytes, capacity_bytes, start,
        limit=limit, traces=64,
    )
    if not _traces_agree(peaks, batch, traced_peak):
        return None
    return batch, peaks, exact


def _traces_agree(peaks: Mapping[int, int], batch: int,
                  traced_peak: Callable[[int], int]) -> bool:
    """Whether traces at ``batch`` and the batch above give the peaks the search re-priced
    there. Only batches the search tried are traced: the batch above is untried where the
    search stopped short of it (its budget), and batch 0 or one above ``limit`` never is."""
    return all(traced_peak(size) == peaks[size] for size in (batch, batch + 1) if size in peaks)


def _batch_size(arguments: tuple, batch_dim: int) -> int:
    tensors = [t for t in arguments if isinstance(t, torch.Tensor) and t.dim() > batch_dim]
    if not tensors:
        raise InputError(
            f"no input tensor has a dimension {batch_dim} to take as the batch; pass batch_dim, "
            "the batch's dimension (--batch-dim on the command line)"
        )
    return tensors[0].shape[batch_dim]


def _with_batch(arguments: tuple, batch_dim: int, old: int, new: int) -> tuple:
    """The arguments with every tensor whose ``batch_dim`` is ``old`` resized to ``new``, as
    meta tensors (shape and dtype only)."""

    def resized(value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or value.dim() <= batch_dim:
            return value
        shape = list(value.shape)
        if shape[batch_dim] == old:
            shape[batch_dim] = new
        return torch.empty(shape, dtype=value.dtype, device="meta")

    return tuple(resized(value) for value in arguments)
