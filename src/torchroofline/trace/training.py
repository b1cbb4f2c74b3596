"""A training step traced on fake tensors: forward, the loss, autograd's backward and the
optimizer's step, every aten op stamped with its phase (``TracedOp.phase``).

:class:`Step` is the trace's :class:`~torchroofline.trace.StepRunner`. After the forward it

1. makes the loss: ``loss(output)`` when given, else it seeds a gradient of ones of each
   floating output's shape (what ``output.sum().backward()`` seeds, without the sum kernel);
2. runs ``torch.autograd.backward``: the engine runs the aten backward ops autograd would launch
   on the GPU (``mm`` pairs for a linear, ``native_layer_norm_backward``,
   ``convolution_backward``, ...); each is recorded under the module whose forward made its
   autograd node;
3. runs the optimizer's real ``torch.optim`` implementation with the multi-tensor (``foreach``)
   kernels PyTorch picks by default for CUDA parameters (``fused=True`` in
   ``optimizer_options`` gives ``_fused_adamw_``). Its state is made by one unrecorded step
   first, so the recorded step is a steady-state one.

Autograd on fake CUDA tensors needs a CUDA device (the engine opens a device guard per
device), so a training step is traced on fake CPU tensors: the aten ops above the CPU/CUDA
kernel split are the same. Ops that only touch the optimizer's host-side step counters (CUDA
keeps them on the CPU unless ``fused`` or ``capturable``) launch no GPU kernel and are left out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

from ..errors import InputError, ModelError
from .intercept import AUTOGRAD_CALLS, OWN_OUTPUTS, _paused
from .modes import AUTOCAST_DTYPES, autocast_state
from .refs import StepTensors, TensorRef
from .schema import _tensors
from .tracer import _Recorder, meta_copies
from .values import local, tensor_ref

#: Training-step phases in execution order (``TracedOp.phase``).
PHASES = ("forward", "backward", "optimizer")
MODES = ("inference", "train")

#: ``--optimizer`` name → its ``torch.optim`` class (None: no optimizer step). Each runs with
#: PyTorch's own defaults (lr 1e-3 and betas of each class) unless ``optimizer_options`` says
#: otherwise; the learning rate changes no cost.
OPTIMIZERS: dict[str, type[torch.optim.Optimizer] | None] = {
    "adamw": torch.optim.AdamW,
    "adam": torch.optim.Adam,
    "sgd": torch.optim.SGD,
    "adafactor": torch.optim.Adafactor,
    "none": None,
}

#: Metadata key on an autograd node: the module whose forward made it.
_MODULE_KEY = "torchroofline_module"


def check_training(mode: str, optimizer: str, loss: Any, autocast: str | None = None) -> None:
    """Fail before tracing on a mode, optimizer, loss or autocast dtype the user mistyped."""
    if autocast is not None and autocast not in AUTOCAST_DTYPES:
        raise InputError(
            f"unknown autocast dtype '{autocast}'; use one of {', '.join(AUTOCAST_DTYPES)}"
        )
    if mode not in MODES:
        raise InputError(f"unknown mode '{mode}'; use one of {', '.join(MODES)}")
    if optimizer not in OPTIMIZERS:
        raise InputError(
            f"unknown optimizer '{optimizer}'; use one of {', '.join(OPTIMIZERS)}"
        )
    if loss is not None and not callable(loss):
        raise InputError(
            f"loss must be a function of the model's output, got {type(loss).__name__}"
        )


def step_trace_options(
    mode: str,
    loss: Any,
    optimizer: str,
    optimizer_options: Mapping[str, Any] | None,
    autocast: str | None = None,
    checkpoint: Sequence[str] = (),
) -> dict[str, Any]:
    """The :func:`~torchroofline.trace.trace_model` keywords of ``mode``: for inference the
    forward's autocast dtype, if any; for a training step a :class:`Step` on fake CPU tensors
    (see the module docstring). A training-step option given for inference is an error, before
    anything is traced."""
    check_training(mode, optimizer, loss, autocast)
    if mode == "inference":
        options = {"loss": loss, "optimizer_options": optimizer_options,
                   "checkpoint": checkpoint}
        given = [name for name, value in options.items() if value]
        if given:
            raise InputError(
                f"{', '.join(given)}: training-step option(s), which an inference analysis "
                "has no use for; add mode='train' (CLI: --train) or leave them out"
            )
        return {"autocast": AUTOCAST_DTYPES[autocast]} if autocast else {}
    step = Step(loss, optimizer, dict(optimizer_options or {}), autocast)
    return {"device": "cpu", "step": step}


@dataclass
class Step:
    """Runs loss, backward and optimizer step after the traced forward (a
    :class:`~torchroofline.trace.StepRunner`)."""

    #: output → scalar loss; None seeds a gradient of ones of each floating output
    loss: Callable[[Any], torch.Tensor] | None = None
    optimizer: str = "adamw"
    optimizer_options: Mapping[str, Any] = field(default_factory=dict)
    #: "bf16" or "fp16": the forward and the loss run under ``torch.autocast`` (mixed
    #: precision: matmuls in that dtype, parameters, gradients and optimizer state in theirs)
    autocast: str | None = None
    _trained: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)
    #: a parameter-free model's floating inputs, trained in place of parameters
    _inputs: list[torch.Tensor] = field(default_factory=list, repr=False)
    _forward_only: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)

    @contextlib.contextmanager
    def prepare(
        self, model: nn.Module, module_tensors: Mapping[str, torch.Tensor], args: tuple
    ) -> Iterator[None]:
        """Mark the trace's copies of the model's trainable parameters as requiring gradients
        (in a model without any, a KernelBench operator, its floating inputs: the backward of
        the operator), and label each autograd node with the module whose forward made it.
        Each trace starts afresh (``max_batch`` traces one step several times)."""
        self._trained, self._inputs = {}, []
        for name, parameter in model.named_parameters(remove_duplicate=False):
            if parameter.requires_grad:
                self._trained[name] = module_tensors[name].requires_grad_(True)
        if not self._trained:
            self._inputs = [t.requires_grad_(True) for t in _tensors(args)
                            if t.is_floating_point() or t.is_complex()]
        names = {id(module): name for name, module in model.named_modules()}

        def label(module: nn.Module, args: Any, output: Any) -> None:
            _label_nodes(output, names.get(id(module), type(module).__name__), args)

        hook = nn.modules.module.register_module_forward_hook(label)
        if self.autocast is not None:
            device = next(iter(module_tensors.values())).device.type if module_tensors else "cpu"
            self._forward_only.enter_context(
                autocast_state(device, AUTOCAST_DTYPES[self.autocast])
            )
        try:
            yield
        finally:
            self._forward_only.close()
            hook.remove()

    def run(
        self, model: nn.Module, module_tensors: Mapping[str, torch.Tensor], output: Any,
        recorder: _Recorder,
    ) -> Any:
        losses, seeds = self._losses(output, recorder)
        self._forward_only.close()  # backward runs in the forward's dtypes, not under autocast
        _label_nodes(losses, "")
        recorder.phase = "backward"
        # records keep meta copies, so autograd's accumulator can steal each gradient as on
        # a GPU instead of copying it (it copies a gradient something else still holds)
        shape_only, recorder._shape_only = recorder._shape_only, meta_copies
        modules, recorder.modules = recorder.modules, _BackwardModules()
        try:
            torch.autograd.backward(losses, seeds)
        finally:
            recorder.modules, recorder._shape_only = modules, shape_only
        trained = list({id(t): t for t in self._trained.values() if t.grad is not None}.values())
        inputs = [t for t in self._inputs if t.grad is not None]
        states = self._optimizer_step(trained, recorder)
        values = recorder.values
        recorder.step = StepTensors(
            parameters=tuple(_first_ref(values, t) for t in trained if _seen(values, t)),
            gradients=tuple(values.output_ref(t.grad) for t in trained + inputs
                            if _seen(values, t.grad)),
            optimizer_states=tuple(_first_ref(values, t) for t in states if _seen(values, t)),
            losses=tuple(values.output_ref(t) for t in losses if _seen(values, t)),
            optimizer=self.optimizer,
        )
        if OPTIMIZERS[self.optimizer] is None:  # no step: the gradients are what it keeps
            return losses + [t.grad for t in trained + inputs]
        return losses + [t.grad for t in inputs]

    def _losses(
        self, output: Any, recorder: _Recorder
    ) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        if self.loss is not None:
            loss = self.loss(output)
            if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
                raise ModelError(
                    "the loss does not depend on any trained parameter; return a tensor "
                    "computed from the model's output"
                )
            if loss.numel() == 1:
                return [loss], None
            outputs = [loss]
        else:
            outputs = [t for t in _tensors(output) if t.requires_grad]
            if not outputs:
                raise ModelError(
                    "the model's output does not depend on any trained parameter; "
                    "nothing to train (check requires_grad on its parameters)"
                )
        with _paused(recorder):  # the seed is given, not computed: no kernel
            seeds = [torch.ones_like(t) for t in outputs]
        return outputs, seeds

    def _optimizer_step(
        self, trained: Sequence[torch.Tensor], recorder: _Recorder
    ) -> list[torch.Tensor]:
        """Run one unrecorded step (it makes the state) and one recorded one; returns the
        optimizer's state tensors. A distributed rank's sharded parameters (DTensors) are
        stepped as the shards it holds: an optimizer's update is element-wise, so each rank
        runs it on its shard, and DTensor's per-call sharding search costs seconds."""
        optimizer_class = OPTIMIZERS[self.optimizer]
        if optimizer_class is None or not trained:
            return []
        trained = [_held_shard(t) for t in trained]
        options = dict(self.optimizer_options)
        if not options.get("fused"):
            options.setdefault("foreach", True)  # PyTorch's default for CUDA parameters
        try:
            optimizer = optimizer_class(trained, **options)
        except (TypeError, ValueError, RuntimeError) as error:
            raise InputError(
                f"{optimizer_class.__name__} rejected optimizer_options {options}: {error}; "
                f"pass keyword arguments of torch.optim.{optimizer_class.__name__}"
            ) from error
        with _paused(recorder), _ScalarStandIn(), _StateOnly():
            optimizer.step()
        states = [t for state in optimizer.state.values() for t in state.values()
                  if isinstance(t, torch.Tensor)]
        if not (options.get("fused") or options.get("capturable")):
            recorder.host_storages = {
                state["step"].untyped_storage()._cdata
                for state in optimizer.state.values() if isinstance(state.get("step"), torch.Tensor)
            }
        recorder.phase = "optimizer"
        try:
            with _ScalarStandIn():
                optimizer.step()
        finally:
            host, recorder.host_storages = recorder.host_storages, set()
        return [t for t in states if t.untyped_storage()._cdata not in host]


