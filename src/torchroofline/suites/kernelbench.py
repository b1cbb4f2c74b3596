"""KernelBench problem files, reference/generated timings and the comparison of both with SoL.

A problem is a Python file defining ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``; a generated solution defines ``ModelNew`` with the same interface. Problem
files are Python code and are **executed**, as KernelBench itself does.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, disable_fake_tensor_cache

from ..api import analyze
from ..errors import (
    DataDependentError,
    InputError,
    ProblemFileError,
    TorchrooflineError,
    user_line,
)
from ..plan.given import (
    DATA_LIMIT_BYTES,
    _real,
    _tensor_leaves,
    check_data,
    drawn_dense,
    input_bytes,
    needs_real_model,
)
from ..price.hardware import GPUSpec
from ..price.precision import restoring_switches
from ..price.roofline import Actual, Result
from ..price.verdicts import verdict_fields
from ..trace._cuda_bindings import HostMoves
from ..trace.inputs import _module_tensors
from ..trace.modes import one_thread
from ..trace.seeded import TENSOR_SHARE_OF_LIMIT, ShapeOnlyDraws, ShapeOnlyError
from ..trace.shadow import ConstantShadow
from ..units import human_bytes
from .runs import (
    COMPILED_BACKENDS,
    EVAL_RESULTS,
    Run,
    kernel_backend,
    parse_kernel_name,
    problem_number,
    read_json_object,
)

if TYPE_CHECKING:
    import ast

_LEVEL_DIR = re.compile(r"^level(\d+)$")


@dataclass(frozen=True)
class Problem:
    """One loaded problem file."""

    name: str  #: file stem, e.g. ``"1_Square_matrix_multiplication_"``
    level: int | None  #: from a ``levelN`` parent folder
    path: Path
    model_class: type[nn.Module]
    get_inputs: Callable[[], Sequence[Any]]
    get_init_inputs: Callable[[], Sequence[Any]]


def level_of(path: Path) -> int | None:
    """The N of the nearest ``levelN`` folder above ``path``, else ``None``."""
    for parent in path.parents:
        match = _LEVEL_DIR.match(parent.name)
        if match:
            return int(match.group(1))
    return None


def load_problem(path: str | Path, *, class_name: str = "Model",
                 source: str | ast.Module | None = None) -> Problem:
    """Execute a problem file in its own namespace and pick out its parts (``source``: code run
    in place of the file's own, e.g. a sweep's file with a global resized).

    Raises :class:`ProblemFileError` for a missing file, a syntax error, an exception at import,
    or a file without ``class_name`` / ``get_inputs``.
    """
    path = Path(path)
    if path.is_dir():  # it said "no such problem file" of a folder that is there
        raise ProblemFileError(f"{path}: a folder, not a problem file; pass one of its .py "
                               f"files ('torchroofline kernelbench {path}' analyzes them all)")
    if not path.is_file():
        raise ProblemFileError(f"{path}: no such problem file")
    _refuse_compiled_kernel(path)
    module_name = f"_torchroofline_problem_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ProblemFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        with hub_offline():
            if source is None:
                spec.loader.exec_module(module)
            else:
                exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102
    except SyntaxError as error:
        raise syntax_failed(path, error) from error
    except (Exception, SystemExit) as error:  # noqa: BLE001 — the file's own code failed
        _raise_if_network(path, error)
        raise code_failed(path, "importing the file", error) from error
    model_class = getattr(module, class_name, None)
    if not (isinstance(model_class, type) and issubclass(model_class, nn.Module)):
        raise ProblemFileError(
            f"{path}: defines no nn.Module class '{class_name}'; a KernelBench problem needs "
            f"'class {class_name}(nn.Module)', get_inputs() and get_init_inputs()"
        )
    get_inputs = getattr(module, "get_inputs", None)
    if not callable(get_inputs):
        raise ProblemFileError(f"{path}: defines no get_inputs(); add one returning the inputs")
    get_init_inputs = getattr(module, "get_init_inputs", None) or (lambda: [])
    return Problem(
        name=path.stem,
        level=level_of(path),
        path=path,
        model_class=model_class,
        get_inputs=get_inputs,
        get_init_inputs=get_init_inputs,
    )


def _refuse_compiled_kernel(path: Path) -> None:
    backend = kernel_backend(path.read_text(errors="replace"))
    if backend in COMPILED_BACKENDS:
        raise ProblemFileError(
            f"{path}: a generated {backend} kernel, never imported (it would compile or launch "
            "GPU code); analyze it as its reference problem: drop --class, or pass --ref REF.py"
        )


#: Modules KernelBench's problem files import beyond torch, and what installs them (the
#: ``kernelbench`` extra of pyproject.toml).
EXTRA_MODULES = {"einops": "'torchroofline[kernelbench]'"}


def syntax_failed(path: str | Path, error: SyntaxError) -> ProblemFileError:
    """The one line for a file Python cannot compile: its line where Python names one (a null
    byte has none: it read "binary.py:None: ...")."""
    where = f"{path}:{error.lineno}" if error.lineno else str(path)
    return ProblemFileError(f"{where}: syntax error: {error.msg}; fix the file")


def code_failed(path: str | Path, doing: str, error: BaseException) -> ProblemFileError:
    """The one line for a problem file whose own code failed while ``doing``: a missing module
    with what installs it, ``sys.exit()`` (whose code would pass for torchroofline's own exit
    code), else the error and the file's line it came from."""
    if isinstance(error, SystemExit):
        what = (
            f"called sys.exit({error.code}), which a problem file must not do; put that call "
            "under if __name__ == '__main__'"
        )
    elif isinstance(error, ModuleNotFoundError) and error.name:
        top = error.name.split(".")[0]
        fix = f"pip install {EXTRA_MODULES[top]}" if top in EXTRA_MODULES else "install it"
        what = f"needs the module '{top}', which is not installed; {fix}"
    else:
        line = user_line(error)
        where = f" at {line if line.raised_here else line.quoted}" if line else ""
        what = f"raised {type(error).__name__}{where}: {_first_line(error)}"
    return ProblemFileError(f"{path}: {doing} {what}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


# --- Problems that reach for the network ----------------------------------------------------

#: Set while a problem file is imported and built, unless the user set ``HF_HUB_OFFLINE``
#: (either value): a problem that asks the Hugging Face hub for a model (KernelBench level 4's
#: ``from_pretrained``) then reads the local cache and fails at once, instead of retrying the
#: network for 20-odd seconds when there is none. ``TRANSFORMERS_OFFLINE`` is what transformers
#: releases before huggingface_hub's variable read.
OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

#: Exceptions (by class name, so neither huggingface_hub nor transformers need be installed)
#: that mean the file wanted the hub: a file not in the local cache, offline mode refusing a call.
_HUB_ERRORS = frozenset({"LocalEntryNotFoundError", "OfflineModeIsEnabled"})


@contextmanager
def hub_offline() -> Iterator[None]:
    """:data:`OFFLINE_ENVIRONMENT` for the duration, unless the user chose ``HF_HUB_OFFLINE``."""
    if "HF_HUB_OFFLINE" in os.environ:
        yield
        return
    added = {name: value for name, value in OFFLINE_ENVIRONMENT.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _raise_if_network(path: Path, error: BaseException) -> None:
    """Turn an error that means "this file needs the network" into one line saying what it
    needs; other errors pass through untouched."""
    import socket
    import urllib.error

    for cause in _causes(error):
        text = _first_line(cause)
        if type(cause).__name__ in _HUB_ERRORS or (
            isinstance(cause, OSError) and "huggingface.co" in str(cause)
        ):
            offline = os.environ.get("HF_HUB_OFFLINE", OFFLINE_ENVIRONMENT["HF_HUB_OFFLINE"])
            fix = (
                "run it where huggingface.co is reachable, or cache its config there first and "
                "unset HF_HUB_OFFLINE"
                if offline.strip().lower() in ("0", "false", "no", "off", "")
                else "run the file once with network access to cache its config, or set "
                "HF_HUB_OFFLINE=0 to let it use the network"
            )
            raise ProblemFileError(
                f"{path}: needs a file from the Hugging Face hub that is not in the local cache "
                f"(HF_HUB_OFFLINE={offline}; {type(cause).__name__}: {text}); {fix}"
            ) from error
        if isinstance(cause, (ConnectionError, socket.gaierror, urllib.error.URLError)):
            raise ProblemFileError(
                f"{path}: needs network access ({type(cause).__name__}: {text}); run it where "
                "the network is reachable, or make the file read local data"
            ) from error


def build_problem(problem: Problem) -> tuple[nn.Module, tuple, list[str]]:
    """Construct the model and its inputs under fake tensors (nothing is allocated, so a
    ``torch.randn(huge)`` parameter or a 6 GB input costs nothing). A constructor that needs real
    data is built for real instead, with a note."""
    notes: list[str] = []
    try:
        # the shadow keeps the values of small constants (a causal mask) the model builds;
        # FakeTensorMode's cache is off: building makes tensors of shapes that seldom repeat,
        # and on a miss the cache's key and entry cost as much as the op itself
        # (its real ops are the shadow's small constants: :func:`one_thread`)
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with (hub_offline(), one_thread(), mode, disable_fake_tensor_cache(mode),
              ConstantShadow(), HostMoves(), warnings.catch_warnings()):
            # as in the trace: torch's warnings on fake tensors ("Initializing zero-element
            # tensors is a no-op") are not the user's, and named HostMoves' line as their own
            warnings.simplefilter("ignore")
            return _construct(problem) + (notes,)
    except TorchrooflineError:
        raise
    except (Exception, SystemExit) as fake_error:  # noqa: BLE001 — retried with real tensors
        _raise_if_network(problem.path, fake_error)
        notes.append(
            f"built with real tensors: construction under fake tensors raised "
            f"{type(fake_error).__name__}: {_first_line(fake_error)}"
        )
    try:
        with hub_offline(), HostMoves():
            return _construct(problem) + (notes,)
    except (Exception, SystemExit) as error:  # noqa: BLE001 — the problem's own code failed
        _raise_if_network(problem.path, error)
        raise code_failed(problem.path, "building the model or inputs", error) from error


@dataclass(frozen=True)
class BuiltProblem:
    """A problem file loaded and built (:func:`load_and_build`)."""

    problem: Problem
    model: nn.Module
    inputs: tuple
    notes: tuple[str, ...]  #: how it was built (:func:`build_problem`)


def load_and_build(path: str | Path, *, class_name: str = "Model") -> BuiltProblem:
    """:func:`load_problem` then :func:`build_problem`. The TF32 switches the file sets at
    import stay set: call it under :func:`~torchroofline.precision.restoring_switches`."""
    problem = load_problem(path, class_name=class_name)
    model, inputs, notes = build_problem(problem)
    return BuiltProblem(problem, model, inputs, tuple(notes))


#: The seed KernelBench sets before ``get_inputs()`` and before building the model
#: (``seed_num=42`` in KernelBench's ``src/eval.py``).
KERNELBENCH_SEED = 42


def _under_seed(problem: Problem, make: Callable[[Callable[[], None]], Any], limit_bytes: int,
                fits: bool) -> Any:
    """``make(reseed)`` under KernelBench's seed (``reseed()`` sets it again), its tensors over
    ``limit_bytes``' share made as shapes only (:class:`~torchroofline.seeded.ShapeOnlyDraws`);
    made wholly for real when that cannot be done and they ``fit`` (else
    :class:`ShapeOnlyError`). The caller's generator state is put back."""
    state = torch.random.get_rng_state()
    try:
        with hub_offline(), HostMoves():
            try:
                with ShapeOnlyDraws.within(limit_bytes) as draws:
                    draws.manual_seed(KERNELBENCH_SEED)
                    return make(lambda: draws.manual_seed(KERNELBENCH_SEED))
            except ShapeOnlyError:
                if not fits:
                    raise
                torch.manual_seed(KERNELBENCH_SEED)
                return make(lambda: torch.manual_seed(KERNELBENCH_SEED))
    finally:
        torch.random.set_rng_state(state)


def seeded_inputs(
    problem: Problem, limit_bytes: int = DATA_LIMIT_BYTES, fits: bool = True
) -> tuple:
    """``get_inputs()`` under KernelBench's seed: the values a kernel is timed on, with the
    tensors over ``limit_bytes``' share as meta tensors (shapes whose values stay unknown);
    :class:`ShapeOnlyError` when that cannot be done and the inputs do not ``fit``."""
    try:
        inputs = _under_seed(problem, lambda _reseed: problem.get_inputs(), limit_bytes, fits)
    except ShapeOnlyError:  # ours, not the problem's: the caller decides
        raise
    except Exception as error:  # noqa: BLE001 — the problem's own code failed
        raise ProblemFileError(
            f"{problem.path}: get_inputs() raised {type(error).__name__} when made for real: "
            f"{_first_line(error)}; pass --data any"
        ) from error
    return (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)


def _structured_inputs(
    problem: Problem, zeros_only: bool, made: Callable[[], tuple]
) -> tuple | None:
    """``made()`` (:func:`seeded_inputs`, made once); None when only their zeros are read and
    they are plain normal draws, which have none (nothing a "given" bound could read)."""
    if zeros_only and drawn_dense(problem.get_inputs):
        return None
    return made()


def _seeded_model(problem: Problem, fake: nn.Module, limit_bytes: int) -> nn.Module | None:
    """The model built under KernelBench's seed, its tensors over ``limit_bytes``' share as
    shapes only (None when its constructor fails for real)."""
    def construct(reseed: Callable[[], None]) -> nn.Module:
        init_inputs = problem.get_init_inputs()
        reseed()
        return problem.model_class(*init_inputs)

    fits = input_bytes(list(fake.parameters()) + list(fake.buffers())) <= limit_bytes
    try:
        return _under_seed(problem, construct, limit_bytes, fits)
    except Exception:  # noqa: BLE001 — the bound then stays the one for the fake model
        return None


def _shape_only_note(what: str, tensors: Iterable[tuple[str, torch.Tensor]],
                     limit_bytes: int) -> list[str]:
    """A note naming the tensors made as shapes only, whose values the bound cannot read."""
    shapes = [(name, t) for name, t in tensors if t.is_meta]
    if not shapes:
        return []
    size = input_bytes([t for _, t in shapes])
    names = ", ".join(name for name, _ in shapes[:4]) + (" …" if len(shapes) > 4 else "")
    return [
        f"{what} {names} ({human_bytes(size)}) made as shapes only, over the data limit "
        f"(--data-limit {human_bytes(limit_bytes)}, a tensor at most a "
        f"{TENSOR_SHARE_OF_LIMIT}th of it): the bound holds for any values of them"
    ]


def _given_inputs(
    problem: Problem, inputs: tuple, data: str | None, made: Callable[[], tuple],
) -> Callable[[bool], tuple | None] | None:
    """What makes the given input values (None: the bound is for any values, or the inputs
    are real already). ``made`` makes them under the seed (once)."""
    check_data(data)
    if data == "any" or not any(isinstance(t, FakeTensor) for t in _tensor_leaves(inputs)):
        return None
    return lambda zeros_only: _structured_inputs(problem, zeros_only, made)


def _made_inputs(
    problem: Problem, inputs: tuple, limit_bytes: int, notes: list[str]
) -> tuple:
    """The seeded inputs (:func:`seeded_inputs`); the fake ``inputs`` themselves, with a note,
    when they can be made neither with shape-only big tensors nor wholly within the limit."""
    size = input_bytes(inputs)
    try:
        return seeded_inputs(problem, limit_bytes, fits=size <= limit_bytes)
    except ShapeOnlyError as error:
        notes.append(
            f"bound for any input values: get_inputs() {error}, and its tensors take "
            f"{human_bytes(size)}, over the data limit (--data-limit)"
        )
        return inputs


def _construct(problem: Problem) -> tuple[nn.Module, tuple]:
    init_inputs = problem.get_init_inputs()
    if not isinstance(init_inputs, (list, tuple)):  # it read "_torchroofline_problem_28…
        # .Model() argument after * must be an iterable, not int"
        raise ProblemFileError(f"{problem.path}: get_init_inputs() returned "
                               f"{type(init_inputs).__name__}; return a list")
    model = problem.model_class(*init_inputs)
    inputs = problem.get_inputs()
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (list, tuple)):
        raise ProblemFileError(
            f"{problem.path}: get_inputs() returned {type(inputs).__name__}; return a list"
        )
    return model, tuple(inputs)


def analyze_file(
    path: str | Path,
    gpu: str | GPUSpec = "h100-sxm",
    precision: str = "fp32",
    *,
    actual_ms: float | None = None,
    cache: str = "cold",
    class_name: str = "Model",
    math: str = "program",
    data: str | None = None,
    data_limit_bytes: int = DATA_LIMIT_BYTES,
    training: Mapping[str, Any] | None = None,
    built: BuiltProblem | None = None,
) -> Result:
    """Load, build (on fake tensors) and analyze one KernelBench problem file (``built``: the
    file already loaded and built, under the caller's :func:`restoring_switches`).
    ``training``: :func:`~torchroofline.api.analyze`'s training-step keywords (``mode``,
    ``optimizer``, ...), e.g. ``{"mode": "train"}``. TF32 switches the
    file sets at import count for its own analysis and are put back afterwards. ``math``: the
    math rung the speed of light assumes (:func:`~torchroofline.api.analyze`). ``data``: the
    bound for "any" input values or the "given" ones, ``get_inputs()`` under KernelBench's seed
    (:func:`seeded_inputs`), its tensors over a quarter of ``data_limit_bytes`` (or past it in
    all) made as shapes only; default "given"."""
    with restoring_switches():
        built = built or load_and_build(path, class_name=class_name)
        problem, model, inputs, notes = built.problem, built.model, built.inputs, [*built.notes]
        data_notes: list[str] = []
        # made at most once: the rebuilt model below reads the same values
        made = functools.cache(
            lambda: _made_inputs(problem, inputs, data_limit_bytes, data_notes)
        )
        input_values = _given_inputs(problem, inputs, data, made)
        try:
            result: Result | None = analyze(
                model, inputs, gpu, precision, cache=cache, actual_ms=actual_ms,
                name=problem.name, math=math, data="any" if data == "any" else None,
                input_values=input_values, **(training or {}),
            )
        except DataDependentError as error:
            # the fake model, too big for real data, reads a value on the host (.item() in a
            # loop over the experts hit): the real model's routing may answer it
            if input_values is None:
                raise
            result, failure = None, error
        if input_values is not None and (result is None or needs_real_model(result.trace)):
            real = _seeded_model(problem, model, data_limit_bytes)
            if real is None and result is None:
                raise failure
            if real is not None:
                result = analyze(
                    real, made(), gpu, precision, cache=cache, actual_ms=actual_ms,
                    name=problem.name, math=math, input_values=lambda _zeros_only: made(),
                    **(training or {}),
                )
                data_notes.append(
                    "built for real under KernelBench's seed: the bound for the given values "
                    "reads parameters (a router's weights) or sizes the data decides"
                )
                data_notes += _shape_only_note(
                    "parameters and buffers", _module_tensors(real).items(), data_limit_bytes
                )
        made_tensors = _tensor_leaves(made()) if made.cache_info().currsize else []
        data_notes += _shape_only_note(
            "inputs", ((f"#{i}", t) for i, t in enumerate(made_tensors)), data_limit_bytes
        )
        if data == "given" and made_tensors and not any(map(_real, made_tensors)):
            raise InputError(
                f"{problem.path}: --data given: no input could be made within the data limit "
                f"({'; '.join(data_notes)}); raise --data-limit or pass --data any"
            )
        notes += data_notes
    return result.with_notes(notes) if notes else result


# --- Generated kernels: analyzed as the reference they claim to compute ---------------------

_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)


