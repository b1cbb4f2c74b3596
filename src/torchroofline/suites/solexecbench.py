"""SOL-ExecBench problem directories: ``definition.json``, ``workload.jsonl`` and ``reference.py``.

The format is FlashInfer-Bench's (its "FlashInfer Trace" schema), which NVIDIA's SOL-ExecBench
adopts (``docs/definition.md`` and ``docs/workload.md`` in github.com/NVIDIA/SOL-ExecBench):

- ``definition.json`` names the axes (``const`` with a value, ``var`` set by each workload,
  ``expr`` computed from others), the inputs and outputs (a shape of axis names, ``null`` for a
  Python scalar, and a dtype), the reference code (a ``run`` function taking the inputs in
  order) and, optionally, ``custom_inputs_entrypoint``: a function of the reference,
  ``entrypoint(axes_and_scalars, device) -> {name: tensor}``, that makes inputs which must be
  real (routing indices, page tables).
- ``workload.jsonl`` has one workload a line: ``uuid``, the ``var`` axes, and where each input
  comes from: ``random``, ``scalar`` (``value``), ``safetensors`` (``path``, ``tensor_key``) or
  ``custom``. A line may also be a FlashInfer trace record, the workload under ``"workload"``.

Each workload is one analysis of ``run`` on its inputs. The reference is Python code and is
**executed**, as the benchmark itself does. Random and custom inputs are drawn on the CPU under a
fixed seed, with the tensors past the data limit made as shapes only, as for KernelBench
(:class:`~torchroofline.trace.seeded.ShapeOnlyDraws`), so the bound reads the values that decide
the work (the experts tokens are routed to) and holds for any values of the rest.
"""

from __future__ import annotations

import ast
import json
import operator
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.nn as nn

from ..api import analyze
from ..errors import InputError, ProblemFileError, TorchrooflineError
from ..plan.given import DATA_LIMIT_BYTES, _real, _tensor_leaves
from ..price.hardware import GPUSpec
from ..price.precision import restoring_switches
from ..price.roofline import Result
from ..trace.seeded import TENSOR_SHARE_OF_LIMIT, ShapeOnlyDraws, ShapeOnlyError
from .kernelbench import _first_line, discover, syntax_failed
from .runs import sol_score

DEFINITION = "definition.json"
WORKLOADS = "workload.jsonl"
REFERENCE = "reference.py"

#: The seed random and custom inputs are drawn under (the benchmark leaves its own unset, so
#: any fixed one reproduces a workload's shapes; only custom generators' structure matters).
SEED = 0

#: The format's dtype names (SOL-ExecBench ``data/dtypes.py``): ``float4_e2m1`` is stored
#: packed two to a byte, as ``float4_e2m1fn_x2``.
DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "float4_e2m1": torch.float4_e2m1fn_x2,
    "float4_e2m1fn_x2": torch.float4_e2m1fn_x2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "bool": torch.bool,
}

#: safetensors' dtype names (the header's ``dtype``) for the dtypes above.
_SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I64": torch.int64,
    "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "BOOL": torch.bool,
    "U8": torch.uint8,
}


@dataclass(frozen=True)
class TensorSpec:
    """One input of a definition: a shape of axis names (None: a Python scalar) and a dtype."""

    name: str
    shape: tuple[str, ...] | None
    dtype: str

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class Workload:
    """One line of ``workload.jsonl``: the ``var`` axes and each input's source."""

    uuid: str
    axes: Mapping[str, int]
    inputs: Mapping[str, Mapping[str, Any]]  #: name → descriptor (``{"type": "random"}``, ...)


@dataclass(frozen=True)
class Definition:
    """A loaded problem directory's ``definition.json`` and its reference code."""

    name: str
    path: Path  #: the problem directory
    axes: Mapping[str, Mapping[str, Any]]
    inputs: tuple[TensorSpec, ...]
    run: Callable[..., Any]
    make_inputs: Callable[..., Any] | None  #: the ``custom_inputs_entrypoint``, if any