def _updated_in_place(func: Any, args: tuple, kwargs: dict) -> None:
    """An optimizer's in-place multi-tensor or fused update changes no shape and returns
    nothing, so the trace records it without running its fake kernel (one meta kernel per
    tensor: the optimizer step of 70 B parameters would otherwise cost seconds)."""
    return None


#: The in-place updates :func:`_updated_in_place` stands in for.
IN_PLACE_UPDATES = [
    overload
    for name in dir(torch.ops.aten)
    if name.startswith(("_foreach_", "_fused_adam", "_fused_sgd", "_fused_adagrad"))
    and name.endswith("_")
    for overload in (getattr(getattr(torch.ops.aten, name), o)
                     for o in getattr(torch.ops.aten, name).overloads())
    if not overload._schema.returns
]
OWN_OUTPUTS.update(dict.fromkeys(IN_PLACE_UPDATES, _updated_in_place))


def _held_shard(parameter: torch.Tensor) -> torch.Tensor:
    """A sharded parameter's local shard with the local shard of its gradient (a plain
    parameter itself)."""
    held = local(parameter)
    if held is not parameter:
        held.grad = local(parameter.grad)
    return held


def _seen(values: Any, tensor: torch.Tensor) -> bool:
    return values.current(tensor) is not None


def _first_ref(values: Any, tensor: torch.Tensor) -> TensorRef:
    """``tensor`` as the value the step first read of its storage."""
    tensor = local(tensor)
    storage = tensor.untyped_storage()
    value_id = values.initial_value.get(storage._cdata, values.current(tensor))
    return tensor_ref(tensor, value_id, storage)