def is_generated(path: str | Path) -> bool:
    """A generated kernel rather than a problem (:func:`generated_because`)."""
    return generated_because(path) is not None


def generated_because(path: str | Path) -> str | None:
    """Why ``path`` is a generated kernel rather than a problem: a KernelBench run file name,
    a ``ModelNew`` class, or CUDA / Triton code (told from the text; the file is not imported);
    None where it is a problem."""
    path = Path(path)
    source = path.read_text(errors="replace") if path.is_file() else ""
    if parse_kernel_name(path.name) is not None:
        return "a KernelBench run file name"
    if _MODEL_NEW.search(source):
        return "a ModelNew class"
    backend = kernel_backend(source)
    return f"{backend} code, never run here" if backend in COMPILED_BACKENDS else None


def find_reference(path: str | Path, problems: str | Path | None = None) -> Path:
    """The reference problem of a generated file, by KernelBench naming: a run file
    ``level_1_problem_19_sample_0_kernel.py`` → ``level1/19_*.py``; a file named like its
    problem (``level1/19_ReLU.py`` or ``19_ReLU_*.py``) → the same number in that level. Looked
    for under ``problems`` (a suite or level folder), else in the folders around ``path``
    (``KernelBench/level1`` of any of its parents: a run lives in ``KernelBench/runs/<run>``).

    Raises :class:`ProblemFileError` naming what was searched and the flag to pass."""
    path = Path(path)
    name = parse_kernel_name(path.name)
    number = name.problem_id if name else problem_number(path.name)
    if number is None:
        raise ProblemFileError(
            f"{path}: read as a generated kernel ({generated_because(path)}) whose name says "
            "no problem (neither level_<L>_problem_<P>_sample_<S>_kernel.py nor <P>_<Name>.py); "
            "pass --ref REF.py, the problem it computes"
        )
    level = name.level if name else level_of(path)
    pattern = f"{number}_*.py"
    level_glob = f"level{level}" if level is not None else "level*"
    roots = _with_suite([Path(problems)]) if problems else _roots_near(path)
    for root in roots:
        folders = [root] if _LEVEL_DIR.match(root.name) else sorted(root.glob(level_glob))
        found = sorted(
            file
            for folder in folders
            if level is None or level_of(folder / pattern) == level
            for file in folder.glob(pattern)
            if not is_generated(file)
        )
        if found:
            return found[0]
    searched = ", ".join(str(root) for root in roots) or "nothing"
    flag = "--ref REF.py" if problems else "--problems KernelBench/ or --ref REF.py"
    raise ProblemFileError(
        f"{path}: no reference problem {level_glob}/{pattern} found (searched {searched}); "
        f"pass {flag}"
    )


