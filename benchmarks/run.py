"""torchroofline's benchmarks: one entry point, one markdown report.

    python benchmarks/run.py [--quick] [--out PATH]

Sections (each figure measured in its own subprocess so start-up and peak memory are real):

- **Suite speed**: ``torchroofline kernelbench`` over a generated KernelBench-format suite
  (benchmarks/suite.py) with ``-j 1`` and ``-j 2``: wall time, per-problem time, peak RSS,
  problems ok/failed.
- **Scale**: GPT-style decoder-only transformers built on the meta device (GPT-2 small, a 7 B
  and a 70 B shape), analyzed over a batch of 8 × 2048 tokens: no weight is ever allocated.
- **Per-op overhead**: time per traced aten op against a bare FakeTensorMode run of the same
  model, and the 6-layer bidirectional GRU over 512 steps.
- **The prototype's method side by side**: ptflops + torch.fx ShapeProp on real tensors
  (benchmarks/prototype.py) against ours, time and memory, and a FLOPs agreement table with
  ``torch.utils.flop_counter.FlopCounterMode`` as the third opinion.

The report is printed and written to ``--out``: by default benchmarks/RESULTS.md (tracked; README
quotes its headline), or with ``--quick`` (a handful of problems and the smallest models, in
seconds) a file in the temporary folder, so a quick run never replaces the full run's figures.
Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import suite  # noqa: E402 — benchmarks/ is not a package
from models import deep_stack, gpt  # noqa: E402 — benchmark models live as files

#: Targets from the issue, shown next to the figures.
TARGET_70B_S = 10.0
TARGET_70B_RSS_BYTES = 2**30
TARGET_PEROP_RATIO = 2.0
TARGET_PROTO_SPEEDUP = 50.0
#: The prototype runs problems for real; keep to those whose real tensors fit comfortably.
PROTO_MAX_REAL_BYTES = 2 * 2**30
SAMPLE_S = 0.05  #: how often a running subprocess tree's memory is read

MiB = 2**20
#: Where ``--quick`` writes unless ``--out`` says otherwise: not over the tracked RESULTS.md.
QUICK_OUT = Path(tempfile.gettempdir()) / "torchroofline-benchmarks-quick.md"


# --- Measuring a subprocess ------------------------------------------------------------------


def _status_kib(pid: int | str, field: str) -> int:
    """A ``/proc/PID/status`` field in KiB (``VmHWM``: peak RSS, ``VmRSS``: RSS now); 0 if the
    process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it (forkserver, workers), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, frontier = [root], [root]
    while frontier:
        children = parents.get(frontier.pop(), [])
        found += children
        frontier += children
    return found


@dataclass(frozen=True)
class Measured:
    """One subprocess run: wall time (start-up included), exit code, output and memory."""

    seconds: float
    returncode: int
    stdout: str
    stderr: str
    peak_rss_bytes: int  #: the largest peak RSS of any one process in the tree
    tree_peak_bytes: int  #: per-process peaks summed over the tree (shared pages counted twice)
    processes: int  #: processes seen in the tree

    def last_json(self) -> dict:
        lines = [line for line in self.stdout.splitlines() if line.startswith("{")]
        if self.returncode != 0 or not lines:
            raise RuntimeError(
                f"benchmark child failed (exit {self.returncode}): {self.stderr.strip()[-800:]}"
            )
        return json.loads(lines[-1])


def measure(command: Sequence[str], timeout_s: float = 900.0) -> Measured:
    """Run ``command`` and sample the peak RSS (``VmHWM``) of every process in its tree.

    ``VmHWM`` is each process's own high-water mark, so sampling misses only what a process
    gains in its last ``SAMPLE_S`` before it exits. ``RUSAGE_CHILDREN`` cannot do this: it
    covers only waited-for children (not the forkserver's workers) and never decreases.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(list(command), stdout=out, stderr=err, text=True)
        peaks: dict[int, int] = {}
        while process.poll() is None:
            for pid in _descendants(process.pid):
                peaks[pid] = max(peaks.get(pid, 0), _status_kib(pid, "VmHWM"))
            if time.perf_counter() - start > timeout_s:
                process.kill()
            time.sleep(SAMPLE_S)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return Measured(
            seconds=seconds,
            returncode=process.returncode,
            stdout=out.read(),
            stderr=err.read(),
            peak_rss_bytes=max(peaks.values(), default=0) * 1024,
            tree_peak_bytes=sum(peaks.values()) * 1024,
            processes=len(peaks),
        )


def run_child(kind: str, *args: str) -> tuple[dict, Measured]:
    """This script in ``--child`` mode: one measurement in a fresh interpreter."""
    measured = measure([sys.executable, str(Path(__file__).resolve()), "--child", kind, *args])
    return measured.last_json(), measured


# --- Inside a child: peak memory of one step -------------------------------------------------


def _reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (Linux ≥ 4.0, ``clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


@dataclass
class _Step:
    """Time and memory of one step inside a child: RSS before, peak RSS during."""

    seconds: float = 0.0
    baseline_bytes: int = 0
    peak_bytes: int = 0

    def to_dict(self) -> dict:
        return {
            "seconds": self.seconds,
            "baseline_rss_bytes": self.baseline_bytes,
            "peak_rss_bytes": self.peak_bytes,
            "added_rss_bytes": max(self.peak_bytes - self.baseline_bytes, 0),
        }


def _timed(step: Callable[[], Any]) -> tuple[Any, _Step]:
    gc.collect()
    _reset_peak()
    baseline = _status_kib("self", "VmRSS") * 1024
    start = time.perf_counter()
    value = step()
    seconds = time.perf_counter() - start
    return value, _Step(seconds, baseline, _status_kib("self", "VmHWM") * 1024)


# --- Models for the scale and per-op sections ------------------------------------------------

#: name → (vocab, width, layers, heads, kv heads, MLP width, SwiGLU MLP, tied embeddings), the
#: arguments of benchmarks/models/gpt.py before the context length. GPT-2 small (124 M, tied LM
#: head), Llama-2-7B's and Llama-2-70B's shapes (GQA 8 KV heads).
GPT_SHAPES: dict[str, tuple] = {
    "GPT-2 small": (50257, 768, 12, 12, 12, 3072, False, True),
    "7B": (32000, 4096, 32, 32, 32, 11008, True, False),
    "70B": (32000, 8192, 80, 64, 8, 28672, True, False),
}
SCALE_BATCH, SCALE_TOKENS = 8, 2048


# --- Children ------------------------------------------------------------------------------


def _warm_up_ours() -> None:
    """What a batch worker has done before its first problem: the forkserver's preload (torch,
    the analysis modules, Dynamo left a placeholder, one analysis of a tiny model through the
    common layer kinds), so first-call costs count as start-up, not per-problem time."""
    import torchroofline._preload  # noqa: F401


def child_scale(name: str) -> dict:
    import torch

    import torchroofline

    _warm_up_ours()
    shape = GPT_SHAPES[name]

    def build() -> tuple:
        with torch.device("meta"):
            model = gpt.Model(*shape, context=SCALE_TOKENS)
            ids = torch.zeros(SCALE_BATCH, SCALE_TOKENS, dtype=torch.long)
        return model, ids

    (model, ids), built = _timed(build)
    result, analyzed = _timed(lambda: torchroofline.analyze(model, (ids,), name=name))
    data = result.to_dict()
    return {
        "model": name,
        "build": built.to_dict(),
        "analyze": analyzed.to_dict(),
        "ops": data["op_count"],
        "params": data["params"],
        "flops": data["flops"]["total"],
        "sol_ms": data["time_ms"]["sol"],
        "notes": data["notes"],
        "process_peak_rss_bytes": _status_kib("self", "VmHWM") * 1024,
    }


def _bare_fake_run(model: Any, x: Any, *, with_mode: bool = False) -> float:
    """The same forward under a bare FakeTensorMode (no recorder, no hooks, no interceptor):
    parameters and input made fake on ``cuda`` as the trace makes them, then the forward.
    ``with_mode`` adds a do-nothing TorchDispatchMode: the floor any recorder pays."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            return func(*args, **(kwargs or {}))

    def fake(tensor: Any) -> Any:
        return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype,
                                   device="cuda")

    start = time.perf_counter()
    mode = FakeTensorMode()
    with mode:
        params = {name: fake(p) for name, p in model.named_parameters()}
        fake_x = fake(x)
    extra = PassThrough() if with_mode else contextlib.nullcontext()
    with mode, torch.no_grad(), extra:
        torch.func.functional_call(model, params, (fake_x,))
    return time.perf_counter() - start