def _label_nodes(output: Any, module_path: str, inputs: Any = ()) -> None:
    """Stamp ``module_path`` on the autograd nodes between ``inputs`` and ``output`` not yet
    stamped. Module forward hooks run innermost first, so a node carries the innermost module
    that made it; the walk stops at the inputs' nodes and at nodes stamped already."""
    boundary = {t.grad_fn for t in _tensors(inputs) if t.grad_fn is not None}
    stack = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in boundary or _MODULE_KEY in node.metadata:
            continue
        node.metadata[_MODULE_KEY] = module_path
        stack.extend(next_node for next_node, _ in node.next_functions)


class _BackwardModules:
    """Stands in for the trace's module stack during backward: the module of an op is the one
    whose forward made the autograd node running it."""

    @property
    def path(self) -> str:
        node = torch._C._current_autograd_node()
        return "" if node is None else node.metadata.get(_MODULE_KEY, "")

    def failure_path(self, error: BaseException) -> str:
        return self.path


class _StateOnly(TorchDispatchMode):
    """For the unrecorded first step, which only has to make the optimizer's state: the
    multi-tensor and fused updates of the parameters and moments are skipped (their results are
    never read; on fake tensors they cost as much as the recorded step); the step counters
    still count, so bias corrections stay finite."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        name = func.overloadpacket.__name__
        counters = all(t.dim() == 0 for t in _tensors(args[:1]))  # ``step += 1`` still runs
        if name.startswith(("_foreach_", "_fused_")) and not counters:
            return args[0] if func._schema.returns else None
        return func(*args, **(kwargs or {}))


class _ScalarStandIn(TorchDispatchMode):
    """Answers ``Tensor.item()`` in the optimizer's step with 1: optimizers read scalars off
    tensors for step sizes (the step count for bias corrections, Adafactor's parameter norm),
    which fake tensors do not hold, and no value changes a cost. The read is a device-to-host
    copy, not a kernel, so it is not recorded either."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if func is torch.ops.aten._local_scalar_dense.default:
            return _ONE[args[0].dtype.is_floating_point]
        return func(*args, **(kwargs or {}))


_ONE = {True: 1.0, False: 1}


def attention_with_backward(
    recorder: _Recorder,
    operands: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    output: torch.Tensor,
    is_causal: bool,
) -> torch.Tensor:
    """``output`` of an intercepted attention call (:mod:`torchroofline.intercept`), joined to
    autograd: its backward is recorded as the one flash-attention backward kernel a GPU runs
    (reads dO, Q, K, V, O; writes dQ, dK, dV), not as the CPU build's decomposition."""
    return _AttentionBackward.apply(recorder, is_causal, output, *operands)


class _AttentionBackward(torch.autograd.Function):
    @staticmethod
    def forward(  # noqa: ANN205
        ctx, recorder: _Recorder, is_causal: bool, output: torch.Tensor, *operands: torch.Tensor
    ):
        ctx.recorder, ctx.is_causal = recorder, is_causal
        ctx.save_for_backward(*operands, output)
        with _paused(recorder):
            return output.view_as(output)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):  # noqa: ANN205
        recorder = ctx.recorder
        query, key, value, output = ctx.saved_tensors
        reads = recorder._reads([grad_output, query, key, value, output])
        with _paused(recorder):
            grads = tuple(t.new_empty(t.shape) for t in (query, key, value))
        name = "_scaled_dot_product_flash_attention_backward"
        recorder.record(
            f"aten.{name}", name, None, (grad_output, query, key, value, output),
            {"is_causal": ctx.is_causal}, grads, reads, False,
        )
        return None, None, None, *grads