def reference_for(
    path: str | Path,
    *,
    ref: str | Path | None = None,
    problems: str | Path | None = None,
    class_name: str = "Model",
) -> Path | None:
    """The problem file to analyze in place of ``path``: ``ref`` when given; the reference of a
    generated kernel (:func:`is_generated`, :func:`find_reference`) unless ``class_name`` asks
    for its own class or the file carries its reference (``class Model`` and ``get_inputs`` in
    plain PyTorch); ``None`` when ``path`` is itself the problem."""
    if ref is not None:
        return Path(ref)
    if class_name != "Model" or not is_generated(path) or _carries_reference(Path(path)):
        return None
    return find_reference(path, problems)


_REFERENCE_PARTS = (
    re.compile(r"^class\s+Model\b", re.MULTILINE),
    re.compile(r"^def\s+get_inputs\b", re.MULTILINE),
)


def _carries_reference(path: Path) -> bool:
    source = path.read_text(errors="replace")
    return kernel_backend(source) not in COMPILED_BACKENDS and all(
        part.search(source) for part in _REFERENCE_PARTS
    )


def problems_for_run(folder: Path) -> Path:
    """The level folder a run's samples are problems of: ``levelN`` of its kernel file names,
    found in the folders around the run (:func:`_roots_near`), else ``KernelBench/levelN``."""
    levels = {name.level for file in folder.glob("*.py") if (name := parse_kernel_name(file.name))}
    level = f"level{levels.pop()}" if len(levels) == 1 else "levelN"
    found = [root / level for root in _roots_near(folder) if (root / level).is_dir()]
    return found[0] if found else Path("KernelBench") / level


