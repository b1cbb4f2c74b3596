"""Sweeps: one program analysed over one or two axes that size its inputs, on several GPUs and
precisions, with the crossovers where its behaviour changes.

An axis is any name that sizes the inputs: a KernelBench problem file's module global
(``batch_size``: the file runs again with the global set to the value right after each of its
top-level assignments, ``batch_size, dim = 16, 64`` too, so the globals computed from it
follow), a SOL-ExecBench workload axis (``M``: every workload of ``workload.jsonl``, or the
first workload with the axis set to each value), or, in Python, the argument of a function that
returns the inputs (:func:`sweep_model`).

Each value of the axes is traced and planned once, on the first GPU and precision; every other
GPU and precision re-prices those plans (:meth:`~torchroofline.price.roofline.Result.on`, no
retrace), so a point is :func:`~torchroofline.api.analyze` at that value, GPU and precision.

Crossovers are read between neighbouring values along each line (one GPU, one precision, one
value of the second axis): the bottleneck turns (memory → compute bound), the peak memory stops
fitting the GPU, the GPUs' ranking changes. Between two integer values further than one apart
the crossover is narrowed by bisection (one trace per step) to two neighbouring integers.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch.nn as nn

from ..api import analyze
from ..errors import InputError
from ..price.hardware import GPUSpec, get_gpu
from ..price.precision import check_precision, restoring_switches
from ..price.roofline import Result, roofline_entry
from .kernelbench import BuiltProblem, analyze_file, build_problem, load_problem

Value = int | float
#: One point's place: axis name → value.
Values = Mapping[str, Value]
#: What a sweep calls to analyse the program at some axis values, on a GPU at a precision.
AnalyzeAt = Callable[[Values, GPUSpec, str], Result]

#: What a ranking of GPUs may order them by: the ``time_ms`` key of each choice.
RANK_TIMES = {"sol": "sol", "compile": "fused_estimate", "eager": "eager_estimate"}

#: The most values bisection traces to narrow one crossover (2**30 apart narrows fully).
NARROWING_STEPS = 30


@dataclass(frozen=True)
class SweepPoint:
    """One analysis of a sweep: the program at ``values`` on one GPU at one precision."""

    values: Mapping[str, Value]
    gpu: str  #: :attr:`GPUSpec.key`
    gpu_name: str
    precision: str
    bound: str  #: the bottleneck of the speed of light: "compute" or "memory"
    #: every time :attr:`Result.time_ms` holds as one number (ms): the speed of light and its
    #: terms, the eager, compile and CUDA-graph estimates and any band the estimate gives them
    time_ms: Mapping[str, float]
    flops: int  #: necessary FLOPs
    compulsory_bytes: int
    fused_bytes: int
    peak_bytes: int  #: the eager run's peak memory (allocator blocks)
    gpu_memory_bytes: int
    memory_verdict: str  #: :attr:`MemoryFit.verdict`: "fits", "tight" or "does not fit"

    @property
    def sol_ms(self) -> float:
        return self.time_ms["sol"]

    @property
    def fits(self) -> bool:
        """The peak fits the GPU's memory (a "tight" fit runs once the allocator frees its
        cache)."""
        return self.memory_verdict != "does not fit"

    @property
    def empty(self) -> bool:
        """Nothing to compute or move (a zero-size point): its speed of light is 0 and bounded
        by neither compute nor memory, as analyze says."""
        return not self.flops and not self.compulsory_bytes

    @property
    def intensity(self) -> float | None:
        """Necessary FLOPs per compulsory byte (None without bytes)."""
        return self.flops / self.compulsory_bytes if self.compulsory_bytes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "values": dict(self.values),
            "gpu": self.gpu,
            "gpu_name": self.gpu_name,
            "precision": self.precision,
            "bound": self.bound,
            **{f"{name}_ms": ms for name, ms in self.time_ms.items()},
            "flops": self.flops,
            "compulsory_bytes": self.compulsory_bytes,
            "fused_bytes": self.fused_bytes,
            "intensity": self.intensity,
            "peak_bytes": self.peak_bytes,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "fits": self.fits,
            "memory_verdict": self.memory_verdict,
        }


def point_of(result: Result, values: Values) -> SweepPoint:
    """The sweep's figures of one analysis."""
    fit = result.memory.fit(result.gpu)
    return SweepPoint(
        values=dict(values),
        gpu=result.gpu.key,
        gpu_name=result.gpu.name,
        precision=result.precision,
        bound=result.bottleneck,
        time_ms={name: ms for name, ms in result.time_ms.items() if isinstance(ms, float)},
        flops=result.flops,
        compulsory_bytes=result.compulsory_bytes,
        fused_bytes=result.fused_bytes,
        peak_bytes=fit.peak_bytes,
        gpu_memory_bytes=fit.capacity_bytes,
        memory_verdict=fit.verdict,
    )


