"""Shared helpers for the analysis tests: a module around a function, and the H100 figures the
closed forms are checked against (datasheet / whitepaper values, see hardware.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
from hypothesis import settings

import torchroofline
from torchroofline.price.roofline import Result

# generated programs are the same on every run (CI and a fresh clone see the examples the
# last green run saw); a search for new counterexamples: pytest --hypothesis-profile=default
settings.register_profile("reproducible", derandomize=True, database=None)
settings.load_profile("reproducible")

#: The longest tests (most of them wait on other processes: the benchmarks' quick run, Ctrl-C
#: tries, fresh interpreters, a batch's workers), longest first, as a 2-core run timed them.
#: They start the run (longest first, as a scheduler would), so the worker left with the last
#: tests never waits on one alone. A name not found here (a renamed test) runs in its place.
LONGEST_FIRST = (
    "tests/test_benchmarks.py::test_quick",
    "tests/suites/test_interrupts.py::test_ctrl_c_at_every_phase",
    "tests/test_cli.py::test_an_interrupted_batch_keeps_the_problems_finished",
    "tests/plan/test_oracle.py::test_generated_programs_are_tight",
    "tests/test_docs.py::test_generated_blocks_are_current",
    "tests/suites/test_validate.py::test_an_unguarded_script_runs_once",
    "tests/plan/test_collapses.py::test_a_conv_diagonal_reads_what_the_oracle_proves",
    "tests/plan/test_demand.py::test_generated_programs_keep_the_invariants",
    "tests/plan/test_algebra_cancel.py::test_a_sum_minus_itself_respelled",
    "tests/plan/test_oracle_families.py::test_generated_family_programs",
    "tests/test_cli.py::test_suite_pictures_from_batch_and_saved_report",
    "tests/plan/test_oracle_layers.py::test_generated_layers_and_attention",
    "tests/price/test_math_ladder.py::test_each_rung_is_at_most",
    "tests/plan/test_algebra_bilinear.py::test_a_bilinear_sum",
    "tests/present/test_html_page.py::test_trace_and_suite_commands_write_the_page",
    "tests/test_startup.py::",
    "tests/suites/test_interrupts.py::",
)


def pytest_collection_modifyitems(items: list) -> None:
    """The tests of ``LONGEST_FIRST`` first, in its order; every other in collection order (the
    sort is stable)."""

    def rank(item) -> int:
        return next(
            (place for place, start in enumerate(LONGEST_FIRST) if item.nodeid.startswith(start)),
            len(LONGEST_FIRST),
        )

    items.sort(key=rank)


#: H100 SXM (Hopper whitepaper, dense): CUDA-core fp32, TF32 / BF16 tensor cores, HBM3.
H100_FP32 = 66.9e12
H100_TF32 = 494.7e12
H100_BF16 = 989.4e12
H100_BANDWIDTH = 3.35e12
H100_L2_BYTES = 50 * 2**20
LAUNCH_S = 2.5e-6  #: hardware.DEFAULT_LAUNCH_OVERHEAD_S, charged once per launch in estimates


class Fn(nn.Module):
    """A module whose forward is ``fn``: a one-line test model without a class of its own."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A shape-only input: no data is allocated, so tests can use large shapes for free."""
    return torch.empty(shape, dtype=dtype, device="meta")


def analyze(model: nn.Module, *inputs: Any, **options: Any) -> Result:
    """``torchroofline.analyze`` with the forward arguments spelled out."""
    return torchroofline.analyze(model, inputs, **options)


def op_names(result: Result) -> list[str]:
    return [op.name for op in result.ops]
