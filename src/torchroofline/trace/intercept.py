"""Library calls recorded as the one kernel a GPU runs, caught above the dispatcher.

On a GPU, ``F.scaled_dot_product_attention`` is one flash / memory-efficient attention kernel
and ``torch._VF.lstm``/``gru``/``rnn_*`` one cuDNN RNN call; on a CPU-only build they decompose
into many aten ops before the dispatcher sees them. :class:`Interceptor`, a
``TorchFunctionMode``, catches them first and records each as that one call. It also spells
out in aten ops the few Python bindings a CPU-only build cannot run on fake CUDA tensors
(:mod:`torchroofline._cuda_bindings`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ._cuda_bindings import DEVICE_MOVES, SPELLINGS, UnsupportedIndex, needs_cuda_device

if TYPE_CHECKING:
    from .tracer import _Recorder as Recorder


#: How a training step joins an intercepted call to autograd ("attention", "rnn"): functions
#: that record the call's one backward kernel, registered by :mod:`torchroofline.training`
#: (a later stage). An inference trace runs without gradients and never calls them.
AUTOGRAD_CALLS: dict[str, Callable[..., Any]] = {}


def _intercept_sdpa(recorder: Recorder, args: tuple, kwargs: dict) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` → one attention kernel (flash / memory-efficient)."""
    query, key, value = args[:3]
    mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
    inputs = [t for t in (query, key, value, mask) if isinstance(t, torch.Tensor)]
    reads = recorder._reads(inputs)
    with _paused(recorder):
        output = query.new_empty((*query.shape[:-1], value.shape[-1]))
    is_causal = kwargs.get("is_causal", args[5] if len(args) > 5 else False)
    recorder.record(
        "aten.scaled_dot_product_attention",
        "scaled_dot_product_attention",
        None,
        (query, key, value),
        {"is_causal": bool(is_causal), "has_mask": mask is not None},
        output,
        reads,
        False,
    )
    joined = AUTOGRAD_CALLS.get("attention")
    if joined and torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        return joined(recorder, (query, key, value), output, bool(is_causal))
    return output


#: torch._VF RNN entry points, recorded as one cuDNN RNN call each.
RNN_CALLS = ("lstm", "gru", "rnn_tanh", "rnn_relu")


def _intercept_rnn(recorder: Recorder, name: str, args: tuple, kwargs: dict) -> Any:
    """``torch._VF.lstm/gru/rnn_*`` (padded input) → one cuDNN RNN call, recorded with the
    call's own arguments (input, state, flat weights, has_biases, num_layers, dropout, train,
    bidirectional, batch_first).

    Returns ``NotImplemented`` for packed sequences, which then trace by decomposition.
    """
    is_lstm = name == "lstm"
    packed = isinstance(args[1], torch.Tensor) if is_lstm else isinstance(args[2], torch.Tensor)
    if packed:
        return NotImplemented
    input_, hx, params, _biases, _layers, _dropout, _train, bidirectional, _batch_first = args
    hidden_states = list(hx) if is_lstm else [hx]
    directions = 2 if bidirectional else 1
    hidden_out = params[1].shape[1]  # w_hh: proj_size when an LSTM has a projection, else hidden
    reads = recorder._reads([input_, *hidden_states, *params])
    with _paused(recorder):
        output = input_.new_empty((*input_.shape[:-1], directions * hidden_out))
        new_states = tuple(state.new_empty(state.shape) for state in hidden_states)
    result = (output, *new_states)
    recorder.record(f"aten.{name}.input", name, None, args, kwargs, result, reads, False)
    operands = [input_, *hidden_states, *params]
    joined = AUTOGRAD_CALLS.get("rnn")
    if joined and torch.is_grad_enabled() and any(t.requires_grad for t in operands):
        return joined(recorder, name, args, result, operands)
    return result


@contextlib.contextmanager
def _paused(recorder: Recorder) -> Iterator[None]:
    recorder.paused = True
    try:
        yield
    finally:
        recorder.paused = False


