"""Per mode, the host/launch pipeline: a mode's predicted time from its kernels' GPU seconds
(:func:`~.estimate.kernel_gpu_s`) and the host's CPU seconds before each launch
(:class:`~.estimate_params.HostCosts`).

The host issues kernel *k* when it has finished the CPU work before it; the GPU runs it when the
GPU is free and the kernel has been issued (:func:`timeline`). When kernels are short the host
is the bottleneck and the GPU waits: the same rule gives both the launch-bound and the
GPU-bound regime. Modes: ``eager`` (one kernel per aten op, Python and dispatcher cost per op),
``compile`` (Inductor's fused kernels, a guard check per call and a launch per kernel) and
``cudagraph`` (the fused kernels replayed as one CUDA graph: one replay per call, a small gap
between kernels on the GPU). :class:`Performance` holds the three, their bands (:mod:`.bands`)
and the same prediction under other conditions: a slower host (:func:`host_scaled`), kernels
run as host↔device copies (:func:`host_copies`) or beside a collective
(:func:`beside_collective`). Seconds.
"""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from .bands import HOST_BAND, family_band
from .estimate import kernel_gpu_s
from .estimate_params import EstimateParams, HostCosts
from .host_copies import HOST_COPY_FAMILY, as_host_copy
from .kernel_load import KernelLoad, ProgramLoad


@dataclass(frozen=True)
class ModeEstimate:
    """One mode's predicted time: the pipeline's end, the GPU's busy time within it, and each
    kernel's GPU time (in plan order)."""

    mode: str
    total_s: float
    gpu_busy_s: float
    host_s: float  #: CPU time of the call (issue of the last kernel)
    kernel_gpu_s: tuple[float, ...]

    @property
    def host_bound_share(self) -> float:
        """Share of the time the GPU waits for the host (0: GPU-bound, →1: launch-bound)."""
        return 1 - self.gpu_busy_s / self.total_s if self.total_s else 0.0

    @property
    def launch_bound(self) -> bool:
        """The GPU idles more than half the call, waiting on the host."""
        return self.host_bound_share > 0.5


def timeline(mode: str, start_s: float, issue_s: Sequence[float], gpu_s: Sequence[float]
             ) -> ModeEstimate:
    """Kernel *k* is issued ``issue_s[k]`` after kernel *k−1* (the first after ``start_s``)
    and runs when the GPU is free and it has been issued."""
    issued = start_s
    end = 0.0
    for host, busy in zip(issue_s, gpu_s, strict=True):
        issued += host
        end = max(end, issued) + busy
    return ModeEstimate(mode, max(end, issued), sum(gpu_s), issued, tuple(gpu_s))


def _library_s(load: KernelLoad, host: HostCosts) -> float:
    """CPU seconds a kernel's library call adds to its launch: a convolution's cuDNN set-up
    and the extra launches of a library call (a cuDNN RNN's steps) or of its aten op issued
    from C++ (:attr:`KernelLoad.cpp_launches`), in either mode."""
    return ((load.launches - 1 + load.cpp_launches) * host.launch_s
            + (host.conv_call_s if load.library_call else 0.0))


def _eager_issue(load: KernelLoad, host: HostCosts) -> float:
    """CPU seconds before an eager kernel is issued: a Python call's op, or a dispatch and a
    launch from C++ (:attr:`KernelLoad.cpp_issued`), after the views and submodule calls
    before it, plus its library call's own."""
    return (
        (host.launch_s if load.cpp_issued else host.eager_op_s)
        + load.host_views * host.eager_view_s
        + load.host_modules * host.eager_module_s
        + _library_s(load, host)
    )


def estimate_modes(program: ProgramLoad, params: EstimateParams) -> Performance:
    """The three modes' :class:`ModeEstimate` for one program."""
    gpu, cache = program.gpu, program.cache
    on_gpu = params.for_gpu(gpu)
    eager_gpu = [kernel_gpu_s(k, gpu, on_gpu, cache) for k in program.eager]
    fused_gpu = [kernel_gpu_s(k, gpu, on_gpu, cache) for k in program.fused]
    return _pipelines(program, params, eager_gpu, fused_gpu)