def _best(repeats: int, step: Callable[[], Any]) -> tuple[float, Any]:
    """Minimum wall time over ``repeats`` runs (the least-disturbed run) and the last value."""
    best, value = float("inf"), None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        value = step()
        best = min(best, time.perf_counter() - start)
    return best, value


def child_perop(depth: str, repeats: str, layers: str) -> dict:
    import torch

    import torchroofline
    from torchroofline.trace.tracer import trace_model

    _warm_up_ours()
    count = int(repeats)
    with torch.device("meta"):
        model = deep_stack.Model(int(depth))
        x = torch.empty(2, 16, 64)
    _bare_fake_run(model, x)  # first-call costs of this model's ops
    bare_s = min(_bare_fake_run(model, x) for _ in range(count))
    mode_s = min(_bare_fake_run(model, x, with_mode=True) for _ in range(count))
    trace_s, trace = _best(count, lambda: trace_model(model, (x,)))
    analyze_s, result = _best(count, lambda: torchroofline.analyze(model, (x,)))
    ops = len(trace.ops)
    del trace

    with torch.device("meta"):
        gru = torch.nn.GRU(128, 256, 6, bidirectional=True)
        gru_x = torch.empty(512, 10, 128)
        gru_h = torch.empty(12, 10, 256)
    gru_s, gru_result = _best(3, lambda: torchroofline.analyze(gru, (gru_x, gru_h)))
    per_call = {name: _per_call_ms(layer, int(layers)) for name, layer in (
        ("batch_norm_train", lambda: torch.nn.BatchNorm2d(64)),
        ("batch_norm_eval", lambda: torch.nn.BatchNorm2d(64).eval()),
        ("layer_norm", lambda: torch.nn.LayerNorm(56)),
        ("relu", torch.nn.ReLU),
    )}
    return {
        "per_call_layers": int(layers),
        "per_call_ms": per_call,
        "mode_s": mode_s,
        "depth": int(depth),
        "ops": ops,
        "analyze_ops": result.to_dict()["op_count"],
        "bare_s": bare_s,
        "trace_s": trace_s,
        "analyze_s": analyze_s,
        "repeats": count,
        "gru_s": gru_s,
        "gru_ops": gru_result.to_dict()["op_count"],
        "gru_flops": gru_result.flops,
    }


def _per_call_ms(layer: Callable[[], Any], calls: int) -> float:
    """``analyze`` time per layer of a stack of ``calls`` identical layers (ms)."""
    import torch

    import torchroofline

    with torch.device("meta"):
        model = torch.nn.Sequential(*(layer() for _ in range(calls)))
        x = torch.empty(10, 64, 56, 56)
    seconds, _ = _best(2, lambda: torchroofline.analyze(model, (x,)))
    return seconds / calls * 1e3


def _flop_counter_flops(path: str) -> int:
    """``FlopCounterMode``'s total on the problem built on fake (CPU) tensors."""
    import torch
    from torch._guards import detect_fake_mode
    from torch.utils.flop_counter import FlopCounterMode

    from torchroofline.suites.kernelbench import build_problem, load_problem

    model, inputs, _ = build_problem(load_problem(path))
    mode = detect_fake_mode(list(inputs) + list(model.parameters()))
    counter = FlopCounterMode(display=False)
    with mode or contextlib.nullcontext(), torch.no_grad(), counter:
        model(*inputs)
    return counter.get_total_flops()


def child_ours(*paths: str) -> dict:
    from torchroofline.suites.kernelbench import analyze_file

    _warm_up_ours()
    problems = []
    for path in paths:
        result, step = _timed(lambda path=path: analyze_file(path))
        data = result.to_dict()
        try:
            fcm: int | None = _flop_counter_flops(path)
        except Exception:  # noqa: BLE001 — the third opinion is optional
            fcm = None
        problems.append({
            "path": path,
            **step.to_dict(),
            "flops": data["flops"],
            "bytes_unfused": data["bytes"]["unfused"],
            "ops": data["op_count"],
            "notes": data["notes"],
            "flop_counter_mode": fcm,
        })
    return {"problems": problems}


def child_cases(size: str) -> dict:
    import speed_cases

    return speed_cases.measure(quick=size == "quick")


def child_proto(*paths: str) -> dict:
    import prototype

    prototype.warm_up()
    problems = []
    for path in paths:
        measured, step = _timed(lambda path=path: prototype.measure(path))
        problems.append({"path": path, **measured, **step.to_dict()})
        gc.collect()
    return {"problems": problems}


CHILDREN: dict[str, Callable[..., dict]] = {
    "scale": child_scale,
    "perop": child_perop,
    "ours": child_ours,
    "proto": child_proto,
    "cases": child_cases,
}