def _asks_for_cuda(device: Any) -> bool:
    """Whether a ``device`` argument names a CUDA device (``"cuda"``, ``"cuda:0"``, one)."""
    if isinstance(device, str):
        return device.startswith("cuda")
    return isinstance(device, torch.device) and device.type == "cuda"


class Interceptor(TorchFunctionMode):
    """Catches library calls above the dispatcher, before they decompose."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder
        self._handlers: dict[Any, Callable[[tuple, dict], Any]] = {
            F.scaled_dot_product_attention: lambda a, k: _intercept_sdpa(recorder, a, k),
            torch._C._nn.scaled_dot_product_attention: lambda a, k: _intercept_sdpa(
                recorder, a, k
            ),
        }
        #: bindings that raised for want of a CUDA device in this trace: later calls try their
        #: aten spelling first (raising and catching costs ~0.03 ms a call: 100,000 slices)
        self._spelled_first: set[Any] = set()
        for method, spelling in DEVICE_MOVES.items():
            self._handlers[method] = lambda a, k, spelling=spelling: spelling(*a, **k)
        # handlers hold the recorder, never this mode: a cycle through the mode would keep the
        # whole trace alive until the next cyclic collection
        for name in RNN_CALLS:
            self._handlers[getattr(torch._VF, name)] = functools.partial(
                _intercept_rnn, recorder, name
            )

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if not self.recorder.paused:  # each call (nested ones too: F's Python functionals')
            self.recorder.python_calls += 1
        if not self.recorder.fake and _asks_for_cuda(kwargs.get("device")):
            # a real-data run is on the CPU, where its tensors stand for the GPU's (as
            # ``x.cuda()`` does here): ``torch.zeros(n, device="cuda")`` is made there too
            kwargs = {**kwargs, "device": "cpu"}
        handler = self._handlers.get(func)
        if handler is not None and not self.recorder.paused:
            self.recorder.current_op = getattr(func, "__name__", str(func))
            result = handler(args, kwargs)
            if result is not NotImplemented:
                return result
        if func in self._spelled_first:
            try:
                return SPELLINGS[func](*args, **kwargs)
            except UnsupportedIndex:
                pass
        try:
            if inspect.isfunction(func) and func.__module__ == "torch.nn.functional":
                # a Python-level functional (F.multi_head_attention_forward): keep this mode on
                # inside it, so the attention and indexing it calls are caught too
                with self:
                    return torch.overrides.redispatch_function(func, types, args, kwargs)
            return func(*args, **kwargs)
        except RuntimeError as error:
            if not needs_cuda_device(error):
                raise
            # raised above the dispatcher, so no op was recorded: spell it in aten ops
            spelling = SPELLINGS.get(func)
            if spelling is not None and func not in self._spelled_first:
                try:
                    output = spelling(*args, **kwargs)
                except UnsupportedIndex:
                    pass
                else:
                    self._spelled_first.add(func)
                    return output
            self.recorder.current_op = getattr(func, "__name__", str(func))
            raise


# --- Scaled (quantized) matmuls: outputs the trace makes itself ---------------------------------


def _bound_arguments(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """``func``'s arguments by schema name (positional, then keyword, then schema defaults)."""
    bound = {}
    for position, argument in enumerate(func._schema.arguments):
        if position < len(args):
            bound[argument.name] = args[position]
        elif argument.name in kwargs:
            bound[argument.name] = kwargs[argument.name]
        elif argument.has_default_value():
            bound[argument.name] = argument.default_value
    return bound


def _scaled_mm_output(func: Any, args: tuple, kwargs: dict) -> torch.Tensor:
    """``_scaled_mm``/``_scaled_mm_v2``: (M, K) @ (K, N) → (M, N) in ``out_dtype`` (default: the
    operands' dtype), row-major as the meta kernel makes it."""
    bound = _bound_arguments(func, args, kwargs)
    left, right = bound["self"], bound["mat2"]
    if left.dim() != 2 or right.dim() != 2 or left.shape[1] != right.shape[0]:
        raise RuntimeError(
            f"{func}: mat1 and mat2 shapes cannot be multiplied "
            f"({'x'.join(map(str, left.shape))} and {'x'.join(map(str, right.shape))})"
        )
    dtype = bound.get("out_dtype") or left.dtype
    return left.new_empty((left.shape[0], right.shape[1]), dtype=dtype)


