"""Errors a user can cause. Each carries a one-line message naming the problem and the fix."""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from pathlib import Path


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


@dataclass(frozen=True)
class UserLine:
    """The line of the user's own code an exception came from (:func:`user_line`)."""

    file: str
    line_number: int
    source: str  #: the line's text, stripped ("" when Python could not read it)
    raised_here: bool  #: raised by this line itself, not inside a library it called

    def __str__(self) -> str:
        return f"{Path(self.file).name}:{self.line_number}"

    @property
    def quoted(self) -> str:
        """``"model.py:12 (`y = x @ w`)"``: the place and what it says."""
        return f"{self} (`{self.source[:80]}`)" if self.source else str(self)


def user_line(error: BaseException) -> UserLine | None:
    """The innermost line of ``error``'s traceback in the user's own code: outside torch,
    torchroofline and Python's standard library (a model's file, a problem file, a library
    the model calls); None when every frame is ours."""
    import sysconfig

    import torch

    libraries = [Path(torch.__file__).parent, Path(__file__).parent]
    libraries += [Path(sysconfig.get_paths()[key]) for key in ("stdlib", "platstdlib")]
    roots = tuple(f"{root}{os.sep}" for root in libraries)
    frames = traceback.extract_tb(error.__traceback__)
    users = [frame for frame in frames if not frame.filename.startswith(("<", *roots))]
    if not users:
        return None
    frame = users[-1]
    return UserLine(frame.filename, frame.lineno or 0, (frame.line or "").strip(),
                    frame is frames[-1])