@dataclass(frozen=True)
class Crossover:
    """Where, along the first axis, something changes on one line of the sweep."""

    kind: str  #: "bound" (the bottleneck turns), "fit" (the peak memory), "ranking" (of GPUs)
    #: what stays fixed along the line: ``gpu`` (not for a ranking), ``precision`` and the
    #: second axis's value
    line: Mapping[str, Any]
    axis: str
    before: Value  #: the last value in the old state
    after: Value  #: the first value in the new one
    old: str  #: "memory", "fits", or the GPU keys fastest first ("b200 > h100-sxm")
    new: str
    #: ``before`` and ``after`` are neighbouring integers: the change is at ``after`` exactly
    exact: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "line": dict(self.line), "axis": self.axis,
            "before": self.before, "after": self.after, "old": self.old, "new": self.new,
            "exact": self.exact,
        }

    def describe(self) -> str:
        """One line: "h100-sxm fp32: memory → compute bound at batch_size 41" (exact), else
        "… between batch_size 32 and 64"."""
        where = " ".join(str(value) for value in self.line.values())
        what = {"bound": f"{self.old} → {self.new} bound", "fit": f"{self.old} → {self.new}",
                "ranking": f"ranking {self.old} → {self.new}"}[self.kind]
        at = (f"at {self.axis} {self.after}" if self.exact
              else f"between {self.axis} {self.before} and {self.after}")
        return f"{where}: {what} {at}"


@dataclass(frozen=True)
class Sweep:
    """A program analysed over one or two axes, several GPUs and precisions."""

    name: str
    axes: tuple[str, ...]  #: the first is the one crossovers run along; a second is optional
    values: tuple[tuple[Value, ...], ...]  #: each axis's values, in sweep order
    gpus: tuple[str, ...]  #: GPU keys, in the order given
    precisions: tuple[str, ...]
    #: every analysis, values-major (in :func:`itertools.product` order), then GPU, precision
    points: tuple[SweepPoint, ...]
    crossovers: tuple[Crossover, ...]
    #: per GPU and precision: :func:`~torchroofline.price.roofline.roofline_entry` at the first
    #: values, with its ``gpu`` and ``precision``
    rooflines: tuple[Mapping[str, Any], ...]
    rank_by: str  #: a key of :data:`RANK_TIMES`
    traces: int  #: values traced: the points' and those bisection added
    seconds: float  #: wall time of the whole sweep
    notes: tuple[str, ...] = ()

    @property
    def axis(self) -> str:
        return self.axes[0]

    def rank(self, point: SweepPoint) -> int | None:
        """The point's GPU's place (1: fastest) among the GPUs at its values and precision;
        None where the time ranked by is 0 (an empty point under SoL: all tie at nothing)."""
        if not point.time_ms[RANK_TIMES[self.rank_by]]:
            return None
        return self.ranking(point.values, point.precision).index(point.gpu) + 1

    def ranking(self, values: Values, precision: str) -> list[str]:
        """The GPU keys at ``values`` and ``precision``, fastest first by :attr:`rank_by`."""
        return _ranked([
            point for point in self.points
            if point.precision == precision and point.values == values
        ], self.rank_by)

    def to_dict(self) -> dict[str, Any]:
        """The JSON layout: ``{"sweep": {axis, values, points, crossovers, ...}}``."""
        points = [{**point.to_dict(), "rank": self.rank(point)} for point in self.points]
        return {"sweep": {
            "name": self.name,
            "axis": self.axis,
            "values": list(self.values[0]),
            "series_axis": self.axes[1] if len(self.axes) > 1 else None,
            "series_values": list(self.values[1]) if len(self.axes) > 1 else [],
            "gpus": list(self.gpus),
            "precisions": list(self.precisions),
            "rank_by": self.rank_by,
            "points": points,
            "crossovers": [crossover.to_dict() for crossover in self.crossovers],
            "rooflines": [dict(entry) for entry in self.rooflines],
            "traces": self.traces,
            "seconds": self.seconds,
            "notes": list(self.notes),
        }}