def is_problem_dir(path: str | Path) -> bool:
    """A SOL-ExecBench problem directory: a folder holding ``definition.json``."""
    return (Path(path) / DEFINITION).is_file()


def _read_json(path: Path, text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ProblemFileError(
            f"{where}: not valid JSON ({error.msg} at line {error.lineno}); fix the file"
        ) from error


def load_definition(folder: str | Path) -> Definition:
    """The definition of a problem directory with its reference executed (``reference.py``,
    else the definition's ``reference`` text). Raises :class:`ProblemFileError` for a missing
    or malformed file, a reference that fails to import or lacks ``run`` or the entrypoint."""
    folder = Path(folder)
    path = folder / DEFINITION
    if not path.is_file():
        raise ProblemFileError(f"{folder}: no {DEFINITION}; a SOL-ExecBench problem directory "
                               f"holds {DEFINITION}, {WORKLOADS} and {REFERENCE}")
    data = _read_json(path, path.read_text(), str(path))
    try:
        inputs = tuple(
            TensorSpec(name, None if spec["shape"] is None else tuple(spec["shape"]),
                       spec["dtype"])
            for name, spec in data["inputs"].items()
        )
        axes, name = data["axes"], data["name"]
    except (KeyError, TypeError, AttributeError) as error:
        raise ProblemFileError(
            f"{path}: not a definition (needs name, axes, inputs with shape and dtype: "
            f"{type(error).__name__} {error})"
        ) from error
    unknown = sorted({spec.dtype for spec in inputs} - DTYPES.keys())
    if unknown:
        raise ProblemFileError(
            f"{path}: unknown dtype {', '.join(unknown)}; the format's dtypes are "
            f"{', '.join(DTYPES)}"
        )
    for spec in inputs:
        unknown = [a for a in spec.shape or () if not str(a).isdigit() and a not in axes]
        if unknown:
            raise ProblemFileError(f"{path}: input '{spec.name}' names the axis {unknown[0]}, "
                                   "which the definition does not define; add it to the axes")
    module = _reference_module(folder, data.get("reference"))
    run = getattr(module, "run", None)
    if not callable(run):
        raise ProblemFileError(f"{folder}: the reference defines no run(); add "
                               f"def run({', '.join(s.name for s in inputs)})")
    entry = data.get("custom_inputs_entrypoint")
    make_inputs = getattr(module, entry, None) if entry else None
    if entry and not callable(make_inputs):
        raise ProblemFileError(
            f"{path}: custom_inputs_entrypoint '{entry}' is not a function of the reference; "
            "define it there or fix the name"
        )
    return Definition(name, folder, axes, inputs, run, make_inputs)


def _reference_module(folder: Path, text: str | None) -> ModuleType:
    """``reference.py`` executed as a module (else the definition's ``reference`` text)."""
    path = folder / REFERENCE
    if not path.is_file() and not text:
        raise ProblemFileError(f"{folder}: no {REFERENCE} and no 'reference' in {DEFINITION}")
    source = path.read_text() if path.is_file() else text
    module = ModuleType(f"_torchroofline_solexecbench_{abs(hash(str(folder.resolve())))}")
    module.__file__ = str(path)
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 — the format runs it
    except SyntaxError as error:
        raise syntax_failed(path, error) from error
    except Exception as error:  # noqa: BLE001 — the reference's own code failed
        raise ProblemFileError(
            f"{path}: importing the reference raised {type(error).__name__}: "
            f"{_first_line(error)}"
        ) from error
    return module


def load_workloads(folder: str | Path) -> list[Workload]:
    """The workloads of ``workload.jsonl``, in file order (bare workloads or trace records)."""
    path = Path(folder) / WORKLOADS
    if not path.is_file():
        raise ProblemFileError(f"{folder}: no {WORKLOADS}; add one workload per line")
    workloads = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        data = _read_json(path, line, f"{path}:{number}")
        data = data.get("workload", data) if isinstance(data, dict) else data
        try:
            workloads.append(Workload(str(data["uuid"]), dict(data["axes"]),
                                      dict(data["inputs"])))
        except (KeyError, TypeError) as error:
            raise ProblemFileError(
                f"{path}:{number}: not a workload (needs uuid, axes and inputs)"
            ) from error
    if not workloads:
        raise ProblemFileError(f"{path}: no workloads; add one workload per line")
    return workloads


# --- Axes -----------------------------------------------------------------------------------

#: The operators an ``expr`` axis may use (the format: + - * / // % ** and unary + -).
_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST, values: Mapping[str, int]) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left, values),
                                         _evaluate(node.right, values))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand, values))
    raise ValueError(f"unsupported {type(node).__name__}")