def _roots_near(path: Path) -> list[Path]:
    """The parents of ``path`` (nearest first, at most 4) and their ``KernelBench`` folders."""
    return _with_suite(list(path.resolve().parents)[:4])


def _with_suite(folders: list[Path]) -> list[Path]:
    """Each folder and its ``KernelBench`` subfolder (the KernelBench repository keeps its
    problems in ``KernelBench/KernelBench/levelN``), those that exist."""
    candidates = [root for folder in folders for root in (folder, folder / "KernelBench")]
    return [root for root in candidates if root.is_dir()]


def run_problems(paths: Sequence[Path], run: Run) -> list[Path]:
    """The problem files among ``paths`` that ``run`` has samples for (same level and number)."""
    wanted = {(sample.level, sample.problem_id) for sample in run.samples}
    return [path for path in paths if (level_of(path), problem_number(path.name)) in wanted]


# --- Timings -------------------------------------------------------------------------------


def load_timings(
    path: str | Path, stat: str = "mean"
) -> dict[tuple[int | None, str], float]:
    """Times (ms) from a KernelBench timing JSON (``{"level1": {"file.py": {"mean": ms}}}``),
    keyed by (level, file name): each entry's ``stat`` ("mean", or "min": the fastest trial). A
    flat ``{"file.py": {"mean": ms}}`` or ``{"file.py": ms}`` gives level ``None``. A ``null``
    entry (a problem that was not timed) is left out."""
    path = Path(path)
    data = read_json_object(path, "timings", "levels or files")
    timings: dict[tuple[int | None, str], float] = {}
    for key, value in data.items():
        match = _LEVEL_DIR.match(key)
        if match and isinstance(value, dict):
            for file, entry in value.items():
                if entry is not None:
                    timings[(int(match.group(1)), file)] = _time_ms(path, file, entry, stat)
        elif value is not None:
            timings[(None, key)] = _time_ms(path, key, value, stat)
    return timings