# --- Sections --------------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def suite_speed(root: Path, jobs_list: Sequence[int]) -> dict:
    runs = {}
    for jobs in jobs_list:
        report_path = root / f"report_j{jobs}.json"
        measured = measure([
            sys.executable, "-m", "torchroofline", "kernelbench", str(root), "-j", str(jobs),
            "--out", str(report_path),
        ])
        if not report_path.exists():
            raise RuntimeError(f"kernelbench -j {jobs} wrote no report: {measured.stderr[-800:]}")
        report = json.loads(report_path.read_text())
        problems = report["problems"]
        seconds = [p["seconds"] for p in problems]
        per_level: dict[str, list[float]] = {}
        for problem in problems:
            per_level.setdefault(f"level{problem['level']}", []).append(problem["seconds"])
        runs[jobs] = {
            "wall_s": measured.seconds,
            "exit_code": measured.returncode,
            "peak_rss_bytes": measured.peak_rss_bytes,
            "tree_peak_bytes": measured.tree_peak_bytes,
            "processes": measured.processes,
            "problems": len(problems),
            "ok": sum(p["status"] == "ok" for p in problems),
            "failed": [(p["name"], p["status"], p["error"]) for p in problems
                       if p["status"] != "ok"],
            "sum_s": sum(seconds),
            "median_s": statistics.median(seconds),
            "p90_s": _percentile(seconds, 0.9),
            "max_s": max(seconds),
            "per_level_median_s": {k: statistics.median(v) for k, v in sorted(per_level.items())},
            "slowest": sorted(((p["seconds"], p["name"], (p["result"] or {}).get("op_count"))
                               for p in problems), reverse=True)[:6],
            "notes": sorted({(p["name"], note) for p in problems
                             for note in ((p["result"] or {}).get("notes") or [])}),
            "report": report,
        }
    return runs


def scale(names: Sequence[str]) -> list[dict]:
    rows = []
    for name in names:
        data, measured = run_child("scale", name)
        rows.append({**data, "process_wall_s": measured.seconds})
    return rows


def per_op(depth: int, repeats: int, layers: int) -> dict:
    data, measured = run_child("perop", str(depth), str(repeats), str(layers))
    return {**data, "process_wall_s": measured.seconds}


def prototype_side_by_side(paths: Sequence[Path], batched: bool) -> list[dict]:
    """Each method in its own subprocess per problem (or, ``batched``, one subprocess per
    method for all of them, the peak reset between problems); returns one row per problem."""
    groups = [list(paths)] if batched else [[path] for path in paths]
    rows = []
    for group in groups:
        names = [str(path) for path in group]
        ours, ours_run = run_child("ours", *names)
        proto, proto_run = run_child("proto", *names)
        for mine, theirs in zip(ours["problems"], proto["problems"], strict=True):
            rows.append({
                "label": suite.label(Path(mine["path"])),
                "ours": mine,
                "proto": theirs,
                "ours_process_peak_bytes": ours_run.peak_rss_bytes,
                "proto_process_peak_bytes": proto_run.peak_rss_bytes,
            })
    return rows


def machine() -> dict:
    import torch

    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = _meminfo_bytes("MemTotal")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": memory / 2**30 if memory else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _meminfo_bytes(field: str) -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _has_ptflops() -> bool:
    try:
        import ptflops  # noqa: F401
    except ImportError:
        return False
    return True


# --- The report ----------------------------------------------------------------------------


def _mb(nbytes: float | None) -> str:
    return "—" if nbytes is None else f"{nbytes / MiB:,.0f} MiB"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def _g(value: float | None) -> str:
    """FLOPs in engineering units."""
    if value is None:
        return "—"
    for unit, scale_ in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6),
                         ("K", 1e3)):
        if abs(value) >= scale_:
            return f"{value / scale_:.3g} {unit}"
    return f"{value:g}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "—"
    if b == 0:
        return "∞" if a else "1.00"
    return f"{a / b:.2f}"


def _mark(ok: bool) -> str:
    return "met" if ok else "**missed**"