def resolve_axes(definition: Definition, workload: Workload) -> dict[str, int]:
    """Every axis's value: ``const`` ones, the workload's ``var`` ones, ``expr`` ones from
    those (in any order: an expression may name another expression)."""
    where = f"{definition.path}: workload {workload.uuid}"
    values: dict[str, int] = {}
    expressions: dict[str, str] = {}
    for name, axis in definition.axes.items():
        kind = axis.get("type")
        if kind == "const":
            values[name] = int(axis["value"])
        elif kind == "var":
            if name not in workload.axes:
                raise ProblemFileError(f"{where} gives no value for the var axis '{name}'; "
                                       "add it to the workload's axes")
            values[name] = int(workload.axes[name])
        elif kind == "expr":
            expressions[name] = axis["expression"]
        else:
            raise ProblemFileError(f"{definition.path}: axis '{name}' has type {kind!r}; "
                                   "the format's types are const, var and expr")
    while expressions:
        ready = {name: text for name, text in expressions.items()
                 if all(n.id in values for n in ast.walk(ast.parse(text, mode="eval"))
                        if isinstance(n, ast.Name))}
        if not ready:
            raise ProblemFileError(f"{definition.path}: the expr axes {', '.join(expressions)} "
                                   "name unknown axes or each other in a circle")
        for name, text in ready.items():
            try:
                values[name] = int(_evaluate(ast.parse(text, mode="eval"), values))
            except (ValueError, ZeroDivisionError) as error:
                raise ProblemFileError(f"{definition.path}: expr axis '{name}' = {text}: "
                                       f"{error}") from error
            del expressions[name]
    return values


def _shape(spec: TensorSpec, axes: Mapping[str, int]) -> tuple[int, ...]:
    """The sizes of ``spec``'s shape: axis names, or literal sizes (``"128"``)."""
    return tuple(int(a) if str(a).isdigit() else axes[a] for a in spec.shape or ())


# --- Inputs ---------------------------------------------------------------------------------

#: The ranges of random integers (SOL-ExecBench ``bench/utils.py`` ``_rand_tensor``).
_INT_RANGES = {torch.int8: (-128, 128), torch.int16: (-1024, 1024),
               torch.int32: (-1024, 1024), torch.int64: (-1024, 1024)}


