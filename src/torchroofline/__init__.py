"""torchroofline: speed-of-light bounds for PyTorch programs on a chosen GPU."""

# _startup first: a Ctrl-C while the command line imports torch ends it quietly; present:
# Result's print, to_dict and plot register themselves
from . import _startup, present  # noqa: F401
from .api import analyze, max_batch
from .errors import (
    ClockError,
    DataDependentError,
    InputError,
    ModelError,
    PrecisionError,
    ProblemFileError,
    TorchrooflineError,
    UnknownGPUError,
)
from .price.estimate_params import EstimateParams
from .price.hardware import GPUSpec, get_gpu, list_gpus
from .price.roofline import KernelEstimate, Result
from .suites.kernelbench import analyze_file, compare_kernelbench, load_problem
from .suites.sweep import Sweep, sweep_kernelbench, sweep_model, sweep_solexecbench
from .suites.validate import validate

__version__ = "0.1.0"

__all__ = [
    "ClockError",
    "DataDependentError",
    "EstimateParams",
    "GPUSpec",
    "InputError",
    "KernelEstimate",
    "ModelError",
    "PrecisionError",
    "ProblemFileError",
    "Result",
    "Sweep",
    "TorchrooflineError",
    "UnknownGPUError",
    "analyze",
    "analyze_file",
    "compare_kernelbench",
    "get_gpu",
    "list_gpus",
    "load_problem",
    "max_batch",
    "plot_gpus",
    "sweep_kernelbench",
    "sweep_model",
    "sweep_solexecbench",
    "validate",
]


def __getattr__(name: str):
    """``plot_gpus`` lives in the viz module, which needs matplotlib (the ``viz`` extra)."""
    if name == "plot_gpus":
        from .present.viz import plot_gpus

        return plot_gpus
    raise AttributeError(f"module 'torchroofline' has no attribute '{name}'")