def _ranked(points: Sequence[SweepPoint], rank_by: str) -> list[str]:
    """GPU keys, fastest first by :data:`RANK_TIMES`; ties keep the order given."""
    key = RANK_TIMES[rank_by]
    return [point.gpu for point in sorted(points, key=lambda point: point.time_ms[key])]


# --- The driver --------------------------------------------------------------------------------


class _Analyses:
    """Each value traced once, on the first GPU and precision; the rest re-priced from it."""

    def __init__(self, analyze_at: AnalyzeAt, specs: Sequence[GPUSpec],
                 precisions: Sequence[str]) -> None:
        self.specs, self.precisions = list(specs), list(precisions)  #: every one swept
        self._analyze_at, self._gpu, self._precision = analyze_at, specs[0], precisions[0]
        self._traced: dict[tuple, Result] = {}
        self._priced: dict[tuple, SweepPoint] = {}

    @property
    def traces(self) -> int:
        return len(self._traced)

    def result(self, values: Values, gpu: GPUSpec, precision: str) -> Result:
        key = tuple(values.items())
        if key not in self._traced:
            self._traced[key] = self._analyze_at(values, self._gpu, self._precision)
        first = self._traced[key]
        if gpu == self._gpu and precision == self._precision:
            return first
        return first.on(gpu, precision)

    def point(self, values: Values, gpu: GPUSpec, precision: str) -> SweepPoint:
        key = (tuple(values.items()), gpu.key, precision)
        if key not in self._priced:
            self._priced[key] = point_of(self.result(values, gpu, precision), values)
        return self._priced[key]


def run_sweep(
    name: str,
    analyze_at: AnalyzeAt,
    axes: Mapping[str, Sequence[Value]],
    gpus: Sequence[str | GPUSpec] = ("h100-sxm",),
    precisions: Sequence[str] = ("fp32",),
    *,
    rank_by: str = "sol",
    narrow: bool = True,
    grid: Sequence[tuple[Value, ...]] | None = None,
    notes: Sequence[str] = (),
) -> Sweep:
    """``analyze_at(values, gpu, precision)`` at every combination of ``axes``' values (or the
    ``grid`` of value tuples given, in the axes' order), on every GPU and precision, and the
    crossovers along the first axis (narrowed by bisection where ``narrow`` and the values are
    integers). ``rank_by``: what GPU rankings order by, a key of :data:`RANK_TIMES`."""
    started = time.perf_counter()
    names, value_lists = _checked_axes(axes)
    if rank_by not in RANK_TIMES:
        raise InputError(f"rank_by takes {', '.join(RANK_TIMES)}, got '{rank_by}'")
    specs = _unique([get_gpu(gpu) for gpu in gpus], "GPU")
    precisions = _unique([check_precision(precision) for precision in precisions], "precision")
    analyses = _Analyses(analyze_at, specs, precisions)
    grid = list(grid) if grid is not None else list(itertools.product(*value_lists))
    done: list[tuple[Value, ...]] = []  # the rows every GPU and precision has priced
    try:
        for row in grid:
            for spec in specs:
                for precision in precisions:
                    analyses.point(dict(zip(names, row, strict=True)), spec, precision)
            done.append(row)
        crossovers = tuple(_crossovers(analyses, names, grid, specs, precisions, rank_by,
                                       narrow))
    except KeyboardInterrupt:
        raise SweepInterrupted(_partial(name, analyses, names, grid, done, rank_by, [*notes],
                                        started)) from None
    return _assembled(name, analyses, names, value_lists, grid, crossovers, rank_by, notes,
                      started)


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C: ``sweep`` holds the values priced before it (no crossover
    narrowed after it), ``None`` where none was."""

    def __init__(self, sweep: Sweep | None) -> None:
        super().__init__(sweep.notes[-1] if sweep is not None else "interrupted")
        self.sweep = sweep


def _partial(name: str, analyses: _Analyses, names: Sequence[str], grid: Sequence[tuple],
             done: Sequence[tuple], rank_by: str, notes: list[str], started: float
             ) -> Sweep | None:
    """The sweep of the rows ``done`` of ``grid`` (the values of the first axis whose rows are
    all priced), its crossovers read between them, unnarrowed; None where no value was."""
    cut = grid[len(done)][0] if len(done) < len(grid) else None  # the value it stopped in
    rows = [row for row in done if row[0] != cut]
    if not rows:
        return None
    kept = [list(dict.fromkeys(row[axis] for row in rows)) for axis in range(len(names))]
    crossovers = tuple(_crossovers(analyses, names, rows, analyses.specs, analyses.precisions,
                                   rank_by, narrow=False))
    total = len(dict.fromkeys(row[0] for row in grid))
    notes.append(f"interrupted after {len(kept[0])} of {total} values of {names[0]}: the "
                 "report covers them, its crossovers not narrowed")
    return _assembled(name, analyses, names, kept, rows, crossovers, rank_by, notes, started)


def _assembled(name: str, analyses: _Analyses, names: Sequence[str],
               value_lists: Sequence[list[Value]], grid: Sequence[tuple],
               crossovers: tuple[Crossover, ...], rank_by: str, notes: Sequence[str],
               started: float) -> Sweep:
    """The :class:`Sweep` of ``grid``'s rows, each priced already in ``analyses``."""
    specs, precisions = analyses.specs, analyses.precisions
    points = tuple(
        analyses.point(dict(zip(names, row, strict=True)), spec, precision)
        for row in grid for spec in specs for precision in precisions
    )
    first = dict(zip(names, grid[0], strict=True))
    rooflines = tuple(
        {"gpu": spec.key, "precision": precision,
         **roofline_entry(spec, analyses.result(first, spec, precision).roofs)}
        for spec in specs for precision in precisions
    )
    return Sweep(
        name=name, axes=tuple(names),
        values=tuple(tuple(values) for values in value_lists),
        gpus=tuple(spec.key for spec in specs), precisions=tuple(precisions), points=points,
        crossovers=crossovers, rooflines=rooflines, rank_by=rank_by, traces=analyses.traces,
        seconds=time.perf_counter() - started, notes=tuple(notes),
    )