def _random_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A random input as the benchmark draws it: normal floats (fp8 clamped to [-2, 2]),
    packed fp4 as random bytes (the last dimension halved), fair booleans, bounded integers."""
    if dtype == torch.float4_e2m1fn_x2:
        packed = (*shape[:-1], shape[-1] // 2) if shape else shape
        return torch.randint(0, 256, packed, dtype=torch.uint8).view(dtype)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return torch.randn(shape).clamp_(-2.0, 2.0).to(dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, dtype=torch.bool)
    low, high = _INT_RANGES[dtype]
    return torch.randint(low, high, shape, dtype=dtype)


def _drawn(make: Callable[[], Any], limit_bytes: int) -> Any:
    """``make()`` under :data:`SEED`, its tensors past ``limit_bytes``' share made as shapes
    only; made wholly for real where that cannot be done (a generator that reads a big
    tensor's values: ``.item()``, ``.tolist()``). The caller's generator is kept."""
    state = torch.random.get_rng_state()
    try:
        try:
            with ShapeOnlyDraws.within(limit_bytes) as draws:
                draws.manual_seed(SEED)
                return make()
        except (ShapeOnlyError, RuntimeError, NotImplementedError):
            torch.manual_seed(SEED)
            return make()
    finally:
        torch.random.set_rng_state(state)


def make_inputs(
    definition: Definition, workload: Workload, limit_bytes: int = DATA_LIMIT_BYTES
) -> tuple:
    """``run``'s arguments for ``workload``, in the definition's order, in its dtypes."""
    axes = resolve_axes(definition, workload)
    where = f"{definition.path}: workload {workload.uuid}"
    missing = [s.name for s in definition.inputs if s.name not in workload.inputs]
    if missing:
        raise ProblemFileError(f"{where} gives no source for input {', '.join(missing)}; add "
                               "it to the workload's inputs")
    kinds = {spec.name: workload.inputs[spec.name].get("type") for spec in definition.inputs}
    if definition.make_inputs is not None or "custom" in kinds.values():
        return _custom_inputs(definition, workload, axes, limit_bytes)
    return _drawn(lambda: tuple(
        _input(definition, workload, spec, axes, limit_bytes) for spec in definition.inputs
    ), limit_bytes)


def _input(definition: Definition, workload: Workload, spec: TensorSpec,
           axes: Mapping[str, int], limit_bytes: int) -> Any:
    source = workload.inputs[spec.name]
    kind = source.get("type")
    if kind == "scalar":
        return source["value"]
    if kind == "random":
        tensor = _random_tensor(_shape(spec, axes), spec.torch_dtype)
        return tensor.item() if spec.shape is None else tensor
    if kind == "safetensors":
        return _safetensors(definition, workload, spec, axes, limit_bytes)
    raise ProblemFileError(
        f"{definition.path}: workload {workload.uuid} input '{spec.name}' has type {kind!r}; "
        "the format's types are random, scalar, safetensors and custom"
    )


def _custom_inputs(definition: Definition, workload: Workload, axes: dict[str, int],
                   limit_bytes: int) -> tuple:
    """The entrypoint's inputs (it gets every axis and the workload's scalars, and the CPU)."""
    where = f"{definition.path}: workload {workload.uuid}"
    if definition.make_inputs is None:
        raise ProblemFileError(f"{where} has custom inputs and the definition names no "
                               "custom_inputs_entrypoint; add it")
    scalars = {name: source["value"] for name, source in workload.inputs.items()
               if source.get("type") == "scalar"}
    try:
        made = _drawn(lambda: definition.make_inputs({**axes, **scalars}, torch.device("cpu")),
                      limit_bytes)
    except Exception as error:  # noqa: BLE001 — the reference's own code failed
        raise ProblemFileError(f"{where}: the custom input generator raised "
                               f"{type(error).__name__}: {_first_line(error)}") from error
    if not isinstance(made, dict):
        raise ProblemFileError(f"{where}: the custom input generator returned "
                               f"{type(made).__name__}; return a dict of inputs by name")
    inputs = []
    for spec in definition.inputs:
        if spec.name not in made:
            raise ProblemFileError(f"{where}: the custom input generator made no "
                                   f"'{spec.name}'; return every input of the definition")
        value = made[spec.name]
        if spec.shape is not None and tuple(getattr(value, "shape", ())) != _shape(spec, axes):
            raise ProblemFileError(
                f"{where}: the custom input '{spec.name}' has shape "
                f"{list(getattr(value, 'shape', []))}, the definition "
                f"{list(_shape(spec, axes))}; fix the generator or the definition"
            )
        inputs.append(value)
    return tuple(inputs)


def _safetensors(definition: Definition, workload: Workload, spec: TensorSpec,
                 axes: Mapping[str, int], limit_bytes: int) -> torch.Tensor:
    """The tensor ``tensor_key`` of the workload's safetensors file (relative paths from the
    problem directory), checked against the definition's shape and dtype; read for real within
    the data limit's share, else as a shape. Read with no library: an 8-byte little-endian
    header length, a JSON header (``dtype``, ``shape``, ``data_offsets``), then the bytes."""
    source = workload.inputs[spec.name]
    where = f"{definition.path}: workload {workload.uuid} input '{spec.name}'"
    raw = Path(source.get("path", ""))
    path = raw if raw.is_absolute() else definition.path / raw
    if not path.is_file():
        raise ProblemFileError(
            f"{where} reads the safetensors blob {raw}, which is not there ({path}); fetch the "
            "benchmark's blobs into the problem directory, or analyze the other workloads"
        )
    with path.open("rb") as blob:
        (size,) = struct.unpack("<Q", blob.read(8))
        header = json.loads(blob.read(size))
        entry = header.get(source.get("tensor_key"))
        if entry is None:
            raise ProblemFileError(f"{where}: {path} holds no tensor '{source.get('tensor_key')}'")
        dtype, shape = _SAFETENSORS_DTYPES.get(entry["dtype"]), tuple(entry["shape"])
        if dtype != spec.torch_dtype or shape != _shape(spec, axes):
            raise ProblemFileError(
                f"{where}: {path} holds {entry['dtype']} {list(shape)}, the definition "
                f"{spec.dtype} {list(_shape(spec, axes))}; fix the blob or the definition"
            )
        start, end = entry["data_offsets"]
        if end - start > limit_bytes // TENSOR_SHARE_OF_LIMIT:
            return torch.empty(shape, dtype=dtype, device="meta")
        blob.seek(8 + size + start)
        data = bytearray(blob.read(end - start))
    return torch.frombuffer(data, dtype=dtype).reshape(shape) if data else torch.empty(
        shape, dtype=dtype)


# --- Analysis -------------------------------------------------------------------------------


class ReferenceRun(nn.Module):
    """The reference's ``run`` as a model: ``forward(*inputs)`` calls it."""

    def __init__(self, run: Callable[..., Any]) -> None:
        super().__init__()
        self.run = run

    def forward(self, *inputs: Any) -> Any:
        return self.run(*inputs)