#: Why the three FLOP counts differ, problem by problem (checked against each tool's source:
#: ptflops 0.7.5 pytorch_ops.py / pytorch_engine.py, torch.utils.flop_counter, costs.py).
WHY: dict[str, str] = {
    "level1/Standard_matrix_multiplication_": "all three agree: one `torch.matmul`, 2·M·N·K.",
    "level1/Batched_matmul_broadcast": "ptflops 0: `A @ B` is `Tensor.__matmul__`, which "
    "ptflops does not patch (it patches `torch.matmul` and `Tensor.matmul`).",
    "level1/conv_standard_2D__asymmetric_input__square_kernel": "ptflops adds the bias as one "
    "MAC (2 FLOPs) per output element; ours and FlopCounterMode count the convolution's "
    "2·K·C_in multiply-adds per output and no bias.",
    "level1/conv_standard_1D_dilated_strided": "same as the 2-D conv: ptflops' bias MAC per "
    "output element is the whole difference.",
    "level1/conv_transposed_2D__square_input__square_kernel": "ptflops counts the bias (2 "
    "FLOPs per output element); the transposed-conv MACs agree.",
    "level1/Max_Pooling_2D_small": "ptflops counts twice: the `nn.MaxPool2d` hook and the "
    "patched `F.max_pool2d` it calls each add one MAC per *input* element; ours counts one "
    "comparison per window element per output (k² per output); FlopCounterMode has no pool rule.",
    "level1/ScaledDotProductAttention_small": "ptflops has no rule for "
    "`F.scaled_dot_product_attention` (0); FlopCounterMode on CPU tensors sees "
    "`_scaled_dot_product_flash_attention_for_cpu`, which is not in its registry (0); ours "
    "intercepts the call and counts both attention matmuls, 4·B·H·L²·D.",
    "level1/Softmax": "ptflops 0: `torch.softmax` is not patched (only `F.softmax`); "
    "FlopCounterMode counts only matmul-class ops; ours counts 5 vector FLOPs per element "
    "(max, subtract, exp, sum, divide).",
    "level1/GELU_": "ptflops counts `F.gelu` as one MAC (→ 2 FLOPs) per element; ours charges "
    "GELU's erf form 4 FLOPs per element; FlopCounterMode 0 (not matmul-class).",
    "level1/Sum_reduction_small": "a reduction: no tool but ours counts it (one add per input "
    "element).",
    "level1/LayerNorm_last_dim": "ptflops' norm hook charges one MAC per element, two only when"
    " the module has an `affine` attribute, which `nn.LayerNorm` calls `elementwise_affine`: 2 "
    "FLOPs per element; ours counts mean, variance, normalize and affine, 8 per element; "
    "FlopCounterMode 0.",
    "level1/MSELoss_small": "ptflops 0: `(p - t) ** 2` and `torch.mean` use no hooked module or "
    "patched function; ours counts subtract, square and the mean's adds (3 per element).",
    "level1/CrossEntropyLoss_small": "ptflops 0: `F.cross_entropy` is not patched; ours counts "
    "log-softmax and the NLL gather/mean.",
    "level2/Conv2d_ReLU_BiasAdd": "total agrees by coincidence of two differences: ptflops "
    "adds the conv bias (2 per output) but misses `torch.relu` and the `+ bias` (`Tensor.__add__`"
    " is not patched); ours counts relu and add (1 each) and no conv bias.",
    "level2/Conv2d_BatchNorm_Scale": "ptflops: conv bias 2 + BatchNorm (affine) 4 per element, "
    "misses the `* scale`; ours: BatchNorm 8 per element (statistics, normalize, affine), the "
    "scale multiply and the `num_batches_tracked += 1` (the stray 1), no conv bias.",
    "level2/ConvTranspose3d_Softmax_Multiply": "ptflops: conv bias, misses `torch.softmax` and "
    "`* 2.0`; ours counts the softmax (5) and the multiply (1) per element.",
    "level2/Gemm_GELU_GroupNorm": "ptflops: Linear bias (2 per output) + `F.gelu` 2 + GroupNorm "
    "(affine) 4 per element; ours: GELU 4 + GroupNorm 8 per element, no bias.",
    "level2/Matmul_LayerNorm_Tanh": "ptflops misses `torch.tanh`, counts LayerNorm at 2 per "
    "element; ours counts LayerNorm 8 + tanh 1 per element.",
    "level2/Gemm_BatchNorm_GELU_GroupNorm_Mean_ReLU": "the pointwise and norm counts differ as "
    "above; the GEMM agrees.",
    "level3/MLP": "ptflops counts each `nn.ReLU` twice (module hook + the patched `F.relu` it "
    "calls: 4 FLOPs per element) and the Linear biases; the GEMMs agree.",
    "level3/LeNet5": "ptflops counts conv/Linear biases and the `F.relu`/`F.max_pool2d` calls "
    "(patched functionals); ours counts pool comparisons per window; GEMMs/convs agree.",
    "level3/AlexNet": "biases, double-counted `nn.ReLU`/`nn.MaxPool2d` in ptflops; the "
    "convolutions and GEMMs (99.9% of the work) agree across all three.",
    "level3/ResNet_small": "convolutions agree; ptflops counts BatchNorm (affine) at 4 per "
    "element, ours at 8, and ours counts the residual adds and `torch.relu` calls ptflops misses"
    " (it sees only the `nn.ReLU` modules, twice each).",
    "level3/ConvNeXtBlock": "ptflops counts the conv bias, LayerNorm at 2, GELU at 2, misses "
    "`* gamma` and the residual add; ours LayerNorm 8, GELU 4, plus both.",
    "level3/TransformerEncoderLayer": "FlopCounterMode misses the attention matmuls: on CPU "
    "tensors `multi_head_attention_forward` calls SDPA's CPU flash kernel (no rule); ptflops' "
    "`nn.MultiheadAttention` hook counts them itself, as ours does.",
    "level3/GPT_tiny": "ptflops has no SDPA rule (misses attention) and counts LayerNorm/GELU "
    "per its MAC rules; FlopCounterMode misses the CPU SDPA kernel; ours counts causal "
    "attention's kept half of the score matrix, L(L+1)/2 of L² entries.",
    "level3/MinGPTCausalAttention": "ptflops misses both attention matmuls (`q @ k` and "
    "`att @ v` are `Tensor.__matmul__`); the fx trace fails (slicing a buffer by a traced "
    "length, `mask[:, :, :t, :t]`); FlopCounterMode and ours agree on the matmuls, ours adds "
    "the masked softmax and scale.",
    "level3/LSTM_single_layer": "FlopCounterMode: the CPU LSTM is one `mkldnn_rnn_layer` op "
    "with no rule, so only the final Linear is counted; ptflops' RNN hook and ours both count "
    "the gate GEMMs and cell pointwise ops (ours the cuDNN call's 8·H·(I+H) per step and "
    "direction plus the cell's vector ops).",
    "level3/VanillaRNNCell_manual": "two Linears: agree up to ptflops' bias MACs and "
    "`torch.tanh`, which ours counts and ptflops does not.",
}


def _why(label: str, ptflops_flops: int | None, ours: int, fcm: int | None) -> str:
    if ptflops_flops is not None and fcm is not None and ours:
        if abs(ptflops_flops - ours) <= 0.001 * ours and abs(fcm - ours) <= 0.001 * ours:
            return "all three agree within 0.1%."
    return WHY.get(label, "see the general explanation below.")


def render(data: dict) -> str:
    import speed_cases  # (imports torch: only once the children have run)

    lines: list[str] = ["# torchroofline benchmarks", ""]
    info = data["machine"]
    lines += [
        f"Produced by `{data['command']}` on {info['date']} — every figure below comes from "
        "that run.", "",
        f"- Machine: {info['cpu']}, {info['cores']} cores, "
        f"{info['ram_gib']:.1f} GiB RAM ({info['platform']})",
        f"- Python {info['python']}, torch {info['torch']}",
        f"- Total benchmark time: {data['total_s']:.0f} s", "",
    ]
    lines += _render_headline(data)
    lines += _render_suite(data)
    lines += _render_scale(data)
    lines += _render_perop(data)
    lines += speed_cases.render(data["cases"])
    lines += _render_proto(data)
    lines += _render_profile_notes(data)
    return "\n".join(lines) + "\n"