def _time_ms(path: Path, file: str, entry: Any, stat: str) -> float:
    value = entry.get(stat) if isinstance(entry, dict) else entry
    # NaN passed a "<= 0" test and inf (1e400 in JSON) read as "0.0%" of SoL, or stopped
    # validate with a traceback (math domain error)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InputError(f"{path}: '{file}' has no finite positive '{stat}' time in ms, got "
                         f"{value!r}")
    return float(value)


def lookup_time(
    timings: dict[tuple[int | None, str], float], level: int | None, file: str
) -> float | None:
    """The time for ``file`` at ``level``, else a level-less entry for the file."""
    return timings.get((level, file), timings.get((None, file)))


# --- Reference vs generated vs speed of light ------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """A reference and/or a generated kernel's time set against the speed of light."""

    problem: str
    sol_ms: float
    ref: Actual | None  #: the reference's measured time against SoL
    gen: Actual | None  #: the generated kernel's

    @property
    def speedup(self) -> float | None:
        """ref / gen, KernelBench's score."""
        return self.ref.ms / self.gen.ms if self.ref and self.gen else None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"problem": self.problem, "sol_ms": self.sol_ms}
        for label, actual in (("ref", self.ref), ("gen", self.gen)):
            judged = actual.verdict if actual else None
            data[f"{label}_ms"] = actual.ms if actual else None
            data[f"{label}_sol_fraction"] = actual.sol_fraction if actual else None
            data[f"{label}_headroom"] = actual.headroom if actual else None
            data[f"{label}_possible_with"] = actual.possible_with if actual else None
            data[f"{label}_impossible"] = bool(judged and judged.impossible)
            data[f"{label}_shortcut"] = judged.shortcut if judged else None
            data.update(verdict_fields(judged, f"{label}_"))
        data["speedup"] = self.speedup
        return data

    def format(self) -> str:
        """The bound, then each time with its % of SoL and the verdict as the text report
        prints it (:attr:`~torchroofline.price.verdicts.Verdict.sentence`)."""
        lines = [f"{self.problem}: speed of light {self.sol_ms:.4g} ms"]
        for label, actual in (("reference", self.ref), ("generated", self.gen)):
            if actual is None:
                continue
            judged = actual.verdict
            lines.append(
                f"  {label:<9} {actual.ms:.4g} ms  {judged.percent_of_sol}  {judged.sentence}"
            )
        if self.speedup is not None:
            lines.append(f"  speedup   {self.speedup:.2f}x (reference / generated)")
        return "\n".join(lines)

    def print(self) -> None:
        print(self.format())


