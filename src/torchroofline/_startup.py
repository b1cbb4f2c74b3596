"""The command line's start-up: a Ctrl-C while ``torchroofline ...`` or ``python -m
torchroofline ...`` imports torch (seconds, before any command runs) ends it with the line every
interrupt prints and exit 130, not a KeyboardInterrupt traceback from inside torch. Imported
first by the package; a process that merely imports torchroofline keeps its own SIGINT."""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
from typing import NoReturn


def interrupted_while_starting(signum: int, frame: object) -> None:
    """SIGINT before the command runs: nothing has run, nothing is lost."""
    sys.stderr.write("torchroofline: error: interrupted\n")
    os._exit(130)


def started_as_the_command_line() -> bool:
    """Whether this process is ``torchroofline ...`` or ``python -m torchroofline ...``."""
    argv = getattr(sys, "orig_argv", sys.argv)
    package = __name__.partition(".")[0]
    as_module = any(a == "-m" and b == package for a, b in zip(argv, argv[1:], strict=False))
    return as_module or os.path.basename(sys.argv[0]).split(".")[0] == package


if started_as_the_command_line() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, interrupted_while_starting)


# --- The cyclic collector while the command line starts ---------------------------------------
#
# Importing torch and the analysis makes objects that live as long as the process, and the
# collector scans them again and again as they pile up: four full collections and ~500 young
# ones before a command runs, 0.3 to 1 s of CPU by gc.callbacks. The command line starts with
# the collector off; :func:`started` freezes what the start-up made (CPython's permanent
# generation, never scanned again; its analyses' pauses then end the plain way,
# trace.collector) and turns the collector back on. Freezing, then unfreezing into the oldest
# generation was slower: the first full collection after it scans everything.

if started_as_the_command_line() and gc.isenabled():
    gc.disable()
    _collector_held = True
else:
    _collector_held = False


# --- Triton, held back while the command line starts ----------------------------------------
#
# ``torch.utils.flop_counter``, whose GEMM and convolution formulas costs/ reuse, imports Triton
# where it is installed (CUDA builds of torch; torch 2.15 at module import) for one type, the
# ``JITFunction`` a user's Triton kernel is, that the analysis never meets: about 0.3 s of the
# command line's start-up. The command line starts with ``import triton`` failing as for a
# missing package (None in ``sys.modules``); flop_counter then takes the type to be
# ``NoneType`` and logs that Triton is missing, a warning its logger, held at ERROR meanwhile,
# keeps quiet. :func:`started` lets Triton be imported again, for whatever needs it later (a
# model that compiles). A batch's forkserver does the same while it preloads (its workers fork
# from it): ``_preload`` lets Triton in at its end.

TRITON = "triton"
FLOP_COUNTER_LOG = "torch.utils.flop_counter"


def hold_back_triton() -> bool:
    """``import triton`` fails until :func:`let_triton_in`; False (nothing done) where Triton is
    imported already."""
    if TRITON in sys.modules:
        return False
    sys.modules[TRITON] = None  # type: ignore[assignment] — the import system's "no module"
    logging.getLogger(FLOP_COUNTER_LOG).setLevel(logging.ERROR)
    return True


def let_triton_in() -> None:
    """Undoes :func:`hold_back_triton` (nothing, where it held nothing back)."""
    if TRITON in sys.modules and sys.modules[TRITON] is None:
        del sys.modules[TRITON]
        logging.getLogger(FLOP_COUNTER_LOG).setLevel(logging.NOTSET)
        _forget_triton_answers()


#: The module whose functions answer "is Triton there?" once per process (functools.cache).
TORCH_TRITON = "torch.utils._triton"


def _forget_triton_answers() -> None:
    """Clears the answers :data:`TORCH_TRITON` cached while Triton was held back: one asked
    then (``torch._dynamo.utils`` asks ``has_triton_package()`` at import, torch 2.15) said no
    for the rest of the process, to Inductor and to user Triton kernels alike."""
    probes = sys.modules.get(TORCH_TRITON)
    for probe in vars(probes).values() if probes is not None else ():
        if getattr(probe, "__module__", None) == TORCH_TRITON and hasattr(probe, "cache_clear"):
            probe.cache_clear()