def _render_headline(data: dict) -> list[str]:
    """The figures README.md quotes (docs/sync_docs.py copies this section verbatim)."""
    suite = data["suite"]
    widest = max(suite, key=int)
    run = suite[widest]
    perop = data["perop"]
    rows = [[f"{run['problems']}-problem KernelBench-format suite, -j {widest}, start-up "
             "included", f"{run['wall_s']:.1f} s ({_ms(run['median_s'])} median per problem)",
             "≤ 30 s"]]
    big = next((row for row in data["scale"] if row["model"] == "70B"), None)
    if big is not None:
        rows.append(["70 B decoder on meta tensors, 8 × 2048 tokens",
                     f"{_ms(big['analyze']['seconds'])}, {_mb(big['process_peak_rss_bytes'])} "
                     "peak RSS", "≤ 10 s, ≤ 1 GiB"])
    rows.append([f"per traced aten op ({perop['ops']:,}-op model)",
                 f"{perop['analyze_s'] / perop['ops'] * 1e3:.3f} ms = "
                 f"{perop['analyze_s'] / perop['bare_s']:.2f}× a bare FakeTensorMode run", "≤ 2×"])
    rows.append(["6-layer bidirectional GRU over 512 steps", _ms(perop["gru_s"]), "a few seconds"])
    if data.get("proto"):
        proto_total = sum(r["proto"]["seconds"] for r in data["proto"])
        ours_total = sum(r["ours"]["seconds"] for r in data["proto"])
        rows.append([f"vs the prototype (ptflops + fx on real tensors), {len(data['proto'])} "
                     "problems", f"{proto_total / ours_total:,.0f}× faster overall", "≥ 50×"])
    return ["## Headline", "", *_table(["figure", "measured", "target"], rows), ""]


def _render_suite(data: dict) -> list[str]:
    runs = data["suite"]
    first = next(iter(runs.values()))
    counts = data["suite_counts"]
    lines = [
        "## Suite speed", "",
        "`python -m torchroofline kernelbench <suite> -j N --out report.json` as a subprocess on "
        f"a generated KernelBench-format suite (`benchmarks/suite.py`) of {first['problems']} "
        f"problems ({', '.join(f'{k}: {v}' for k, v in counts.items())}). Wall time includes "
        "interpreter start-up, `import torch` and the forkserver. Per-problem time is the "
        "report's `seconds` (load + build on fake tensors + trace + price, in a warm worker). "
        "Peak RSS is the largest `VmHWM` of any process in the run's tree (sampled every "
        f"{SAMPLE_S * 1e3:.0f} ms); the tree sum counts pages shared by forked workers twice.",
        "",
    ]
    rows = [
        [f"-j {jobs}", f"{run['wall_s']:.2f} s", f"{run['ok']}/{run['problems']}",
         len(run["failed"]), _ms(run["sum_s"]), _ms(run["median_s"]), _ms(run["p90_s"]),
         _ms(run["max_s"]), _mb(run["peak_rss_bytes"]), _mb(run["tree_peak_bytes"]),
         run["processes"]]
        for jobs, run in runs.items()
    ]
    lines += _table(["jobs", "total wall", "ok", "failed", "sum of per-problem", "median",
                     "p90", "max", "peak RSS (largest process)", "peak RSS (tree sum)",
                     "processes"], rows)
    lines += ["", "Median per-problem time by level (-j 1): " + ", ".join(
        f"{level} {_ms(s)}" for level, s in first["per_level_median_s"].items()) + ".", "",
        "Slowest problems (-j 1):", ""]
    lines += _table(["problem", "seconds", "aten ops"],
                    [[name, f"{s:.3f}", ops] for s, name, ops in first["slowest"]])
    failed = [f for run in runs.values() for f in run["failed"]]
    lines += [""]
    if failed:
        lines += ["**Failures** (bugs):", ""]
        lines += [f"- `{name}`: {status}: {error}" for name, status, error in failed]
    else:
        lines += ["No problem failed."]
    if first["notes"]:
        lines += ["", "Notes the analysis attached (fallbacks, ops without a cost rule):", ""]
        lines += [f"- `{name}`: {note}" for name, note in first["notes"]]
    return lines + [""]


def _render_scale(data: dict) -> list[str]:
    lines = [
        "## Scale", "",
        f"GPT-style decoder-only transformers built under `torch.device('meta')` (no weight is "
        f"ever allocated) and analyzed over {SCALE_BATCH} × {SCALE_TOKENS} int64 token ids on "
        "meta; one subprocess per model. Analyze time is `torchroofline.analyze` in a warm "
        "process; process wall includes start-up. Peak RSS is the process's `VmHWM` (interpreter"
        " and torch included); 'added' is the peak during analyze above the RSS before it.", "",
    ]
    rows = [
        [row["model"], f"{row['params'] / 1e9:.3g} B", row["ops"], _g(row["flops"]),
         _ms(row["build"]["seconds"]), _ms(row["analyze"]["seconds"]),
         f"{row['process_wall_s']:.2f} s", _mb(row["process_peak_rss_bytes"]),
         _mb(row["analyze"]["added_rss_bytes"])]
        for row in data["scale"]
    ]
    lines += _table(["model", "params", "aten ops", "FLOPs", "build (meta)", "analyze",
                     "process wall", "peak RSS", "added by analyze"], rows)
    big = next((row for row in data["scale"] if row["model"] == "70B"), None)
    if big is not None:
        fast = big["analyze"]["seconds"] <= TARGET_70B_S
        small = big["process_peak_rss_bytes"] <= TARGET_70B_RSS_BYTES
        lines += ["", f"Targets for 70 B: ≤ {TARGET_70B_S:g} s — {_mark(fast)} "
                  f"({_ms(big['analyze']['seconds'])}); ≤ 1 GiB peak RSS — {_mark(small)} "
                  f"({_mb(big['process_peak_rss_bytes'])})."]
    return lines + [""]


def _render_perop(data: dict) -> list[str]:
    row = data["perop"]
    ops = row["ops"]
    bare, trace, full = row["bare_s"], row["trace_s"], row["analyze_s"]
    ratio = full / bare
    lines = [
        "## Per-op overhead", "",
        f"A stack of {row['depth']} small transformer blocks (width 64, attention written out) "
        f"on meta: {ops:,} aten ops. Bare = the same forward under a plain `FakeTensorMode` "
        "(parameters and input made fake on `cuda`, as the trace does; no recorder, hooks or "
        f"interceptor). Best of {row['repeats']} runs each, in a warm process.", "",
    ]
    lines += _table(
        ["run", "time", "per aten op", "vs bare"],
        [["bare FakeTensorMode", _ms(bare), f"{bare / ops * 1e3:.3f} ms", "1.00×"],
         ["torchroofline trace only (`trace_model`)", _ms(trace), f"{trace / ops * 1e3:.3f} ms",
          f"{trace / bare:.2f}×"],
         ["torchroofline `analyze` (trace + costs + fusion + roofline)", _ms(full),
          f"{full / ops * 1e3:.3f} ms", f"{ratio:.2f}×"]],
    )
    lines += [
        "", f"Added per traced op: {(full - bare) / ops * 1e3:.3f} ms (analyze), "
        f"{(trace - bare) / ops * 1e3:.3f} ms (trace only), against FakeTensorMode's own "
        f"{bare / ops * 1e3:.3f} ms. Target ≤ {TARGET_PEROP_RATIO:g}× — "
        f"{_mark(ratio <= TARGET_PEROP_RATIO)} ({ratio:.2f}×).", "",
        f"6-layer bidirectional GRU (input 128, hidden 256, batch 10) over 512 steps: "
        f"{_ms(row['gru_s'])} for `analyze` (best of 3), {row['gru_ops']} traced op(s) — the "
        "cuDNN-style RNN call is intercepted above the dispatcher, so the 512 × 6 × 2 cell steps"
        f" are never executed one by one. Target: a few seconds — "
        f"{_mark(row['gru_s'] <= 3.0)}.", "",
    ]
    return lines


