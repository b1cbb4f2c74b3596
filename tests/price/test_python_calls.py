"""Host cost per Python call, and the kernels an aten op launches from C++ (issue 39): a call
that decomposes in C++ pays Python once, its other kernels a dispatch and a launch each
(``host.launch_s``); logsumexp, a reduced pointwise loss, an affine group norm and a 2-D
training batch norm launch kernels the trace does not see, each a launch on the host and a
fill on the GPU; a reduced nll_loss runs one warp, a load's latency per row it loops over.
Closed forms, derived in the comments."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import Fn, analyze, meta
from torchroofline.price.estimate import kernel_gpu_s
from torchroofline.price.estimate_params import DEFAULT_PARAMS, HostCosts
from torchroofline.price.hardware import get_gpu
from torchroofline.price.memory_time import THREADS_PER_SM
from torchroofline.price.modes import estimate_modes

H100 = get_gpu("h100-sxm")

#: Host costs that are all zero but a Python op and a C++ launch.
OP_AND_LAUNCH = HostCosts(
    eager_call_s=0.0, eager_op_s=10e-6, eager_view_s=0.0, eager_module_s=0.0, launch_s=1e-6,
    compile_call_s=0.0, compile_kernel_s=0.0, cudagraph_call_s=0.0,
)


def _host_s(result) -> float:
    """The eager call's host seconds under :data:`OP_AND_LAUNCH`."""
    return estimate_modes(result.performance.program,
                          DEFAULT_PARAMS.with_host(OP_AND_LAUNCH)).eager.host_s


def test_each_python_call_stamps_its_aten_ops() -> None:
    # F.cosine_similarity decomposes in C++: all its aten ops share one number; the add after
    # it is a call of its own
    result = analyze(Fn(lambda a, b: F.cosine_similarity(a, b) + 1.0), meta(8, 64), meta(8, 64))
    calls = [op.python_call for op in result.trace.ops]
    assert all(calls) and calls[-1] == calls[0] + 1
    assert len(set(calls[:-1])) == 1 and len(calls) > 2


def test_a_call_that_decomposes_in_cpp_pays_python_once() -> None:
    # n kernels of one call: one Python op, then n − 1 launches from C++; the add: one op
    result = analyze(Fn(lambda a, b: F.cosine_similarity(a, b) + 1.0), meta(8, 64), meta(8, 64))
    loads = result.performance.program.eager
    issued = [load.cpp_issued for load in loads]
    assert issued[0] is False and issued[-1] is False and all(issued[1:-1])
    kernels = len(loads)
    assert _host_s(result) == pytest.approx(2 * 10e-6 + (kernels - 2) * 1e-6)


def test_separate_python_calls_each_pay_python() -> None:
    # x.sigmoid(), then + 1, then .exp(): three calls, three Python ops, no C++ launch
    result = analyze(Fn(lambda x: (x.sigmoid() + 1).exp()), meta(1024))
    assert [load.cpp_issued for load in result.performance.program.eager] == [False] * 3
    assert _host_s(result) == pytest.approx(3 * 10e-6)


def test_logsumexp_launches_nine_kernels_and_streams_its_input_six_times() -> None:
    # amax, abs, eq, masked_fill_, sub, exp_, sum, log_, add_: eight launches beyond the one
    # the trace sees, each a fill on the GPU; x is read by amax and sub, the copy written by
    # sub, read and written by exp_ and read by sum: five passes of x beyond the first
    result = analyze(Fn(lambda x: torch.logsumexp(x, dim=1)), meta(256, 1024))
    [load] = result.performance.program.eager
    assert load.cpp_launches == 8
    assert load.reread_bytes == 5 * 256 * 1024 * 4
    alone = kernel_gpu_s(replace(load, cpp_launches=0), H100, DEFAULT_PARAMS, "warm")
    busy = kernel_gpu_s(load, H100, DEFAULT_PARAMS, "warm")
    assert busy - alone == pytest.approx(8 * DEFAULT_PARAMS.fill_latency_s)
    # on the host: one Python op and eight C++ launches
    assert _host_s(result) == pytest.approx(10e-6 + 8 * 1e-6)


@pytest.mark.parametrize(("reduction", "launches"), [("mean", 1), ("sum", 1), ("none", 0)])
def test_a_reduced_pointwise_loss_launches_its_reduction(reduction: str, launches: int) -> None:
    # Loss.cpp's apply_loss_reduction: the unreduced loss, then loss.mean() or loss.sum()
    model = Fn(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction))
    [load] = analyze(model, meta(64, 64), meta(64, 64)).performance.program.eager
    assert load.cpp_launches == launches
    # the unreduced loss (64 × 64 fp32, an input's size) written, then read back by the mean
    assert load.reread_bytes == launches * 2 * 64 * 64 * 4


@pytest.mark.parametrize(("affine", "launches"), [(True, 1), (False, 0)])
def test_an_affine_group_norm_launches_its_fused_parameters(affine: bool, launches: int) -> None:
    # RowwiseMoments, ComputeFusedParams (only with a weight or bias), apply: the plan has the
    # first and the last, the statistics kernel carries the one between
    norm = nn.GroupNorm(4, 16, affine=affine)
    loads = analyze(norm, meta(8, 16, 32, 32)).performance.program.eager
    assert [load.cpp_launches for load in loads] == [launches, 0]


@pytest.mark.parametrize(("shape", "launches"), [((64, 32), 1), ((64, 32, 8, 8), 0)])
def test_a_two_dimensional_training_batch_norm_updates_its_running_statistics(
        shape: tuple[int, ...], launches: int) -> None:
    # an (N, C) input runs PyTorch's own kernels (cuDNN takes 3 or more dims): statistics,
    # then batch_norm_update_stats_and_invert, then apply
    norm = nn.BatchNorm1d(32) if len(shape) == 2 else nn.BatchNorm2d(32)
    loads = analyze(norm.train(), meta(*shape)).performance.program.eager
    statistics = [load for load in loads if load.rows]
    assert [load.cpp_launches for load in statistics] == [launches]


@pytest.mark.parametrize(("reduction", "serial"), [("mean", 128), ("none", 0)])
def test_a_reduced_nll_loss_runs_one_warp_latency_bound(reduction: str, serial: int) -> None:
    # LossNLL.cu: one block of 32 threads, each over every 32nd of the 4,096 rows: 128 gathers
    # in series, each a load's latency, THREADS_PER_SM / strided_access_rate_per_sm (Little's
    # law); without a reduction, a thread per row
    model = Fn(lambda x, t: F.nll_loss(x, t, reduction=reduction))
    result = analyze(model, meta(4096, 10), torch.zeros(4096, dtype=torch.long, device="meta"))
    [load] = [load for load in result.performance.program.eager if "nll" in load.name]
    assert load.serial_loads == serial
    busy = kernel_gpu_s(load, H100, DEFAULT_PARAMS, "warm")
    latency = THREADS_PER_SM / DEFAULT_PARAMS.strided_access_rate_per_sm
    assert busy >= serial * latency
    if serial:
        assert busy == pytest.approx(serial * latency + DEFAULT_PARAMS.fill_latency_s)