def started_as_the_batch_forkserver() -> bool:
    """Whether this process is the forkserver a batch (``suites.batch``) forks its workers
    from: multiprocessing's own command line, preloading :mod:`torchroofline._preload`, which
    lets Triton in once it is done."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return any(a.startswith("from multiprocessing.forkserver import main")
               and f"'{__name__.partition('.')[0]}._preload'" in a for a in argv)


if started_as_the_command_line() or started_as_the_batch_forkserver():
    hold_back_triton()


def started() -> None:
    """The command line's imports are done: what they made is frozen, the collector back on,
    Triton importable again (nothing, in a process that merely imports torchroofline)."""
    global _collector_held
    let_triton_in()
    if _collector_held:
        _collector_held = False
        gc.freeze()
        gc.enable()



def ended(code: int) -> NoReturn:
    """The command is done: its exit handlers run (the batch's workers end, temporary folders
    go), its output is flushed, and the process ends with ``code``, the interpreter not torn
    down. The teardown would free what :func:`started` froze, object by object (~0.7 s of CPU
    for a process about to end), and native bindings whose objects stayed frozen complain of
    them: Triton's (imported by every CUDA build of torch) printed some 30 lines of "nanobind:
    leaked instance" after every command."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``) or stream: nothing to keep
            pass
    os._exit(code)


# --- torch._dynamo, loaded only if something needs it ---------------------------------------
#
# FakeTensorMode reads two flags of ``torch._dynamo.config`` when it is made, and every
# ``torch._disable_dynamo`` wrapper (the ``__torch_dispatch__`` of FakeTensorMode and of every
# dispatch mode, the reference ops' type promotion) asks ``torch._dynamo.disable`` for a
# Dynamo-free copy of its function on its first call. Either runs the package's ``__init__``,
# which imports all of Dynamo: about 2 s of CPU, as much as ``import torch`` itself, for a
# command that compiles nothing (a model wrapped by ``torch.compile`` is analyzed unwrapped,
# api._uncompiled). The command line and the batch workers put a placeholder package in its
# place: the real one without its ``__init__`` run, holding the two submodules fake tensors
# use (:data:`DYNAMO_USED`: 0.1 s). Its ``disable`` returns the function itself, which is
# Dynamo-free already while nothing compiles; any other attribute or submodule runs the real
# ``__init__`` in it first (Dynamo's modules import one another in the order it sets), so
# code that does use Dynamo (``torch.compile``) gets it, seconds later. A process that merely
# imports torchroofline keeps the real package: it may compile, and then a function left
# undisabled would be traced.

DYNAMO = "torch._dynamo"
#: What fake tensors import from Dynamo: FakeTensorMode's flags, and the names making a fake
#: tensor of a real one (a ``torch.tensor`` literal, a BatchNorm's step count) gives it.
DYNAMO_USED = ("config", "source")


class _LoadingPath(list):
    """The placeholder's ``__path__``: finding a submodule in it runs the real ``__init__``."""

    def __iter__(self):
        _load_dynamo(sys.modules[DYNAMO])
        return super().__iter__()


def _load_dynamo(package: object) -> None:
    """Runs the real ``torch/_dynamo/__init__.py`` in the placeholder (once)."""
    if not isinstance(package.__path__, _LoadingPath):
        return
    package.__path__ = package.__path__.copy()  # a plain list, before anything iterates it
    del package.__getattr__, package.disable
    package.__spec__.loader.exec_module(package)


def install_dynamo_placeholder() -> None:
    """The placeholder as ``torch._dynamo``, unless Dynamo is loaded already (or its
    submodules are not the ones :data:`DYNAMO_USED` names)."""
    import importlib
    import importlib.util

    import torch

    spec = None if DYNAMO in sys.modules else importlib.util.find_spec(DYNAMO)
    if spec is None:
        return
    package = importlib.util.module_from_spec(spec)

    def load_for(name: str) -> object:
        _load_dynamo(package)
        return getattr(package, name)

    def disable(fn=None, recursive=True, **options):  # noqa: ANN001, ANN202 — Dynamo's own
        return fn if fn is not None else load_for("disable")(fn, recursive, **options)

    sys.modules[DYNAMO] = torch._dynamo = package
    try:
        for name in DYNAMO_USED:  # while the path is plain
            importlib.import_module(f"{DYNAMO}.{name}")
    except ImportError:  # a torch whose Dynamo is laid out otherwise: the real package, later
        del sys.modules[DYNAMO], torch._dynamo
        return
    package.__path__ = _LoadingPath(package.__path__)
    package.__getattr__ = load_for  # called only for names the placeholder lacks
    package.disable = disable