def _render_proto(data: dict) -> list[str]:
    lines = ["## The prototype's method side by side", ""]
    if data.get("proto_skipped"):
        return lines + [data["proto_skipped"], ""]
    rows = data["proto"]
    lines += [
        f"{len(rows)} suite problems whose real tensors fit in memory (compulsory bytes ≤ "
        f"{PROTO_MAX_REAL_BYTES / 2**30:g} GiB), "
        + ("each method in its own subprocess per problem" if not data["proto_batched"] else
           "each method in its own subprocess running all of them, the peak reset between "
           "problems")
        + ", after a warm-up on a tiny model so imports are not timed. **Prototype** "
        "(`benchmarks/prototype.py`): build the model and inputs with real tensors, "
        "`ptflops.get_model_complexity_info(backend='pytorch')` (FLOPs = 2 × MACs), then "
        "`torch.fx.symbolic_trace` + `ShapeProp` on the real inputs (bytes). **Ours**: "
        "`analyze_file` (build on fake tensors, trace, price). Peak = process `VmHWM`; added = "
        "peak during the problem above the RSS before it.", "",
    ]
    table = []
    speedups, mem_ratios, added_ratios = [], [], []
    for row in rows:
        ours, proto = row["ours"], row["proto"]
        speed = proto["seconds"] / ours["seconds"]
        speedups.append(speed)
        mem_ratios.append(proto["peak_rss_bytes"] / ours["peak_rss_bytes"])
        added_ratios.append(max(proto["added_rss_bytes"], MiB) / max(ours["added_rss_bytes"], MiB))
        table.append([
            row["label"], _ms(proto["seconds"]),
            f"{_ms(proto['build_s'])} / {_ms(proto['ptflops_s'])} / {_ms(proto['fx_s'])}",
            _ms(ours["seconds"]), f"{speed:,.0f}×", _mb(proto["peak_rss_bytes"]),
            _mb(ours["peak_rss_bytes"]), _mb(proto["added_rss_bytes"]),
            _mb(ours["added_rss_bytes"]),
        ])
    lines += _table(["problem", "prototype", "build / ptflops / fx", "ours", "speed-up",
                     "prototype peak", "ours peak", "prototype added", "ours added"], table)
    proto_total = sum(r["proto"]["seconds"] for r in rows)
    ours_total = sum(r["ours"]["seconds"] for r in rows)
    overall = proto_total / ours_total
    lines += [
        "", f"Totals: prototype {proto_total:.2f} s, ours {ours_total:.2f} s — **{overall:,.0f}× "
        f"faster** overall (median per problem {statistics.median(speedups):,.0f}×, min "
        f"{min(speedups):,.0f}×). Peak memory (whole process, interpreter included): median "
        f"ratio {statistics.median(mem_ratios):.2f}×, max {max(mem_ratios):.2f}×; memory added "
        f"by the problem itself (floored at 1 MiB): median {statistics.median(added_ratios):,.0f}"
        f"×, max {max(added_ratios):,.0f}×. Target ≥ {TARGET_PROTO_SPEEDUP:g}× faster — "
        f"{_mark(overall >= TARGET_PROTO_SPEEDUP)} overall; problems below it: "
        + (", ".join(f"`{r['label']}` ({s:.0f}×)" for r, s in zip(rows, speedups, strict=True)
                     if s < TARGET_PROTO_SPEEDUP) or "none") + ".",
        "",
        *_why_speed(rows, speedups, data.get("too_big")), "",
        "Where a method failed:", "",
    ]
    failures = [(r["label"], e) for r in rows for e in r["proto"]["errors"]]
    lines += [f"- `{label}`: {error}" for label, error in failures] or ["- none"]
    lines += _render_flops(rows)
    return lines + [""]


def _why_speed(rows: list[dict], speedups: list[float], too_big: dict | None) -> list[str]:
    heavy = [s for r, s in zip(rows, speedups, strict=True) if r["proto"]["seconds"] >= 0.5]
    light = [s for r, s in zip(rows, speedups, strict=True) if r["proto"]["seconds"] < 0.5]
    ours = sorted(r["ours"]["seconds"] for r in rows)
    lines = [
        "Why the speed-up depends on the problem: the prototype's time is real arithmetic and "
        "real allocation on the CPU (building the weights and inputs, then two forwards: "
        "ptflops' hooked one and ShapeProp's), so it grows with the problem's size; ours never "
        "computes a value, so its time depends on the ops, not the sizes — "
        f"{_ms(ours[0])} to {_ms(ours[-1])} per problem here, most of it FakeTensorMode's "
        "first-call dispatch of each op and shape (meta kernels, most of them Python "
        "decompositions, run for the first time in the process: ~1–5 ms each, ~0.3 ms per "
        "cache miss of FakeTensorMode itself) and the model's construction on fake tensors "
        "(a ResNet's ~190 initializer and factory ops).",
    ]
    if heavy and light:
        lines[0] += (
            f" On the {len(heavy)} problems where the prototype needs ≥ 0.5 s the median "
            f"speed-up is {statistics.median(heavy):,.0f}×; on the {len(light)} small ones "
            f"(milliseconds of real compute) it is "
            f"{statistics.median(light):,.0f}×: the ≥ {TARGET_PROTO_SPEEDUP:g}× target holds "
            "only where there is real work to skip."
        )
    if too_big and too_big["count"]:
        lines += ["", f"The subset leaves out what the prototype cannot run: {too_big['count']}"
                  f" of the suite's {too_big['of']} problems need more than "
                  f"{PROTO_MAX_REAL_BYTES / 2**30:g} GiB of real inputs, parameters and outputs "
                  f"(up to {too_big['max_bytes'] / 2**30:,.0f} GiB; {_g(too_big['flops'])}FLOPs "
                  f"in all); ours analyzed all of them in {too_big['ours_s']:.2f} s (-j 1)."]
    return lines