def workload_name(definition_name: str, workload: Workload) -> str:
    """``"gemm_n64_k32/uuid"``: the name a workload's result and report rows carry."""
    return f"{definition_name}/{workload.uuid}"


def analyze_workload(
    definition: Definition,
    workload: Workload,
    gpu: str | GPUSpec = "h100-sxm",
    precision: str = "fp32",
    *,
    actual_ms: float | None = None,
    cache: str = "cold",
    math: str = "program",
    data: str | None = None,
    data_limit_bytes: int = DATA_LIMIT_BYTES,
) -> Result:
    """One workload of a loaded definition analysed (:func:`~torchroofline.api.analyze`; the
    TF32 switches its reference set at load hold: call it under
    :func:`~torchroofline.price.precision.restoring_switches`, as :func:`analyze_dir` does).
    ``data``: "any" (the bound for any input values), "given" (for the values drawn: the
    tokens' experts) or None: given where some input tensor is real."""
    inputs = make_inputs(definition, workload, data_limit_bytes)
    real = [t for t in _tensor_leaves(inputs) if _real(t)]
    if data == "given" and not real:
        raise InputError(f"{definition.path}: workload {workload.uuid}: --data given: no input "
                         "could be made within the data limit; raise --data-limit or pass "
                         "--data any")
    given = None if data == "any" or not real else (lambda _zeros_only: inputs)
    result = analyze(
        ReferenceRun(definition.run), inputs, gpu, precision, cache=cache,
        actual_ms=actual_ms, name=workload_name(definition.name, workload), math=math,
        data="any" if data == "any" else None, data_limit_bytes=data_limit_bytes,
        input_values=given,
    )
    shapes = [t for t in _tensor_leaves(inputs) if t.is_meta]
    if shapes:
        return result.with_notes([f"{len(shapes)} input tensor(s) made as shapes only, over "
                                  "the data limit (--data-limit): the bound holds for any "
                                  "values of them"])
    return result


