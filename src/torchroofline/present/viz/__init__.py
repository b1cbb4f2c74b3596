"""Pictures of an analysis (the ``viz`` extra, matplotlib): one module per picture family.

- :mod:`.rooflines`: the roofline of one result (:func:`plot_result`, :func:`plot_result_dict`);
- :mod:`.gpus`: one workload's speed of light and fused estimate across GPUs (:func:`plot_gpus`);
- :mod:`.suite`: a KernelBench batch report, a :class:`~torchroofline.batch_report.BatchReport`
  (:func:`plot_suite` and its scatter and histogram);
- :mod:`.runs`: a KernelBench run's samples against SoL (:func:`plot_run`);
- :mod:`.traces`: a profiled run's ops under the GPU's roofs (:func:`plot_trace`);
- :mod:`.sweeps`: a sweep's times against its axis and its path on the roofline
  (:func:`plot_sweep`, :func:`plot_sweep_roofline`);
- :mod:`.timeline`: a distributed rank's compute and communication streams
  (:func:`plot_timeline`);
- :mod:`.labels`: the label placer they share; :mod:`.canvas`: figures, saving, colours.

Pictures draw from results (or their dictionary form) and never trace a model.
"""

from ...price.roofline import Roof
from .canvas import (
    BOUND_COLOURS,
    CATEGORY_COLOURS,
    DPI,
    FIGSIZE_IN,
    GPUS_FIGSIZE_IN,
    IMPOSSIBLE_COLOUR,
    SUITE_FIGSIZE_IN,
)
from .gpus import DEFAULT_GPUS, plot_gpus
from .rooflines import KernelPoint, describe_roof, kernel_points, plot_result, plot_result_dict
from .runs import plot_run
from .suite import plot_suite, plot_suite_histogram, plot_suite_scatter, problem_points
from .sweeps import plot_sweep, plot_sweep_roofline
from .timeline import plot_timeline
from .traces import plot_trace

__all__ = [
    "BOUND_COLOURS",
    "CATEGORY_COLOURS",
    "DEFAULT_GPUS",
    "DPI",
    "FIGSIZE_IN",
    "GPUS_FIGSIZE_IN",
    "IMPOSSIBLE_COLOUR",
    "SUITE_FIGSIZE_IN",
    "KernelPoint",
    "Roof",
    "describe_roof",
    "kernel_points",
    "plot_gpus",
    "plot_result",
    "plot_result_dict",
    "plot_run",
    "plot_suite",
    "plot_suite_histogram",
    "plot_suite_scatter",
    "plot_sweep",
    "plot_sweep_roofline",
    "plot_timeline",
    "plot_trace",
    "problem_points",
]