def _render_flops(rows: list[dict]) -> list[str]:
    lines = [
        "", "### FLOPs agreement", "",
        "ptflops (2 × MACs, on real tensors) vs ours (`flops.total`, and its tensor-core class "
        "part) vs `FlopCounterMode` (on the problem built on fake CPU tensors). Ratios are "
        "against ours.", "",
    ]
    table = []
    for row in rows:
        ours, proto = row["ours"], row["proto"]
        total, tensor = ours["flops"]["total"], ours["flops"]["tensor"]
        fcm = ours["flop_counter_mode"]
        table.append([
            row["label"], _g(proto["flops"]), _g(total), _g(tensor), _g(fcm),
            _ratio(proto["flops"], total), _ratio(fcm, tensor),
            _why(row["label"], proto["flops"], total, fcm),
        ])
    lines += _table(["problem", "ptflops", "ours total", "ours tensor", "FlopCounterMode",
                     "ptflops / ours", "FCM / ours tensor", "why they differ"], table)
    lines += [
        "", "### Why the counts differ", "",
        "- **ptflops counts only what it hooks.** Forward hooks on the `nn.Module` types in its "
        "table (conv, Linear, norms, pools, activations as modules, RNNs, "
        "`nn.MultiheadAttention`) plus, with `count_functional` (on by default in 0.7.5), "
        "patched `F.relu/prelu/elu/relu6/gelu/silu/softmax`, pools, `F.interpolate` and "
        "`torch.matmul/mm/bmm/addmm/baddbmm/add/mul` (and the same `Tensor` methods). "
        "Everything else is 0: the `@` operator (`Tensor.__matmul__`), `torch.relu`, "
        "`torch.softmax`, `torch.tanh`, `x + y` (`Tensor.__add__`), reductions, losses, "
        "`F.scaled_dot_product_attention`, functional norms, embeddings.",
        "- **ptflops double-counts a hooked module whose forward calls a patched function**: "
        "`nn.ReLU` (hook + `F.relu`), `nn.MaxPool2d` (hook + `F.max_pool2d`), `nn.GELU`, "
        "`nn.Softmax`, adaptive pools.",
        "- **ptflops' unit is the MAC**, and it charges one MAC per element to pointwise ops and "
        "1–2 to norms, so `2 × MACs` gives 2 FLOPs per ReLU element and 2–4 per norm "
        "element; ours charges each op its own count (ReLU 1, sigmoid 3, GELU/SiLU 4, softmax "
        "5, Batch/Layer/Group/InstanceNorm 8 per element). ptflops also adds conv/Linear bias "
        "as a MAC per output (2 FLOPs); ours and FlopCounterMode (whose formulas ours reuses) "
        "count no bias.",
        "- **FlopCounterMode counts only matmul-class ops** (its registry: mm, addmm, bmm, "
        "baddbmm, convolution, the CUDA SDPA kernels); pointwise, norms, reductions, pools are 0. "
        "On CPU tensors SDPA dispatches to `_scaled_dot_product_flash_attention_for_cpu` and "
        "`nn.LSTM/GRU` to `mkldnn_rnn_layer`, neither in its registry, so attention and "
        "recurrences count 0 there. Ours intercepts SDPA and the RNN call above the dispatcher "
        "and prices them as the one GPU kernel they are.",
        "- **Ours = FlopCounterMode on matmul-class ops** wherever FlopCounterMode sees them "
        "(`ours tensor` column), plus vector FLOPs for everything else, plus causal attention "
        "counted at the kept share of the score matrix.",
        "- **Bytes**: the fx trace cannot follow data-dependent Python (slicing by a traced "
        "length, value checks in `nn.TransformerEncoderLayer`'s fast-path test) — see failures "
        "above; ours records what actually ran.",
    ]
    return lines


def _startup_line(startup: dict | None, j1: dict) -> str:
    outside = (f"the -j 1 suite run spent {j1['wall_s'] - j1['sum_s']:.2f} s of its "
               f"{j1['wall_s']:.2f} s outside problems")
    if startup is None:
        return f"- **Start-up**: {outside} (import times are not measured with --quick)."
    return (
        f"- **Start-up** (least of {STARTUP_RUNS} runs, bytecode compiled): `python -c 'import "
        f"torch'` {startup['torch_s']:.2f} s; `torchroofline analyze` of one level-1 problem, "
        f"start to end, {startup['analyze_s']:.2f} s "
        f"({startup['analyze_s'] - startup['torch_s']:.2f} s beyond `import torch`; Dynamo is "
        f"never imported); `python -c 'import torchroofline'` {startup['import_s']:.2f} s, "
        f"`import torchroofline._preload` (what the forkserver loads: torch, the analysis "
        f"modules and a warm-up analysis) {startup['preload_s']:.2f} s; {outside}."
    )


def _wall(command: Sequence[str]) -> float:
    """The least wall time of :data:`STARTUP_RUNS` runs of ``command`` (the least disturbed
    by whatever else the machine runs)."""
    walls = []
    for _ in range(STARTUP_RUNS):
        measured = measure(command)
        if measured.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {measured.stderr[-400:]}")
        walls.append(measured.seconds)
    return min(walls)


def _render_profile_notes(data: dict) -> list[str]:
    perop = data["perop"]
    ratio = perop["analyze_s"] / perop["bare_s"]
    floor = perop["mode_s"] / perop["bare_s"]
    calls = perop["per_call_ms"]
    j1 = data["suite"][1]
    return [
        "## Where the time goes", "",
        f"Per-op overhead ratio in this run: {ratio:.2f}× "
        f"({'within' if ratio <= TARGET_PEROP_RATIO else 'over'} the {TARGET_PEROP_RATIO:g}× "
        "target). Figures measured in this run:", "",
        f"- **A do-nothing `TorchDispatchMode` alone costs {floor:.2f}×** the bare fake run "
        f"({_ms(perop['mode_s'])} vs {_ms(perop['bare_s'])}): the floor for any recorder built "
        "on the supported dispatch hook, before it does any work.",
        f"- **`analyze` per layer** (a stack of {perop['per_call_layers']} identical layers on "
        "a 10×64×56×56 input): "
        f"training-mode BatchNorm2d {calls['batch_norm_train']:.2f} ms, eval-mode "
        f"{calls['batch_norm_eval']:.2f} ms, LayerNorm {calls['layer_norm']:.2f} ms, ReLU "
        f"{calls['relu']:.2f} ms.",
        _startup_line(data.get("startup"), j1),
        "",
        "From profiles on this machine (pyinstrument and cProfile, run by hand on the same "
        "deep stack and on the suite's ResNet-101; not re-measured by this script):", "",
        "- The recorder's own work is ~0.1 ms per op, mostly pytree: `_Recorder.record` runs "
        "`tree_map(_shape_arg, …)` over args, kwargs and output although with fake inputs "
        "`_shape_arg` returns every leaf unchanged, and `_tensors` uses `tree_flatten`. "
        "Skipping those `tree_map`s when every tensor is fake or meta, a plain recursive scan in"
        " `_tensors` and one `str(func)` per op cut `trace_model` by ~15–20% on 14,700 ops "
        "(identical `to_dict()`); turning the cyclic GC off during the trace cut it by another "
        "~10% (the trace keeps ~10⁵ objects alive and gen-2 collections rescan them).",
        "- Ops that PyTorch decomposes in Python (`addmm`, `native_batch_norm`, "
        "`native_layer_norm`, `nll_loss_forward`, ...) are run by their meta kernel, which is "
        "the same decomposition, on the fake tensors as meta (trace/fast_fake.py "
        "`META_DECOMPOSED`), their output layout kept by (op, argument metadata): "
        "FakeTensorMode runs the decomposition with every op inside it dispatched through the "
        "mode again, 10–30 ms per new op and shape (training BatchNorm twice: it fails on fake "
        "CUDA first). Models are built with FakeTensorMode's cache off (a miss's key and entry "
        "cost as much as the op).",
        "- `torchroofline kernelbench` imports torch in the parent (the package `__init__` "
        "imports the whole pipeline) before starting the forkserver, which imports it again; "
        "starting the forkserver first would overlap the two on ≥ 2 cores.",
        "",
    ]


