"""torchroofline: speed-of-light bounds for PyTorch programs on a chosen GPU."""

from .api import analyze
from .errors import (
    DataDependentError,
    InputError,
    ModelError,
    PrecisionError,
    ProblemFileError,
    TorchrooflineError,
    UnknownGPUError,
)
from .hardware import GPUSpec, get_gpu, list_gpus
from .roofline import KernelEstimate, Result

__version__ = "0.1.0"

__all__ = [
    "DataDependentError",
    "GPUSpec",
    "InputError",
    "KernelEstimate",
    "ModelError",
    "PrecisionError",
    "ProblemFileError",
    "Result",
    "TorchrooflineError",
    "UnknownGPUError",
    "analyze",
    "get_gpu",
    "list_gpus",
]