def compare_kernelbench(
    result: Result, ref_ms: float | None = None, gen_ms: float | None = None
) -> Comparison:
    """Speedup, % of SoL reached by the reference and the generated kernel, headroom left."""
    return Comparison(
        result.model_name,
        result.sol_ms,
        result.with_actual(ref_ms).actual,
        result.with_actual(gen_ms).actual,
    )


# --- Finding problems ----------------------------------------------------------------------


def discover(paths: Iterable[str | Path], levels: set[int] | None = None) -> list[Path]:
    """Problem files under ``paths`` (a suite folder, a level folder or files), sorted by level
    then by the number KernelBench puts before the name; ``levels`` keeps only those levels."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if (path / EVAL_RESULTS).is_file():
            raise InputError(
                f"{path} is a KernelBench run folder, not problems: pass it as --run {path}, "
                "after the problems' level folder (KernelBench/levelN)"
            )
        if path.is_dir():
            found += [p for p in path.rglob("*.py") if not p.name.startswith("_")]
        elif path.exists():
            found.append(path)
        else:
            raise InputError(f"{path}: no such file or folder; check the path")
    unique = list(dict.fromkeys(found))
    if levels is not None:
        unique = [p for p in unique if level_of(p) in levels]
    return sorted(unique, key=_problem_order)


def _problem_order(path: Path) -> tuple:
    number = re.match(r"^(\d+)", path.name)
    return (level_of(path) or 0, str(path.parent), int(number.group(1)) if number else 0, path.name)


def run_name(path: Path) -> str:
    """``level1/1_Square_matrix_multiplication_.py`` style label for progress and reports."""
    level = level_of(path)
    return f"level{level}/{path.name}" if level is not None else path.name


__all__ = [
    "Comparison",
    "Problem",
    "analyze_file",
    "build_problem",
    "compare_kernelbench",
    "discover",
    "load_problem",
    "load_timings",
]
