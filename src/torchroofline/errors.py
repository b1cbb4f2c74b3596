"""Errors a user can cause. Each carries a one-line message naming the problem and the fix."""

from __future__ import annotations


class TorchrooflineError(Exception):
    """Base class of every error torchroofline raises on purpose (bad input, unusable model).

    An error that wraps an exception raised by the model, a problem file or torch keeps that
    exception as ``__cause__``: Python prints its traceback above this one, and the command line
    shows it with ``--debug``."""


class UnknownGPUError(TorchrooflineError, KeyError):
    """A GPU name that is not in the table."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class PrecisionError(TorchrooflineError, ValueError):
    """A precision name we do not know, or one the GPU has no hardware for."""


class ClockError(TorchrooflineError, ValueError):
    """A locked clock the GPU cannot run at (above its boost clock, not positive), or one given
    for a GPU whose table entry has no nominal clock to scale from."""


class InputError(TorchrooflineError, TypeError):
    """A model or inputs of the wrong type."""


class ModelError(TorchrooflineError, RuntimeError):
    """The model itself raised while being traced."""


class DataDependentError(TorchrooflineError, RuntimeError):
    """The model needs real tensor data and real tensors would be too large to build."""


class ProblemFileError(TorchrooflineError, ValueError):
    """A KernelBench problem file that cannot be loaded (syntax error, no Model, ...)."""


class TraceFileError(TorchrooflineError, ValueError):
    """A profiler trace that cannot be used: not JSON, truncated, CPU-only, or recorded without
    the fields the command needs (record_shapes)."""