def _checked_axes(axes: Mapping[str, Sequence[Value]]) -> tuple[list[str], list[list[Value]]]:
    if not 1 <= len(axes) <= 2:
        raise InputError(f"a sweep takes one or two axes, got {len(axes)}")
    for name, values in axes.items():
        if not values:
            raise InputError(f"the axis '{name}' has no values; give at least one")
        if len(set(values)) != len(values):
            raise InputError(f"the axis '{name}' repeats a value; give each value once")
    return list(axes), [list(values) for values in axes.values()]


def _unique(items: list, what: str) -> list:
    if not items:
        raise InputError(f"a sweep needs at least one {what}")
    if len(set(items)) != len(items):
        raise InputError(f"a {what} is named twice; name each once")
    return items


def _crossovers(analyses: _Analyses, names: Sequence[str], grid: Sequence[tuple],
                specs: Sequence[GPUSpec], precisions: Sequence[str], rank_by: str,
                narrow: bool) -> Iterator[Crossover]:
    """The crossovers along the first axis on every line, in series, precision, GPU order."""
    series_values = list(dict.fromkeys(row[1:] for row in grid))
    for series in series_values:
        xs = [row[0] for row in grid if row[1:] == series]
        fixed = dict(zip(names[1:], series, strict=True))

        def at(x: Value, series: tuple = series) -> dict[str, Value]:
            return dict(zip(names, (x, *series), strict=True))

        for precision in precisions:
            for spec in specs:
                def point(x: Value, spec: GPUSpec = spec, precision: str = precision
                          ) -> SweepPoint:
                    return analyses.point(at(x), spec, precision)

                line = {"gpu": spec.key, "precision": precision, **fixed}
                states = {
                    "bound": lambda x, point=point: point(x).bound,
                    "fit": lambda x, point=point: "fits" if point(x).fits else "does not fit",
                }
                for kind, state in states.items():
                    yield from _changes(kind, line, names[0], xs, state, narrow)
            if len(specs) > 1:
                def ranking(x: Value, precision: str = precision) -> str:
                    ranked = _ranked([analyses.point(at(x), s, precision) for s in specs],
                                     rank_by)
                    return " > ".join(ranked)

                line = {"precision": precision, **fixed}
                yield from _changes("ranking", line, names[0], xs, ranking, narrow)


def _changes(kind: str, line: Mapping[str, Any], axis: str, xs: Sequence[Value],
             state: Callable[[Value], str], narrow: bool) -> Iterator[Crossover]:
    states = [state(x) for x in xs]
    for (a, old), (b, new) in itertools.pairwise(zip(xs, states, strict=True)):
        if old == new:
            continue
        if narrow:
            a, b, new = _narrowed(a, b, old, new, state)
        exact = _integers(a, b) and abs(b - a) == 1
        yield Crossover(kind, line, axis, a, b, old, new, exact)


