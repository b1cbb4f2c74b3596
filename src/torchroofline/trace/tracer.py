"""Stage 1: run the model once on fake tensors and record every aten op it executes.

The trace sees what a GPU would run: parameters and inputs become fake tensors on
``device="cuda"`` (fake CUDA tensors work on a CPU-only build and keep CUDA-side dispatch and
dtype rules). No tensor data is allocated and no arithmetic is done. Ops whose GPU kernel is one
library call but whose CPU-build dispatch is a decomposition (attention, cuDNN RNNs) are
intercepted above the dispatcher by a ``TorchFunctionMode`` and recorded as that one call.

The trace knows nothing of costs: it records, per op, the aten overload, its arguments (shape-only
tensors), the tensor *values* it reads and writes and the module that ran it. A value is one
version of one storage, so views of a buffer are one tensor and an in-place op makes a new
version of the buffer it writes.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    unset_fake_temporarily,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from ..errors import DataDependentError, InputError, ModelError, TorchrooflineError, user_line
from ._cuda_bindings import NO_CUDA_TEXTS, needs_cuda_device
from .collector import paused
from .data_sized import stand_in_output
from .fast_fake import (
    DIRECT_VIEWS,
    FACTORIES,
    decomposed_on_meta,
    direct_view,
    made_by_factory,
    uncached_if_long,
)
from .inputs import (
    _Converter,
    _know,
    _materialized_bytes,
    _module_tensors,
    _plain_tensor_attributes,
    _swapped_attributes,
)
from .intercept import OWN_OUTPUTS, Interceptor
from .modes import (
    autocast_state,
    fake_cuda_autograd_guard,
    host_cuda_calls,
    quiet_fake_tensor_log,
)
from .refs import StepTensors, TensorRef, Trace, TracedOp, base_name
from .schema import (
    _aliases_input,
    _functional_form,
    _mutated_arguments,
    _out_names,
    _tensors,
    _written_arguments,
)
from .shadow import known_value
from .values import ValueTable, local, tensor_ref

#: Default ceiling on the real tensors the real-data fallback may build (bytes).
REAL_FALLBACK_LIMIT_BYTES = 2 * 2**30

#: The real-data fallback first keeps as shapes (meta) every fake tensor over this share of
#: its limit, and runs the ops that read them on meta (:class:`_MixedCall`).
SHAPE_SHARE_OF_FALLBACK_LIMIT = 4

#: Error texts that mean "this op needs real data"; the real-data fallback handles them.
_DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException)
#: A CPU-only build raises this for the few CUDA ops that have no fake/meta kernel (e.g. nonzero).
#: Python-level checks in torch (nested tensors, cuDNN CTC) that say the same thing.
_NO_CUDA_ASSERT_TEXT = "Torch not compiled with CUDA enabled"
#: A meta kernel that needs a value (boolean-mask indexing calls nonzero) raises this.
_META_NEEDS_DATA_TEXTS = ("nonzero", "data-independent")
_DEVICE_MISMATCH_TEXTS = ("same device", "two devices", "Expected all tensors")
#: A host read of a fake tensor that torch refuses outright, not as a data-dependent op:
#: ``t.cpu().numpy()`` (token splits handed to NumPy) reads the values as ``.item()`` does.
_HOST_READ_TEXTS = (".numpy() is not supported for tensor subclasses",)


#: the ops that turn a real tensor made in forward into a fake one
_LIFTS = frozenset({torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default})


def meta_copies(tree: Any, *, keep_shape_only: bool = False) -> Any:
    """Each tensor in ``tree`` as a plain meta tensor of its shape, strides and dtype (no data
    kept, and no dispatch mode sees the copies); with ``keep_shape_only``, fake and meta
    tensors stay as they are (they hold no data either)."""

    def copy(leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor) or (
            keep_shape_only and (isinstance(leaf, FakeTensor) or leaf.is_meta)
        ):
            return leaf
        return torch.empty_strided(leaf.shape, leaf.stride(), dtype=leaf.dtype, device="meta")

    with torch._C._DisableTorchDispatch():
        return tree_map(copy, tree)


class _ModuleStack:
    """Tracks the qualified name of the module running now (for op records and error messages).

    Exit hooks run even when a forward raises (``always_call``), so the stack stays right when a
    model catches a submodule's exception. The first exit that sees an exception in flight is
    the innermost module it passed through: :meth:`failure_path` names that module.
    """

    def __init__(self, model: nn.Module) -> None:
        self._names = {id(module): name for name, module in model.named_modules()}
        self._stack: list[str] = []
        self._outer: BaseException | None = None  # what the caller was handling: not the model's
        self._raised: BaseException | None = None
        self._raised_in = ""

    @property
    def path(self) -> str:
        return self._stack[-1] if self._stack else ""

    def failure_path(self, error: BaseException) -> str:
        """The module ``error`` was raised in (the current one if no module exit saw it)."""
        return self._raised_in if error is self._raised else self.path

    def _enter(self, module: nn.Module, *_: Any) -> None:
        # a module outside the model's tree (a free function wrapped as one, as the kernels
        # hub's ``use_kernel_func_from_hub`` does for rotary embeddings) is part of the module
        # that calls it; called from the top level, where no module encloses it, its class
        # names it
        name = self._names.get(id(module))
        self._stack.append(name if name is not None else self.path or type(module).__name__)

    def _leave(self, *_: Any) -> None:
        error = sys.exc_info()[1]
        if error is not None and error is not self._outer and error is not self._raised:
            self._raised, self._raised_in = error, self.path
        if self._stack:
            self._stack.pop()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        self._outer = sys.exc_info()[1]
        pre = nn.modules.module.register_module_forward_pre_hook(self._enter)
        post = nn.modules.module.register_module_forward_hook(self._leave, always_call=True)
        try:
            yield
        finally:
            pre.remove()
            post.remove()


class _Recorder(TorchDispatchMode):
    """Records every aten op that reaches the dispatcher, with the values it reads and writes."""

    def __init__(self, values: ValueTable, modules: _ModuleStack, fake: bool) -> None:
        super().__init__()
        self.values = values
        self.modules = modules
        self.ops: list[TracedOp] = []
        self.current_op = ""
        self.paused = False
        self.phase = "forward"  #: stamped on every op recorded (TracedOp.phase)
        #: Python-level torch calls seen so far (:class:`~.intercept.Interceptor` counts them):
        #: stamped on every op recorded (TracedOp.python_call)
        self.python_calls = 0
        #: the value of each tensor lifted in forward (``torch.tensor([0, 2])``), in order,
        #: None where unknown
        self.lifts: list[torch.Tensor | None] = []
        #: ``lifts`` of the fake run that failed, when this one runs on real tensors
        self.fake_lifts: Sequence[torch.Tensor | None] = ()
        #: storages that live on the host in the real program (an optimizer's CPU step
        #: counters): ops that touch only these launch no GPU kernel and are not recorded
        self.host_storages: set[int] = set()
        #: what a training step's trace found (:class:`StepTensors`), set by its step runner
        self.step: StepTensors | None = None
        #: ops that raised "not linked with CUDA" once in this trace: later calls go straight to
        #: meta (training batch norm otherwise runs its whole decomposition twice per call)
        self.meta_only: set[Any] = set()
        self.fake = fake
        # fake tensors hold no data, so records may keep them; real ones become meta copies
        self._shape_only = (
            (lambda tree: tree) if fake else functools.partial(meta_copies, keep_shape_only=True)
        )
        #: how ops run: :func:`_call`, inside the fake mode that records (:class:`_FakeCall`),
        #: or on real tensors beside meta ones that hold no data (:class:`_MixedCall`)
        self.call: Callable[[Any, Any, tuple, dict, set[Any]], Any] = _call

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if self.paused or func.namespace in _UNRECORDED_NAMESPACES:
            return func(*args, **kwargs)
        return self.run_recorded(func, types, args, kwargs)

    def run_recorded(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        """Run ``func`` (with :attr:`call`) and record it, unless it only touches host storages."""
        self.current_op = _names(func)[0]
        _check_operand_dtypes(func, args)
        in_tensors = _tensors((args, kwargs))
        if self.host_storages and _on_host(in_tensors, self.host_storages):
            return func(*args, **kwargs)
        recorded, recorded_kwargs = _functional_form(func) or func, kwargs
        if recorded is not func:  # the out tensors' old values are no input of the op
            out_names = _out_names(func)
            recorded_kwargs = {key: value for key, value in kwargs.items() if key not in out_names}
            in_tensors = _tensors((args, recorded_kwargs))
        reads = self._reads(in_tensors)
        output = self.call(func, types, args, kwargs, self.meta_only)
        if func in _LIFTS:
            lifted = self._lifted_value(args[0], output)
            if lifted is not None:
                _know(self.values.known_storages, output, lifted)
        is_alias = recorded.is_view or (
            not _written_arguments(recorded) and _aliases_input(reads, output)
        )
        mutated = _mutated_arguments(recorded, args, recorded_kwargs, output)
        self.record(*_names(recorded), recorded, args, recorded_kwargs, output, reads, is_alias,
                    mutated)
        return output

    def _lifted_value(self, source: torch.Tensor, output: Any) -> torch.Tensor | None:
        """The value of a tensor built from Python values in forward, if known: faked, it is
        (Python values cannot come from fake data); real, after a fake run failed, only if
        that run made the same one at the same point — it stopped at the first op data
        decided, so its lifts are constants, while a later one may hold a data value (an
        ``.item()``) of the random inputs."""
        with unset_fake_temporarily():
            value = known_value(source)
        position = len(self.lifts)
        self.lifts.append(value)
        if value is None or isinstance(output, FakeTensor):
            return value
        fake = self.fake_lifts[position] if position < len(self.fake_lifts) else None
        same = (
            fake is not None and fake.shape == value.shape and fake.dtype == value.dtype
            and bool((fake == value).all())
        )
        return value if same else None

    def _reads(self, tensors: Sequence[torch.Tensor]) -> list[TensorRef]:
        if self.fake:
            for tensor in tensors:
                if not isinstance(tensor, FakeTensor) and not tensor.is_meta:
                    self._know_held_outside(tensor)
        return [self.values.read(tensor) for tensor in tensors]

    def _know_held_outside(self, tensor: torch.Tensor) -> None:
        """A real tensor in a fake trace is one the model holds outside its modules (a global,
        a closure's): program state, as a buffer is, so a small one is a known constant
        (``x[perm]`` with a global ``perm`` reads the rows it picks, not one element)."""
        mode = getattr(self.call, "mode", None)
        if tensor.untyped_storage()._cdata in self.values.initial_value or mode is None:
            return  # seen already, or no fake mode to convert it
        with unset_fake_temporarily():
            value = known_value(tensor)
        if value is not None:  # its views are of the fake copy the mode makes (and reuses)
            for each in (tensor, mode.fake_tensor_converter.from_real_tensor(mode, tensor)):
                self.values.hold(each)
                _know(self.values.known_storages, each, value)

    def record(
        self,
        name: str,
        base: str,
        func: Any,
        args: tuple,
        kwargs: dict,
        output: Any,
        reads: list[TensorRef],
        is_view: bool,
        also_written: Sequence[torch.Tensor] = (),
    ) -> None:
        out_tensors = _tensors(output) + list(also_written)
        if is_view:
            writes: tuple[TensorRef, ...] = ()
        else:
            writes = tuple(self.values.write(tensor) for tensor in out_tensors)
        self.ops.append(
            TracedOp(
                name=name,
                base=base,
                func=func,
                args=self._shape_only(args),
                kwargs=self._shape_only(kwargs),
                output=self._shape_only(output),
                reads=tuple(reads),
                writes=writes,
                module_path=self.modules.path,
                is_view=is_view,
                phase=self.phase,
                python_call=self.python_calls,
            )
        )


#: aten overload → (its full name, :func:`base_name`), filled as ops are met
_FUNC_NAMES: dict[Any, tuple[str, str]] = {}


def _names(func: Any) -> tuple[str, str]:
    """An aten overload's full name and :func:`base_name` (looked up once per overload)."""
    names = _FUNC_NAMES.get(func)
    if names is None:
        names = _FUNC_NAMES[func] = (str(func), base_name(func))
    return names


#: Namespaces of ops that are no GPU work: primitives (``prim.device``) and the profiler's
#: markers (every ``Optimizer.step`` opens a ``record_function``).
_UNRECORDED_NAMESPACES = frozenset({"prim", "profiler"})


def _on_host(tensors: Sequence[torch.Tensor], host_storages: set[int]) -> bool:
    """An op on host storages and 0-dim scalars only (``step += 1`` with a CPU ``tensor(1.)``)."""
    on_host = [t.untyped_storage()._cdata in host_storages for t in tensors]
    return any(on_host) and all(here or t.dim() == 0 for here, t in zip(on_host, tensors,
                                                                          strict=True))


#: Matmuls whose meta kernels (torch/_meta_registrations.py meta_mm, meta_addmm, meta_mv,
#: meta_addbmm) do not check what eager PyTorch's kernels do: that both matrix operands (these
#: argument positions) share a dtype. Without the check, fake tensors would analyse a model
#: eager PyTorch rejects, e.g. nn.Linear on an int64 input.
_SAME_DTYPE_OPERANDS: dict[Any, tuple[int, int]] = {
    torch.ops.aten.mm.default: (0, 1),
    torch.ops.aten.addmm.default: (1, 2),
    torch.ops.aten.mv.default: (0, 1),
    torch.ops.aten.addbmm.default: (1, 2),
}


def _check_operand_dtypes(func: Any, args: tuple) -> None:
    positions = _SAME_DTYPE_OPERANDS.get(func)
    if positions is None or len(args) <= max(positions):
        return
    first, second = (args[i] for i in positions)
    if first.dtype != second.dtype:
        raise RuntimeError(
            f"expected both matrix operands to have the same dtype, but got {first.dtype} and "
            f"{second.dtype}"
        )


def _call(func: Any, types: Any, args: tuple, kwargs: dict, meta_only: set[Any]) -> Any:
    """Run ``func``; a CUDA op that a CPU-only build cannot fake (e.g. ``native_batch_norm``)
    is run on meta tensors instead and its outputs re-made as fake CUDA tensors. ``meta_only``
    (the trace's own) remembers such ops, so each fails once per trace. Scaled matmuls get
    their outputs from shapes alone (:data:`intercept.OWN_OUTPUTS`)."""
    own_output = OWN_OUTPUTS.get(func)
    if own_output is not None:
        return own_output(func, args, kwargs)
    if func in meta_only and any(t.is_cuda for t in _tensors(args)):
        return _on_meta_or_cpu(func, args, kwargs)
    try:
        return func(*args, **kwargs)
    except RuntimeError as error:
        if not needs_cuda_device(error):
            raise
        meta_only.add(func)
        return _on_meta_or_cpu(func, args, kwargs)


def _on_meta_or_cpu(func: Any, args: tuple, kwargs: dict) -> Any:
    """:func:`_call_on_meta`; an op with no meta kernel either fails as needing a CUDA device,
    so the whole trace is redone on fake CPU tensors (:meth:`_TraceFailure.cpu_retrace_reason`)."""
    try:
        return _call_on_meta(func, args, kwargs)
    except NotImplementedError as error:
        failed_op = str(error).split(": attempted", 1)[0].split(".")[0]
        if failed_op != func._schema.name:  # an op inside it (nonzero) needs data
            raise
        raise RuntimeError(f"{func} has no meta kernel and {NO_CUDA_TEXTS[0]}") from error


#: (op, the metadata of its arguments) → the layout of its outputs, as :func:`_call_on_meta`
#: found them: a meta kernel's outputs depend on shapes, strides, dtypes and plain arguments
#: only, and a batch-norm meta kernel (a Python decomposition) costs milliseconds per call
_META_OUTPUTS: dict[tuple, tuple[Any, tuple]] = {}
_META_OUTPUTS_LIMIT = 4096


def _signature(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return ("tensor", tuple(leaf.shape), tuple(leaf.stride()), leaf.dtype)
    return leaf


class _RecordingFakeMode(FakeTensorMode):
    """The trace's fake mode, which records too: an op that reaches it from outside it goes to
    :attr:`recorder`, which runs it here (:class:`_FakeCall`) and records it. One Python
    dispatch mode per op instead of a recorder mode above the fake one: each mode an op passes
    costs its push and pop (~0.02 ms per op, as much as recording it)."""

    def __init__(self, stand_ins: bool = False) -> None:
        # real tensors a model holds outside its modules (a closure, a global) become fake too
        super().__init__(allow_non_fake_inputs=True)
        #: the recorder of the trace running now; None outside one
        self.recorder: _Recorder | None = None
        #: an op whose output sizes depend on values runs on stand-in values instead of
        #: raising (:func:`data_sized.stand_in_output`)
        self.stand_ins = stand_ins
        #: "op in 'module'" for each op sized so, first seen first
        self.sized_ops: dict[str, None] = {}
        #: True while an op runs: what it calls (a decomposition's ops) is part of it
        self._running_op = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        recorder = self.recorder
        if (recorder is None or self._running_op or recorder.paused
                or func.namespace in _UNRECORDED_NAMESPACES):
            return super().__torch_dispatch__(func, types, args, kwargs or {})
        self._running_op = True
        try:
            return recorder.run_recorded(func, types, args, kwargs or {})
        finally:
            self._running_op = False


class _FakeCall:
    """How :class:`_RecordingFakeMode` runs an op it records: straight into fake dispatch. The
    paths of :func:`_call` that make tensors themselves (outputs from shapes, the meta
    fallback) run with the mode entered, so the tensors they make are fake."""

    def __init__(self, mode: _RecordingFakeMode) -> None:
        self.mode = mode

    def __call__(self, func: Any, types: Any, args: tuple, kwargs: dict, meta_only: set[Any]
                 ) -> Any:
        try:
            return self._dispatch(func, types, args, kwargs, meta_only)
        except (DynamicOutputShapeException, NotImplementedError):
            # its output sizes depend on values (a meta kernel that needs them raises
            # NotImplementedError): on stand-in values where the trace allows it
            if not self.mode.stand_ins or torch.Tag.dynamic_output_shape not in func.tags:
                raise
            recorder = self.mode.recorder
            where = recorder.modules.path if recorder is not None else ""
            self.mode.sized_ops[f"{func} in '{where or '<top level>'}'"] = None
            with self.mode:
                return stand_in_output(func, args, kwargs)

    def _dispatch(self, func: Any, types: Any, args: tuple, kwargs: dict, meta_only: set[Any]
                  ) -> Any:
        view = direct_view(self.mode, func, args, kwargs) if func in DIRECT_VIEWS else None
        if view is not None:
            return view
        made = made_by_factory(self.mode, func, args, kwargs) if func in FACTORIES else None
        if made is not None:
            return made
        if func not in OWN_OUTPUTS and func not in meta_only:
            decomposed = decomposed_on_meta(self.mode, func, args, kwargs)
            if decomposed is not None:
                return decomposed
            try:
                with uncached_if_long(self.mode, args):
                    return FakeTensorMode.__torch_dispatch__(self.mode, func, types, args, kwargs)
            except RuntimeError as error:
                if not needs_cuda_device(error):
                    raise
                meta_only.add(func)
        with self.mode:
            return _call(func, types, args, kwargs, meta_only)


@contextlib.contextmanager
def _recording(recorder: _Recorder, fake_mode: _RecordingFakeMode | None) -> Iterator[None]:
    """``recorder`` records the ops run in the block: through ``fake_mode`` where the trace is
    on fake tensors, else as a dispatch mode of its own."""
    if fake_mode is None:
        with recorder:
            yield
        return
    fake_mode.recorder, recorder.call = recorder, _FakeCall(fake_mode)
    try:
        yield
    finally:
        fake_mode.recorder = None


class _MixedCall:
    """Runs ops on real tensors beside meta ones (big tensors made as shapes only,
    :mod:`torchroofline.seeded`): an op that reads a meta tensor, or a real one such an op
    wrote, runs on meta and its outputs are meta, so values that are not known are never
    mistaken for given ones; an op on known values runs for real."""

    def __init__(self) -> None:
        #: storages of real tensors written from meta ones: their values are unknown
        self.unknown_storages: set[int] = set()

    def __call__(self, func: Any, types: Any, args: tuple, kwargs: dict, meta_only: set[Any]
                 ) -> Any:
        tensors = _tensors((args, kwargs))
        if not any(t.is_meta or t.untyped_storage()._cdata in self.unknown_storages
                   for t in tensors):
            return _call(func, types, args, kwargs, meta_only)
        for position, name in _written_arguments(func):
            written = args[position] if position < len(args) else kwargs.get(name)
            if isinstance(written, torch.Tensor) and not written.is_meta:
                self.unknown_storages.add(written.untyped_storage()._cdata)
        if all(t.is_meta for t in tensors):  # meta kernels keep views and in-place writes
            return func(*args, **kwargs)
        return _call_on_meta(func, args, kwargs, device="meta")


def _call_on_meta(func: Any, args: tuple, kwargs: dict, device: Any = None) -> Any:
    """Run ``func`` on meta copies of its arguments; its outputs are re-made on ``device``
    (default: the arguments'); an output that is an argument, in place, is that argument."""
    leaves, _ = tree_flatten((args, kwargs))
    key = (func, tuple(_signature(leaf) for leaf in leaves))
    try:
        found = _META_OUTPUTS.get(key)
    except TypeError:  # an unhashable plain argument: no caching
        key, found = None, None
    if found is None:
        found = _meta_output_layout(func, args, kwargs, leaves)
        if key is not None and len(_META_OUTPUTS) < _META_OUTPUTS_LIMIT:
            _META_OUTPUTS[key] = found
    spec, layouts = found
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    if device is None:
        device = tensors[0].device if tensors else "cuda"
    made = [
        leaves[layout[1]] if layout[0] == "argument"  # an in-place op returned its argument
        else torch.empty_strided(*layout[1:3], dtype=layout[3], device=device)
        if layout[0] == "tensor"
        else layout[1]
        for layout in layouts
    ]
    return tree_unflatten(made, spec)


def _meta_output_layout(func: Any, args: tuple, kwargs: dict, leaves: list) -> tuple[Any, tuple]:
    """(tree spec, per output leaf ``("argument", index of the argument leaf it is)``,
    ``("tensor", shape, stride, dtype)`` to make, or ``("value", it)``) of ``func`` run on
    meta copies of its arguments."""
    position: dict[int, int] = {}

    def to_meta(index: int, leaf: Any) -> Any:
        if not isinstance(leaf, torch.Tensor):
            return leaf
        meta = torch.empty_strided(leaf.shape, leaf.stride(), dtype=leaf.dtype, device="meta")
        position[id(meta)] = index
        return meta

    _, spec_in = tree_flatten((args, kwargs))
    with unset_fake_temporarily():
        meta_args, meta_kwargs = tree_unflatten(
            [to_meta(i, leaf) for i, leaf in enumerate(leaves)], spec_in
        )
        meta_output = func(*meta_args, **meta_kwargs)
    out_leaves, spec = tree_flatten(meta_output)
    layouts = tuple(
        ("argument", position[id(leaf)]) if isinstance(leaf, torch.Tensor) and id(leaf) in position
        else ("tensor", tuple(leaf.shape), tuple(leaf.stride()), leaf.dtype)
        if isinstance(leaf, torch.Tensor)
        else ("value", leaf)
        for leaf in out_leaves
    )
    return spec, layouts


# --- The trace itself ------------------------------------------------------------------------


def check_inputs(model: Any, inputs: Any) -> tuple:
    """Validate what the user passed; returns the forward arguments as a tuple."""
    if not isinstance(model, nn.Module):
        raise InputError(
            f"model must be a torch.nn.Module, got {type(model).__name__}; "
            "wrap a function in an nn.Module whose forward calls it"
        )
    if isinstance(inputs, torch.Tensor):
        return (inputs,)
    if isinstance(inputs, (list, tuple)):
        return tuple(inputs)
    raise InputError(
        f"inputs must be a tensor or a tuple/list of forward arguments, got {type(inputs).__name__}"
    )


class StepRunner(Protocol):
    """What turns a forward trace into a training step's (:class:`torchroofline.training.Step`)."""

    def prepare(
        self, model: nn.Module, module_tensors: Mapping[str, torch.Tensor], args: tuple
    ) -> contextlib.AbstractContextManager:
        """Mark the trace's parameters (or, in a model without any, its floating inputs) as
        trained; the context it returns is active while the forward and the step run."""

    def run(
        self, model: nn.Module, module_tensors: Mapping[str, torch.Tensor], output: Any,
        recorder: _Recorder,
    ) -> Any:
        """Run loss, backward and the optimizer step under ``recorder`` (setting its
        ``phase`` and ``step``); returns what the step keeps besides the parameters and the
        optimizer's state (the loss)."""


@torch.inference_mode(False)
def _run(
    model: nn.Module,
    inputs: tuple,
    fake_mode: _RecordingFakeMode | None,
    device: str,
    step: StepRunner | None = None,
    shapes_over_bytes: int | None = None,
    fake_lifts: Sequence[torch.Tensor | None] = (),
    autocast: torch.dtype | None = None,
) -> tuple[_Recorder, ValueTable, Any]:
    convert = _Converter(fake_mode, device, shapes_over_bytes)
    outer = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with outer:  # entered once here, each conversion's own entry is a no-op (~15 µs each)
        params = {name: convert.buffer(t) for name, t in _module_tensors(model).items()}
        args = tree_map(lambda x: convert(x) if isinstance(x, torch.Tensor) else x, inputs)
    step_context = (
        contextlib.nullcontext() if step is None else step.prepare(model, params, args)
    )
    plain_attributes = _plain_tensor_attributes(model)
    values = ValueTable()
    values.known_storages = convert.known_storages
    modules = _ModuleStack(model)
    recorder = _Recorder(values, modules, fake=fake_mode is not None)
    recorder.fake_lifts = fake_lifts
    if shapes_over_bytes is not None:
        recorder.call = _MixedCall()
    with (
        paused(),
        warnings.catch_warnings(),
        quiet_fake_tensor_log(),
        host_cuda_calls(),
        torch.no_grad() if step is None else torch.enable_grad(),
        autocast_state(device, autocast),
        _swapped_attributes(plain_attributes, convert),
        outer,
        modules.active(),
        step_context,
        _recording(recorder, fake_mode),
        Interceptor(recorder),
        fake_cuda_autograd_guard(device, recorder),
    ):
        warnings.simplefilter("ignore")  # CPU-build warnings (no cuDNN) are not the user's
        try:
            output = torch.func.functional_call(model, params, args, strict=False)
            if step is not None:
                output = step.run(model, params, output, recorder)
        except TorchrooflineError:  # the step's own one-line errors (a loss that trains nothing)
            raise
        except (Exception, SystemExit) as error:  # noqa: BLE001 — re-raised with where it happened
            raise _TraceFailure(
                error, recorder.current_op, modules.failure_path(error), recorder.lifts
            ) from error
    attributes = [convert(value) for _, _, value in plain_attributes]
    values.resident = _resident(model, params, attributes, args, values)
    _given_value_ids(values, args, params, fake_mode is None and not convert.filled_at_random)
    return recorder, values, output


def _given_value_ids(
    values: ValueTable, args: Any, params: Mapping[str, torch.Tensor], on_real_values: bool
) -> None:
    """Record where given values attach: the value each argument tensor and each parameter or
    buffer starts as (Trace.argument_value_ids, Trace.module_value_ids)."""
    values.argument_value_ids = tuple(
        values.initial_value.get(local(t).untyped_storage()._cdata, 0) for t in _tensors(args)
    )
    values.module_value_ids = {
        name: values.initial_value.get(local(t).untyped_storage()._cdata, 0)
        for name, t in params.items()
    }
    values.ran_on_given_values = on_real_values


def _resident(
    model: nn.Module,
    module_tensors: Mapping[str, torch.Tensor],
    attributes: Sequence[torch.Tensor],
    args: Any,
    values: ValueTable,
) -> tuple[tuple[str, TensorRef], ...]:
    """(kind, tensor) for each storage of the model's parameters and buffers (tensors it keeps
    as plain attributes count as buffers) and of the forward arguments, first kind wins (a
    tied weight is one parameter)."""
    parameter_names = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    tagged = [
        ("parameters" if name in parameter_names else "buffers", tensor)
        for name, tensor in module_tensors.items()
    ]
    tagged += [("buffers", tensor) for tensor in attributes]
    tagged += [("inputs", tensor) for tensor in _tensors(args)]
    seen: dict[int, tuple[str, TensorRef]] = {}
    for kind, tensor in tagged:
        tensor = local(tensor)
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key not in seen:
            seen[key] = (kind, tensor_ref(tensor, values.initial_value.get(key, 0), storage))
    return tuple(seen.values())


class _TraceFailure(Exception):
    def __init__(
        self,
        error: Exception | SystemExit,
        op: str,
        module_path: str,
        lifts: Sequence[torch.Tensor | None] = (),
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.lifts = tuple(lifts)  #: :attr:`_Recorder.lifts` up to the failure
        self.op = op
        self.module_path = module_path or "<top level>"

    @property
    def data_dependent(self) -> bool:
        text = str(self.error)
        if isinstance(self.error, NotImplementedError):
            return any(needle in text for needle in _META_NEEDS_DATA_TEXTS)
        return (
            isinstance(self.error, _DATA_DEPENDENT_ERRORS) or needs_cuda_device(text)
            or any(needle in text for needle in _HOST_READ_TEXTS)
        )

    @property
    def device_mismatch(self) -> bool:
        return any(text in str(self.error) for text in _DEVICE_MISMATCH_TEXTS)

    def cpu_retrace_reason(self, device: str) -> str | None:
        """Why a trace on fake ``device`` tensors should be redone on fake CPU ones, if it should.

        A CPU-only build cannot run some Python bindings on fake CUDA tensors at all (``copy_``,
        ``__setitem__`` open a CUDA device guard before dispatch); fake CPU tensors trace them
        without real data."""
        if device == "cpu":
            return None
        if self.device_mismatch:
            return f"the model mixes devices on '{device}'"
        if needs_cuda_device(self.error) or _NO_CUDA_ASSERT_TEXT in str(self.error):
            return "this PyTorch build cannot run it on fake CUDA tensors without a CUDA device"
        return None

    def model_error(self, model_name: str) -> ModelError:
        """The one line: the error, the user's line it came from, and the op that raised it
        (unless that line raised it itself: then the last op recorded did not)."""
        first_line = str(self.error).strip().splitlines()[0] if str(self.error).strip() else ""
        line = user_line(self.error)
        if line is not None and line.raised_here:
            where, fix = f"{line}", "fix the model's code there"
        else:
            where = f"{self.op or 'start'}" + (f" called from {line.quoted}" if line else "")
            fix = "check the inputs' shapes and dtypes against the model"
        return ModelError(
            f"{model_name} raised {type(self.error).__name__} at {where} in module "
            f"'{self.module_path}': {first_line[:300]} ({fix})"
        )


def trace_model(
    model: nn.Module,
    inputs: Any,
    *,
    device: str = "cuda",
    real_fallback_limit_bytes: int = REAL_FALLBACK_LIMIT_BYTES,
    name: str | None = None,
    step: StepRunner | None = None,
    autocast: torch.dtype | None = None,
    fake_mode: _RecordingFakeMode | None = None,
) -> Trace:
    """Run ``model(*inputs)`` once on fake tensors on ``device`` and record every op.

    ``step`` makes it a training step: after the forward, ``step`` runs the loss, backward and
    the optimizer under the same recorder (:mod:`torchroofline.training`). ``autocast`` (a
    dtype) runs an inference forward under autocast in it (:func:`.modes.autocast_state`); any
    autocast the caller entered is off in the trace. The trace also leaves the caller's
    ``torch.inference_mode``: under it PyTorch does not decompose composite ops
    (``aten.linear`` reaches the dispatcher whole), so the ops would differ from a GPU run's.

    Falls back to fake tensors on the CPU when the model mixes devices, and to real tensors on
    the CPU when an op needs real data (``.item()``, ``nonzero``, control flow on values), as
    long as the real tensors fit in ``real_fallback_limit_bytes``; each fallback is named in
    ``Trace.notes``. ``fake_mode`` is the mode to trace in, where the model's tensors were
    made in it already (a distributed job's shards, :mod:`.distributed`): no fallback then.
    """
    args = check_inputs(model, inputs)
    model_name = name or type(model).__name__
    notes: list[str] = []
    try:
        recorder, values, output = _run(
            model, args, fake_mode or _RecordingFakeMode(), device, step, autocast=autocast
        )
    except _TraceFailure as failure:
        if fake_mode is not None:
            raise failure.model_error(model_name) from failure.error
        cpu_reason = failure.cpu_retrace_reason(device)
        if cpu_reason:
            notes.append(
                f"traced on fake CPU tensors: {cpu_reason} "
                f"({failure.op} in '{failure.module_path}')"
            )
            return _with_notes(
                trace_model(
                    model,
                    args,
                    device="cpu",
                    real_fallback_limit_bytes=real_fallback_limit_bytes,
                    name=model_name,
                    step=step,
                    autocast=autocast,
                ),
                notes,
            )
        if not failure.data_dependent:
            raise failure.model_error(model_name) from failure.error
        recorder, values, output, device = _real_fallback(
            model, args, failure, model_name, real_fallback_limit_bytes, notes, step, device,
            autocast,
        )
    outputs = {values.current(t) for t in _tensors(output)} - {None}
    output_refs = tuple(ref for ref in map(values.output_ref, _tensors(output)) if ref)
    return Trace(
        model_name=model_name,
        ops=tuple(recorder.ops),
        input_value_ids=frozenset(values.input_value_ids),
        output_value_ids=frozenset(outputs | values.mutated_initial_values()),
        params=sum(p.numel() for p in model.parameters()),
        notes=tuple(notes),
        device=device,
        output_refs=output_refs,
        constants=values.constants(),
        resident=values.resident,
        step=recorder.step,
        argument_value_ids=values.argument_value_ids,
        module_value_ids=values.module_value_ids,
        ran_on_given_values=values.ran_on_given_values,
        returns_tensor=any(True for _ in _tensors(output)),
    )


def _with_notes(trace: Trace, notes: list[str]) -> Trace:
    return Trace(**{**trace.__dict__, "notes": tuple(notes) + trace.notes})


def _real_fallback(
    model: nn.Module,
    args: tuple,
    failure: _TraceFailure,
    model_name: str,
    limit_bytes: int,
    notes: list[str],
    step: StepRunner | None,
    device: str,
    autocast: torch.dtype | None = None,
) -> tuple[_Recorder, ValueTable, Any, str]:
    """The trace again, on real CPU tensors where they fit in ``limit_bytes``, else on fake
    ones with data-sized ops run on stand-in values (:func:`_stand_in_run`); returns
    the run and the device it traced on."""
    needed = _materialized_bytes(model, args)
    shapes_over_bytes = limit_bytes // SHAPE_SHARE_OF_FALLBACK_LIMIT
    needed_with_shapes = _materialized_bytes(model, args, shapes_over_bytes)
    if needed_with_shapes < needed and needed_with_shapes <= limit_bytes:
        # meta tensors and big fake ones stay shapes (a model with its experts made shape
        # only): enough unless the op that needs data reads one of them
        try:
            run = _run(model, args, None, "cpu", step, shapes_over_bytes, failure.lifts, autocast)
        except _TraceFailure:
            pass
        else:
            notes.append(
                f"traced with real CPU tensors: {failure.op} in '{failure.module_path}' needs "
                f"real data (fake tensors up to {shapes_over_bytes / 2**20:,.0f} MiB were "
                "filled with random values; meta and bigger ones stayed shapes)"
            )
            return (*run, "cpu")
    if needed > limit_bytes:
        too_big = (
            f"real tensors would take {needed / 2**20:,.0f} MiB, over the "
            f"{limit_bytes / 2**20:,.0f} MiB limit"
        )
        run = _stand_in_run(model, args, model_name, too_big, step, device, autocast)
        notes.append(
            f"bound for every size the data could give: {', '.join(run[0].sized_ops)} size "
            f"outputs by values and {too_big}, so they ran on stand-in values (the bound "
            "charges what they compute as possibly empty)"
        )
        return (*run[1:], device)
    notes.append(
        f"traced with real CPU tensors: {failure.op} in '{failure.module_path}' needs real data "
        "(fake/meta tensors were filled with random values)"
    )
    try:
        run = _run(model, args, None, "cpu", step, fake_lifts=failure.lifts, autocast=autocast)
        return (*run, "cpu")
    except _TraceFailure as real_failure:
        raise real_failure.model_error(model_name) from real_failure.error


def _stand_in_run(
    model: nn.Module,
    args: tuple,
    model_name: str,
    too_big: str,
    step: StepRunner | None,
    device: str,
    autocast: torch.dtype | None = None,
) -> tuple[_RecordingFakeMode, _Recorder, ValueTable, Any]:
    """The trace on fake tensors, each op that sizes its outputs by values (``nonzero``,
    ``x[mask]``, ``unique``…) run on stand-in values (:mod:`.data_sized`): the bound charges
    what such ops compute as possibly empty, so it holds for every size. Raises
    DataDependentError where no such bound exists: a value becomes a Python number or decides
    a branch (``.item()``, ``if x.sum() > 0``), or the program fails on the sizes drawn."""
    mode = _RecordingFakeMode(stand_ins=True)
    try:
        return (mode, *_run(model, args, mode, device, step, autocast=autocast))
    except _TraceFailure as failure:
        why = (
            "a value becomes a Python number or decides a branch, so no bound holds for every "
            "value"
            if failure.data_dependent
            else "it fails on the sizes drawn for its data-sized outputs "
            f"({type(failure.error).__name__}), so no bound holds for every size"
        )
        raise DataDependentError(
            f"{model_name} needs real data at {failure.op} in module '{failure.module_path}' "
            f"({why}), and {too_big}; raise real_fallback_limit_bytes or make that code "
            "shape-static"
        ) from failure.error