def _grouped_output_shape(left: torch.Tensor, right: torch.Tensor, offs: Any) -> tuple[int, ...]:
    """The output of a grouped matmul (``torch/_meta_registrations.py``,
    ``_create_grouped_mm_output_tensor``): 2D×2D splits K into ``offs.numel()`` groups, 2D×3D
    the rows of the left operand, 3D×2D the columns of the right one, 3D×3D is a batch."""
    shapes = {
        (2, 2): lambda: (offs.shape[0], left.shape[0], right.shape[1]),
        (2, 3): lambda: (left.shape[0], right.shape[-1]),
        (3, 2): lambda: (left.shape[1], right.shape[1]),
        (3, 3): lambda: (left.shape[0], left.shape[1], right.shape[-1]),
    }
    ranks = (left.dim(), right.dim())
    if ranks not in shapes or (2 in ranks and offs is None):
        raise RuntimeError(
            f"grouped matmul of a {ranks[0]}D and a {ranks[1]}D operand: expected 2D or 3D "
            "operands, with offs where either is 2D"
        )
    return tuple(shapes[ranks]())


def _scaled_grouped_mm_output(func: Any, args: tuple, kwargs: dict) -> torch.Tensor:
    """``_scaled_grouped_mm``/``_v2``: the grouped output in ``out_dtype`` (default bf16, as the
    CUDA kernel writes)."""
    bound = _bound_arguments(func, args, kwargs)
    left = bound["self"]
    shape = _grouped_output_shape(left, bound["mat2"], bound.get("offs"))
    return left.new_empty(shape, dtype=bound.get("out_dtype") or torch.bfloat16)


def _fused_lstm_cell_output(func: Any, args: tuple, kwargs: dict) -> tuple[torch.Tensor, ...]:
    """``_thnn_fused_lstm_cell`` (hy, cy, workspace), shaped as its meta kernel makes them
    (``torch/_meta_registrations.py``): that kernel reads ``.device`` of each bias, so a cell
    without biases (``nn.LSTMCell(bias=False)``) fails there."""
    bound = _bound_arguments(func, args, kwargs)
    if bound.get("input_bias") is not None:
        return func(*args, **kwargs)
    gates, cell = bound["input_gates"], bound["cx"]
    return cell.new_empty(cell.shape), cell.new_empty(cell.shape), gates.new_empty(gates.shape)


#: Ops whose output the trace makes from shapes and dtypes instead of calling their fake/meta
#: kernels. Those kernels check the layouts cuBLAS needs on the GPU they run on: block scales
#: swizzled and padded to 128-row tiles, an exact dtype pairing per recipe ("Invalid scaling
#: configuration" otherwise), and torch 2.13's ``_scaled_mm_v2`` counts MXFP4 scales against the
#: packed K. A bound needs only the output's shape and dtype, and reads the scales given as
#: the bytes they are. The fused LSTM cell's meta kernel fails without biases.
OWN_OUTPUTS: dict[Any, Callable[[Any, tuple, dict], torch.Tensor]] = {
    **{
        getattr(torch.ops.aten, name).default: _scaled_mm_output
        for name in ("_scaled_mm", "_scaled_mm_v2")
        if hasattr(torch.ops.aten, name)
    },
    **{
        getattr(torch.ops.aten, name).default: _scaled_grouped_mm_output
        for name in ("_scaled_grouped_mm", "_scaled_grouped_mm_v2")
        if hasattr(torch.ops.aten, name)
    },
    torch.ops.aten._thnn_fused_lstm_cell.default: _fused_lstm_cell_output,
}