def _integers(a: Value, b: Value) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b))


def _narrowed(a: Value, b: Value, old: str, new: str, state: Callable[[Value], str]
              ) -> tuple[Value, Value, str]:
    """Bisection between integers ``a`` (in state ``old``) and ``b`` (in ``new``) to the first
    value past ``a`` whose state differs: where the state changes once between them, there."""
    for _ in range(NARROWING_STEPS):
        if not _integers(a, b) or abs(b - a) <= 1:
            break
        middle = (a + b) // 2
        found = state(middle)
        if found == old:
            a = middle
        else:
            b, new = middle, found
    return a, b, new


# --- Front ends --------------------------------------------------------------------------------


def sweep_model(
    model: nn.Module | Callable[..., nn.Module],
    inputs_at: Callable[..., Any],
    axes: Mapping[str, Sequence[Value]],
    gpus: Sequence[str | GPUSpec] = ("h100-sxm",),
    precisions: Sequence[str] = ("fp32",),
    *,
    rank_by: str = "sol",
    narrow: bool = True,
    name: str | None = None,
    **options: Any,
) -> Sweep:
    """``model(*inputs_at(value))`` swept over ``axes`` (``{"batch": [1, 2, 4]}``):
    ``inputs_at`` takes each axis's value, in the axes' order, and returns the inputs; ``model``
    is a module, or a function of the same values that builds one (a width that sizes its
    layers). ``options``: :func:`~torchroofline.api.analyze`'s keywords (``cache``, ``mode``,
    ``data`` ...)."""
    build = (lambda *_values: model) if isinstance(model, nn.Module) else model
    title = name or (type(model).__name__ if isinstance(model, nn.Module)
                     else getattr(model, "__name__", "model"))

    def analyze_at(values: Values, gpu: GPUSpec, precision: str) -> Result:
        return analyze(build(*values.values()), inputs_at(*values.values()), gpu, precision,
                       name=title, **options)

    return run_sweep(title, analyze_at, axes, gpus, precisions, rank_by=rank_by, narrow=narrow)


def sweep_kernelbench(
    path: str | Path,
    axes: Mapping[str, Sequence[Value]],
    gpus: Sequence[str | GPUSpec] = ("h100-sxm",),
    precisions: Sequence[str] = ("fp32",),
    *,
    rank_by: str = "sol",
    narrow: bool = True,
    class_name: str = "Model",
    **options: Any,
) -> Sweep:
    """A KernelBench problem file swept over its module globals (``{"batch_size": [1, 2]}``):
    at each value the file runs again with each named global set to it right after each of its
    top-level assignments (globals computed from it follow), and is analysed as
    :func:`~torchroofline.suites.kernelbench.analyze_file` would (``options``: its keywords,
    ``cache``, ``math``, ``data`` ...)."""
    path = Path(path)
    load_problem(path, class_name=class_name)  # a missing or broken file fails first, as itself
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    _check_globals(path, tree, axes)

    def analyze_at(values: Values, gpu: GPUSpec, precision: str) -> Result:
        with restoring_switches():  # the TF32 switches the file sets hold for its analysis only
            problem = load_problem(path, class_name=class_name, source=_with_globals(tree, values))
            model, inputs, notes = build_problem(problem)
            built = BuiltProblem(problem, model, inputs, tuple(notes))
            return analyze_file(path, gpu, precision, built=built, class_name=class_name,
                                **options)

    return run_sweep(path.stem, analyze_at, axes, gpus, precisions, rank_by=rank_by,
                     narrow=narrow)