def _pipelines(program: ProgramLoad, params: EstimateParams, eager_gpu: Sequence[float],
               fused_gpu: Sequence[float]) -> Performance:
    """Each mode's host/launch pipeline over the kernels' GPU seconds."""
    on_gpu = params.for_gpu(program.gpu)
    host = on_gpu.host
    copies = [kernel_gpu_s(k, program.gpu, on_gpu, program.cache) for k in program.replay_copies]
    eager = timeline(
        "eager", host.eager_call_s, [_eager_issue(k, host) for k in program.eager], eager_gpu
    )
    compiled = timeline(
        "compile",
        host.compile_call_s,
        [host.compile_kernel_s + _library_s(k, host) for k in program.fused],
        fused_gpu,
    )
    replayed = timeline(
        "cudagraph",
        host.cudagraph_call_s,
        [0.0] * (len(copies) + len(fused_gpu)),
        [busy + on_gpu.cudagraph_gap_s for busy in [*copies, *fused_gpu]],
    )
    return Performance(params, program, eager, compiled, replayed)


def host_scaled(performance: Performance, factor: float) -> Performance:
    """The same prediction on a host ``factor`` times slower: the kernels' GPU times are kept
    (they do not depend on the host), only the pipelines are run again."""
    return _pipelines(
        performance.program, performance.params.host_scaled(factor),
        performance.eager.kernel_gpu_s, performance.compile.kernel_gpu_s,
    )


def host_scale_totals_ms(performance: Performance, factors: Sequence[float], floor_s: float
                         ) -> dict[str, list[float]]:
    """Per mode (``eager``, ``fused``, ``cudagraph``), the estimated total (ms, never below
    ``floor_s``, the SoL) at each host scale of ``factors``: what a host scale is fitted on."""
    scaled = [host_scaled(performance, factor).modes for factor in factors]
    return {
        mode: [max(modes[mode].total_s, floor_s) * 1e3 for modes in scaled]
        for mode in performance.modes
    }


def host_copies(performance: Performance, pageable: bool, host_bytes: int = 0) -> Performance:
    """The same prediction with each eager kernel run as a copy between host and GPU (where a
    profiler saw the op's ``Memcpy HtoD``/``DtoH``: the one-op program cannot say). A program
    with no kernel (``.item()``: the driver copies the scalar) is one copy of ``host_bytes``,
    not free."""
    eager = tuple(as_host_copy(load, pageable) for load in performance.program.eager) or (
        KernelLoad(name="memcpy", family=HOST_COPY_FAMILY, matmul_s=0.0, vector_s=0.0, bytes=0,
                   launches=1, host_bytes=host_bytes, pageable=pageable),)
    return estimate_modes(replace(performance.program, eager=eager), performance.params)


def beside_collective(performance: Performance) -> Performance:
    """The same prediction with each eager kernel sharing the GPU with a collective on another
    stream (where a profiler saw them overlap: the one-op program cannot say)."""
    eager = tuple(replace(load, shared=True) for load in performance.program.eager)
    return estimate_modes(replace(performance.program, eager=eager), performance.params)