def analyze_dir(folder: str | Path, gpu: str | GPUSpec = "h100-sxm", precision: str = "fp32",
                **options: Any) -> list[Result | TorchrooflineError]:
    """Every workload of a problem directory analysed, in file order: its Result, or the
    error that stopped it (one workload's missing blob leaves the others' results).
    ``options``: :func:`analyze_workload`'s keywords."""
    results: list[Result | TorchrooflineError] = []
    with restoring_switches():  # the TF32 switches the reference sets stay its own
        definition = load_definition(folder)
        for workload in load_workloads(folder):
            try:
                results.append(analyze_workload(definition, workload, gpu, precision, **options))
            except TorchrooflineError as error:
                results.append(error)
    return results


def analyze_uuid(folder: str | Path, uuid: str | None, gpu: str | GPUSpec = "h100-sxm",
                 precision: str = "fp32", **options: Any) -> Result:
    """The workload ``uuid`` of a problem directory analysed (the batch's task: it carries
    the directory and the uuid); ``None``, or a uuid the file lacks, raises the error that
    says why (an unreadable ``workload.jsonl``, no such workload)."""
    with restoring_switches():  # the TF32 switches the reference sets stay its own
        definition, workloads = load_definition(folder), load_workloads(folder)
        for workload in workloads:
            if workload.uuid == uuid:
                return analyze_workload(definition, workload, gpu, precision, **options)
    raise ProblemFileError(f"{folder}: no workload {uuid} in {WORKLOADS}")


def discover_problems(paths: Iterable[str | Path], levels: set[int] | None = None) -> list[Path]:
    """KernelBench problem files (:func:`~torchroofline.suites.kernelbench.discover`) and
    SOL-ExecBench problem directories under ``paths``: a directory is listed as itself, never
    its ``reference.py``. ``levels`` (KernelBench's) leaves the directories out."""
    folders: list[Path] = []
    rest: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if is_problem_dir(path):
            folders.append(path)
            continue
        if path.is_dir():
            folders += sorted({found.parent for found in path.rglob(DEFINITION)})
        rest.append(path)
    files = [file for file in discover(rest, levels)
             if not any(folder in file.parents for folder in folders)] if rest else []
    return ([] if levels else list(dict.fromkeys(folders))) + files


__all__ = [
    "Definition",
    "Workload",
    "analyze_dir",
    "analyze_uuid",
    "analyze_workload",
    "discover_problems",
    "is_problem_dir",
    "load_definition",
    "load_workloads",
    "make_inputs",
    "resolve_axes",
]


def with_sol_score(document: dict[str, Any], result: Result, actual_ms: float | None,
                   baseline_ms: float | None) -> str | None:
    """Adds to ``document`` the SOL-ExecBench score of ``actual_ms`` against ``baseline_ms``
    (``sol_score``: :func:`~torchroofline.suites.runs.sol_score`, None for a time faster than
    light or a baseline not above the speed of light) and returns its line; None without both
    times. The speed of light is the one of the math the time is possible with (the verdict's
    rung, as a KernelBench run's sample is scored: a time below the fp32 bound that TF32 math
    reaches is scored against the TF32 one, not flagged)."""
    if actual_ms is None or baseline_ms is None:
        return None
    rung = result.judge(actual_ms).rung
    sol_ms = result.sol_ms if rung is None else result.sol_by_math_s[rung] * 1e3
    score = sol_score(actual_ms, sol_ms, baseline_ms)
    document["sol_score"] = {"score": score, "actual_ms": actual_ms, "baseline_ms": baseline_ms,
                             "sol_ms": sol_ms}
    times = (f"actual {actual_ms:.4g} ms, baseline {baseline_ms:.4g} ms, speed of light "
             f"{sol_ms:.4g} ms")
    if score is not None:
        return f"SOL score {score:.3f} ({times})"
    return (f"SOL score: none ({times}: a time faster than light is flagged, not scored, and a "
            "baseline at or below the speed of light leaves no scale)")
