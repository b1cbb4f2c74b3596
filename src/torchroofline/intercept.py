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
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ._cuda_bindings import NO_CUDA_TEXT, SPELLINGS, UnsupportedIndex

if TYPE_CHECKING:
    from .trace import _Recorder as Recorder


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
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        from .training import attention_with_backward  # a training step's trace

        return attention_with_backward(recorder, (query, key, value), output, bool(is_causal))
    return output


#: torch._VF RNN entry points, recorded as one cuDNN RNN call each.
RNN_CALLS = ("lstm", "gru", "rnn_tanh", "rnn_relu")


def _intercept_rnn(recorder: Recorder, name: str, args: tuple, kwargs: dict) -> Any:
    """``torch._VF.lstm/gru/rnn_*`` (padded input) → one cuDNN RNN call, recorded with the
    call's own arguments (input, state, flat weights, has_biases, num_layers, dropout, train,
    bidirectional, batch_first).

    Returns ``NotImplemented`` for packed sequences, which then trace by decomposition.
    """
    if torch.is_grad_enabled():
        return NotImplemented  # a training step: autograd needs the aten ops (no cuDNN backward)
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
    return result


@contextlib.contextmanager
def _paused(recorder: Recorder) -> Iterator[None]:
    recorder.paused = True
    try:
        yield
    finally:
        recorder.paused = False


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
        for name in RNN_CALLS:
            self._handlers[getattr(torch._VF, name)] = self._rnn_handler(name)

    def _rnn_handler(self, name: str) -> Callable[[tuple, dict], Any]:
        return lambda a, k: _intercept_rnn(self.recorder, name, a, k)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        handler = self._handlers.get(func)
        if handler is not None and not self.recorder.paused:
            self.recorder.current_op = getattr(func, "__name__", str(func))
            result = handler(args, kwargs)
            if result is not NotImplemented:
                return result
        try:
            if inspect.isfunction(func) and func.__module__ == "torch.nn.functional":
                # a Python-level functional (F.multi_head_attention_forward): keep this mode on
                # inside it, so the attention and indexing it calls are caught too
                with self:
                    return torch.overrides.redispatch_function(func, types, args, kwargs)
            return func(*args, **kwargs)
        except RuntimeError as error:
            if NO_CUDA_TEXT not in str(error):
                raise
            # raised above the dispatcher, so no op was recorded: spell it in aten ops
            spelling = SPELLINGS.get(func)
            if spelling is not None:
                try:
                    return spelling(*args, **kwargs)
                except UnsupportedIndex:
                    pass
            self.recorder.current_op = getattr(func, "__name__", str(func))
            raise