@dataclass(frozen=True)
class Performance:
    """The model's prediction for one analysis: the parameters, its input and each mode."""

    params: EstimateParams = field(repr=False)
    program: ProgramLoad = field(repr=False)
    eager: ModeEstimate
    compile: ModeEstimate
    cudagraph: ModeEstimate

    @property
    def modes(self) -> dict[str, ModeEstimate]:
        """Result-facing names: ``eager``, ``fused`` (torch.compile) and ``cudagraph``."""
        return {"eager": self.eager, "fused": self.compile, "cudagraph": self.cudagraph}

    def loads(self, mode: str) -> tuple[KernelLoad, ...]:
        """The kernels a mode runs (eager's plan, the fused plan, or a replay's)."""
        return {"eager": self.program.eager, "fused": self.program.fused}.get(
            mode, self.program.replayed)

    def top_kernels(self, mode: str, count: int = 5
                    ) -> list[tuple[KernelLoad, float, tuple[float, float]]]:
        """A mode's kernels with the most estimated GPU time, with that time and its band (s)."""
        found = zip(self.loads(mode), self.modes[mode].kernel_gpu_s, self.kernel_band_s(mode),
                    strict=True)
        return sorted(found, key=lambda kernel: kernel[1], reverse=True)[:count]

    def gpu_s_by_family(self, mode: str) -> dict[str, float]:
        """Estimated GPU seconds of a mode per kernel family, largest first."""
        totals: dict[str, float] = {}
        for load, busy in zip(self.loads(mode), self.modes[mode].kernel_gpu_s, strict=True):
            totals[load.family] = totals.get(load.family, 0.0) + busy
        return dict(sorted(totals.items(), key=lambda item: item[1], reverse=True))

    @cached_property
    def ends(self) -> tuple[Performance, Performance]:
        """The same prediction at the low and at the high end of every kernel's family band
        (:mod:`.bands`), with the host's costs at the ends of ``HOST_BAND``."""
        return self._at_end("low"), self._at_end("high")

    def _at_end(self, end: str) -> Performance:
        def scaled(loads: Sequence[KernelLoad], gpu_s: Sequence[float]) -> list[float]:
            return [busy * getattr(family_band(load.family), end)
                    for load, busy in zip(loads, gpu_s, strict=True)]

        return _pipelines(self.program, self.params.host_scaled(getattr(HOST_BAND, end)),
                          scaled(self.program.eager, self.eager.kernel_gpu_s),
                          scaled(self.program.fused, self.compile.kernel_gpu_s))

    def band_s(self, mode: str, floor_s: float = 0.0) -> tuple[float, float]:
        """A mode's total at the low and the high end of its band (s), never below ``floor_s``."""
        low, high = (max(end.modes[mode].total_s, floor_s) for end in self.ends)
        return low, high

    def kernel_band_s(self, mode: str) -> list[tuple[float, float]]:
        """Each kernel's GPU time at the low and the high end of its family's band (s)."""
        low, high = (end.modes[mode].kernel_gpu_s for end in self.ends)
        return list(zip(low, high, strict=True))

    def to_dict(self, floor_s: float, top: int = 5) -> dict[str, Any]:
        """Per mode: total, GPU-busy and host ms, host-bound share, launch-bound verdict, GPU ms
        per kernel family and the top kernels, with the band of the total and of each top
        kernel (µs); a total is never below ``floor_s`` (the SoL)."""
        return {
            name: {
                "total_ms": max(mode.total_s, floor_s) * 1e3,
                **_band_us(self.band_s(name, floor_s)),
                "gpu_busy_ms": mode.gpu_busy_s * 1e3,
                "host_ms": mode.host_s * 1e3,
                "host_bound_share": mode.host_bound_share,
                "launch_bound": mode.launch_bound,
                "gpu_ms_by_family": {
                    family: busy * 1e3 for family, busy in self.gpu_s_by_family(name).items()
                },
                "top_kernels": [
                    {"name": load.name, "family": load.family, "gpu_ms": busy * 1e3,
                     **_band_us(band)}
                    for load, busy, band in self.top_kernels(name, top)
                ],
            }
            for name, mode in self.modes.items()
        }


def _band_us(band_s: tuple[float, float]) -> dict[str, float]:
    """A band (s) as the JSON keys ``estimate_low_us`` and ``estimate_high_us``."""
    return {"estimate_low_us": band_s[0] * 1e6, "estimate_high_us": band_s[1] * 1e6}