def _assigned(node: ast.stmt) -> list[str]:
    """The names a top-level assignment binds: ``name = …``, ``name: type = …`` and each name
    of ``a, b = …`` (KernelBench's ``batch_size, in_channels = 128, 3``)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [node.target]
    else:
        return []
    return [name.id for target in targets for name in ast.walk(target)
            if isinstance(name, ast.Name)]


def _check_globals(path: Path, tree: ast.Module, axes: Mapping[str, Any]) -> None:
    names = {name for node in tree.body for name in _assigned(node)}
    missing = [name for name in axes if name not in names]
    if missing:
        have = ", ".join(sorted(names)) or "none"
        raise InputError(
            f"{path}: no top-level assignment to {', '.join(missing)} to sweep; its module "
            f"globals: {have}"
        )


def _with_globals(tree: ast.Module, values: Values) -> ast.Module:
    """``tree`` with ``name = value`` right after each top-level statement that assigns a name
    in ``values`` (so what follows, and the functions that read the global, see the value; line
    numbers stay the file's own)."""
    body: list[ast.stmt] = []
    for node in tree.body:
        body.append(node)
        body += [
            ast.copy_location(
                ast.Assign(targets=[ast.Name(name, ast.Store())], value=ast.Constant(values[name])),
                node,
            )
            for name in _assigned(node) if name in values
        ]
    return ast.fix_missing_locations(ast.Module(body=body, type_ignores=tree.type_ignores))


def sweep_solexecbench(
    folder: str | Path,
    axes: Mapping[str, Sequence[Value]] | None = None,
    gpus: Sequence[str | GPUSpec] = ("h100-sxm",),
    precisions: Sequence[str] = ("fp32",),
    *,
    rank_by: str = "sol",
    narrow: bool = True,
    **options: Any,
) -> Sweep:
    """A SOL-ExecBench problem directory swept over its workload axes: with ``axes`` (``{"M":
    [1, 64, 4096]}``, ``var`` axes of the definition), its first workload with those axes set
    to each value; without, every workload of ``workload.jsonl``, along the one or two ``var``
    axes that differ between them (no bisection: the points are the workloads). ``options``:
    :func:`~torchroofline.suites.solexecbench.analyze_workload`'s keywords."""
    from .solexecbench import analyze_workload, load_definition, load_workloads

    with restoring_switches():  # the TF32 switches the reference sets stay its own
        definition = load_definition(folder)
        workloads = load_workloads(folder)
        if not workloads:
            raise InputError(f"{folder}: workload.jsonl holds no workload to sweep")
        variable = [name for name, axis in definition.axes.items() if axis.get("type") == "var"]
        if axes is not None:
            workload_at = _set_workloads(folder, definition.name, workloads[0], variable, axes)
            grid, narrowing = None, narrow
        else:
            axes, by_values = _file_workloads(folder, workloads, variable)
            grid, narrowing = sorted(by_values), False

            def workload_at(values: Values) -> Any:
                return by_values[tuple(values.values())]

        def analyze_at(values: Values, gpu: GPUSpec, precision: str) -> Result:
            return analyze_workload(definition, workload_at(values), gpu, precision, **options)

        return run_sweep(definition.name, analyze_at, axes, gpus, precisions, rank_by=rank_by,
                         narrow=narrowing, grid=grid)


def _set_workloads(folder: str | Path, name: str, first: Any, variable: Sequence[str],
                   axes: Mapping[str, Sequence[Value]]) -> Callable[[Values], Any]:
    """The first workload with the swept axes set to each value."""
    wrong = [axis for axis in axes if axis not in variable]
    if wrong:
        raise InputError(
            f"{folder}: {', '.join(wrong)} is no var axis of {name}; its var axes: "
            f"{', '.join(variable) or 'none'}"
        )

    def workload(values: Values) -> Any:
        label = ",".join(f"{axis}={value}" for axis, value in values.items())
        return dataclasses.replace(first, uuid=f"{first.uuid}@{label}",
                                   axes={**first.axes, **values})

    return workload


def _file_workloads(folder: str | Path, workloads: Sequence[Any], variable: Sequence[str]
                    ) -> tuple[dict[str, list[Value]], dict[tuple, Any]]:
    """The var axes that differ between the workloads, their values, and each workload by its
    values of them (the first of any that repeat them)."""
    differ = [axis for axis in variable
              if len({workload.axes.get(axis) for workload in workloads}) > 1]
    if not differ:
        raise InputError(
            f"{folder}: its {len(workloads)} workload(s) share every var axis value; sweep one "
            f"with --set AXIS=V1,V2,... (its var axes: {', '.join(variable) or 'none'})"
        )
    if len(differ) > 2:
        raise InputError(
            f"{folder}: its workloads differ in {len(differ)} var axes ({', '.join(differ)}); "
            "sweep one or two with --set AXIS=V1,V2,..."
        )
    axes = {axis: sorted({workload.axes[axis] for workload in workloads}) for axis in differ}
    found: dict[tuple, Any] = {}
    for workload in workloads:
        found.setdefault(tuple(workload.axes[axis] for axis in differ), workload)
    return axes, found


__all__ = [
    "RANK_TIMES", "Crossover", "Sweep", "SweepPoint", "point_of", "run_sweep",
    "sweep_kernelbench", "sweep_model", "sweep_solexecbench",
]