# --- Main ----------------------------------------------------------------------------------


#: The start-up figures: each command's least wall time of :data:`STARTUP_RUNS` runs.
STARTUP = {
    "torch_s": [sys.executable, "-c", "import torch"],
    "analyze_s": [sys.executable, "-m", "torchroofline", "analyze", str(
        HERE.parent / "examples" / "kernelbench" / "level1" / "1_Square_matrix_multiplication_.py"
    ), "--data", "any"],
    "import_s": [sys.executable, "-c", "import torchroofline"],
    "preload_s": [sys.executable, "-c", "import torchroofline._preload"],
}
STARTUP_RUNS = 3


def _bytecode_cached(cache: str, compile_now: bool) -> None:
    """Every child reads compiled bytecode, as an installed package does (pip compiles it):
    written to ``cache`` on first import even where PYTHONDONTWRITEBYTECODE is set, and, with
    ``compile_now``, made for the start-up commands before any is timed (compiling the ~120
    modules an analysis imports takes about 1 s, once per install, not once per run)."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = cache
    for command in STARTUP.values() if compile_now else ():
        subprocess.run(command, capture_output=True, check=True)


def run_all(quick: bool, command: str) -> dict:
    started = time.perf_counter()
    bytecode = tempfile.mkdtemp(prefix="torchroofline-bytecode-")
    _bytecode_cached(bytecode, compile_now=not quick)
    data: dict[str, Any] = {"machine": machine(), "command": command, "quick": quick}
    root = Path(tempfile.mkdtemp(prefix="torchroofline-suite-"))
    try:
        paths = suite.write_suite(root, quick=quick)
        data["suite_counts"] = {
            level.name: sum(1 for p in paths if p.parent == level)
            for level in sorted({p.parent for p in paths})
        }
        _say(f"suite: {len(paths)} problems under {root}")
        if not quick:  # more interpreter start-ups: left out of --quick
            data["startup"] = {name: _wall(command) for name, command in STARTUP.items()}
        data["suite"] = suite_speed(root, (1, 2))
        _say("scale")
        data["scale"] = scale(["GPT-2 small"] if quick else list(GPT_SHAPES))
        _say("many slices, real inputs")
        data["cases"], _ = run_child("cases", "quick" if quick else "full")
        _say("per-op overhead")
        data["perop"] = per_op(depth=20 if quick else 300, repeats=1 if quick else 3,
                               layers=4 if quick else 20)
        if _has_ptflops():
            chosen = _proto_candidates(paths, data["suite"][1]["report"], quick)
            _say(f"prototype side by side: {len(chosen)} problems")
            data["proto_batched"] = quick
            data["proto"] = prototype_side_by_side(chosen, batched=quick)
        else:
            data["proto_skipped"] = (
                "Skipped: ptflops is not installed (`pip install -e '.[bench]'`)."
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(bytecode, ignore_errors=True)
    data["too_big"] = _too_big_for_real(data["suite"][1]["report"])
    data["total_s"] = time.perf_counter() - started
    for run in data["suite"].values():
        run.pop("report")
    return data


def _too_big_for_real(report: dict) -> dict:
    """Suite problems whose real inputs, parameters and outputs alone exceed the prototype's
    memory budget: what a real-tensor method cannot even start on this machine."""
    big = [p for p in report["problems"] if p["result"]
           and p["result"]["bytes"]["compulsory"] > PROTO_MAX_REAL_BYTES]
    return {
        "count": len(big),
        "of": len(report["problems"]),
        "max_bytes": max((p["result"]["bytes"]["compulsory"] for p in big), default=0),
        "ours_s": sum(p["seconds"] for p in big),
        "flops": sum(p["result"]["flops"]["total"] for p in big),
    }


def _proto_candidates(paths: list[Path], report: dict, quick: bool) -> list[Path]:
    """The prototype subset, less any problem whose real tensors would not fit (ours' compulsory
    bytes: inputs, parameters and outputs at their real sizes)."""
    compulsory = {
        Path(p["path"]).name: (p["result"] or {}).get("bytes", {}).get("compulsory")
        for p in report["problems"]
    }
    return [
        path for path in suite.proto_subset(paths, quick=quick)
        if (compulsory.get(path.name) or 0) <= PROTO_MAX_REAL_BYTES
    ]


_STARTED = time.perf_counter()


def _say(text: str) -> None:
    print(f"[benchmarks {time.perf_counter() - _STARTED:6.1f} s] {text}", file=sys.stderr,
          flush=True)


def report_path(out: str | None, quick: bool) -> Path:
    """``--out`` if given; else the tracked RESULTS.md for a full run, a temporary file for
    ``--quick`` (whose figures would otherwise replace the full run's, which README quotes)."""
    if out:
        return Path(out)
    return QUICK_OUT if quick else HERE / "RESULTS.md"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few problems, seconds")
    parser.add_argument(
        "--out",
        help="markdown report path (default: benchmarks/RESULTS.md; with --quick, "
        f"{QUICK_OUT})",
    )
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        print(json.dumps(CHILDREN[kind](*rest)))
        return 0
    command = "python benchmarks/run.py" + (" --quick" if args.quick else "")
    data = run_all(args.quick, command)
    text = render(data)
    out = report_path(args.out, args.quick)
    out.write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    print(text)
    _say(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