def rnn_with_backward(
    recorder: _Recorder,
    name: str,
    call_args: tuple,
    result: tuple[torch.Tensor, ...],
    operands: Sequence[torch.Tensor],
) -> tuple[torch.Tensor, ...]:
    """``result`` of an intercepted cuDNN RNN call (output and final states), joined to
    autograd: its backward is recorded as the one ``_cudnn_rnn_backward`` call a GPU makes
    (reads the output gradients, input, initial states, weights and output; writes the
    gradients of input, initial states and weights), with the forward call's arguments."""
    return _RnnBackward.apply(recorder, name, call_args, len(result), *result, *operands)


class _RnnBackward(torch.autograd.Function):
    @staticmethod
    def forward(  # noqa: ANN205
        ctx, recorder: _Recorder, name: str, call_args: tuple, results: int,
        *tensors: torch.Tensor,
    ):
        ctx.recorder, ctx.name, ctx.call_args, ctx.results = recorder, name, call_args, results
        ctx.set_materialize_grads(False)  # an unused final state gets no zeros kernel
        ctx.save_for_backward(*tensors)
        with _paused(recorder):
            return tuple(t.view_as(t) for t in tensors[:results])

    @staticmethod
    def backward(ctx, *output_grads: torch.Tensor | None):  # noqa: ANN205
        recorder, saved = ctx.recorder, ctx.saved_tensors
        outputs, operands = saved[: ctx.results], saved[ctx.results:]
        given = [g for g in output_grads if g is not None]
        reads = recorder._reads([*given, *operands, outputs[0]])
        with _paused(recorder):
            grads = tuple(t.new_empty(t.shape) if t.requires_grad else None for t in operands)
        name = "_cudnn_rnn_backward"
        recorder.record(
            f"aten.{name}", name, None, ctx.call_args, {"cell": ctx.name},
            tuple(g for g in grads if g is not None), reads, False,
        )
        return (None, None, None, None, *(None for _ in outputs), *grads)


AUTOGRAD_CALLS.update(attention=attention_with_backward, rnn=rnn_with_backward)
