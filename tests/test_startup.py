"""The command line's start-up: Dynamo (as long to import as torch) stays a placeholder until
something needs it. Each check runs in a fresh interpreter: this one may have Dynamo loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MATMUL = Path(__file__).parent / "fixtures" / "kernelbench" / "level1" / (
    "1_Square_matrix_multiplication_.py")

PLACEHOLDER_THEN_COMPILE = """
import sys
from torchroofline._startup import install_dynamo_placeholder
install_dynamo_placeholder()
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode():
    (torch.rand(4, 4) @ torch.rand(4, 4)).relu() + torch.tensor(2.0)  # a real tensor made fake
print(sorted({"torch._dynamo.config", "torch._dynamo.eval_frame"} & set(sys.modules)))
print(torch.compile(lambda a: a * 2, backend="eager")(torch.ones(3)).tolist())
"""


def _python(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, check=True)


def test_fake_tensors_run_on_the_placeholder_and_compiling_loads_dynamo():
    traced, compiled = _python("-c", PLACEHOLDER_THEN_COMPILE).stdout.splitlines()
    assert traced == "['torch._dynamo.config']"
    assert compiled == "[2.0, 2.0, 2.0]"  # the real package, loaded into the placeholder


def test_analyze_never_imports_dynamo():
    done = _python("-X", "importtime", "-m", "torchroofline", "analyze", str(MATMUL))
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()}
    assert "torch._subclasses.fake_tensor" in imported  # the report lists every import
    assert "torch._dynamo.eval_frame" not in imported
    assert "FLOPs (necessary)" in done.stdout


def test_batch_workers_fork_warm_and_without_dynamo():
    loaded = _python("-c", "import sys, torchroofline._preload; print(sorted(set(sys.modules) & {"
                     "'torch.fx.experimental.symbolic_shapes', 'torch._dynamo.eval_frame'}))")
    # the warm-up analysis made the first fake dispatch's imports; Dynamo stayed a placeholder
    assert loaded.stdout.strip() == "['torch.fx.experimental.symbolic_shapes']"


COLLECTOR_AT_START = """
import gc, sys
sys.argv[0] = sys.argv[1]  # "torchroofline" is how the console script starts
import torchroofline
from torchroofline._startup import started
during = (gc.isenabled(), gc.get_stats()[2]["collections"])
triton = sys.modules.get("triton", "absent")
started()
print(during, gc.isenabled(), gc.get_freeze_count() > 0)
print(triton, sys.modules.get("triton", "absent"))
"""


def test_the_command_line_starts_without_collecting_and_freezes_what_it_imported():
    # importing torch with the collector on runs full collections (two or more); the command
    # line makes none, then freezes the start-up's objects and collects again from there
    command_line, triton = _python("-c", COLLECTOR_AT_START, "torchroofline").stdout.split("\n", 1)
    assert command_line == "(False, 0) True True"
    # and Triton (flop_counter imports it on CUDA builds, ~0.3 s) was held back while it
    # started: `import triton` failed as for a missing package, then is let in again
    assert triton.strip() == "None absent"
    imported, triton = _python("-c", COLLECTOR_AT_START, "a_script").stdout.split("\n", 1)
    assert imported.endswith("True False")  # a program importing torchroofline keeps its own
    assert imported.startswith("(True, ")
    assert not triton.startswith("None")  # never held back (on a CUDA build, imported)



def test_letting_triton_in_forgets_what_torch_cached_while_it_was_held_back(monkeypatch):
    # torch 2.15's Dynamo asks has_triton_package() at import, inside the window: the
    # cached "no" outlived the window (a CUDA build with Triton installed said it had none)
    import torch.utils._triton as probes

    from torchroofline._startup import hold_back_triton, let_triton_in

    monkeypatch.delitem(sys.modules, "triton", raising=False)  # restored after the test
    assert hold_back_triton()
    probes.has_triton_package.cache_clear()
    assert probes.has_triton_package() is False  # asked while held back: cached
    let_triton_in()
    assert "triton" not in sys.modules
    assert probes.has_triton_package.cache_info().currsize == 0  # asked afresh from here


def test_the_batch_forkserver_holds_triton_back_while_it_preloads(monkeypatch):
    # on a CUDA build the forkserver imported Triton (~0.3 s, flop_counter) before forking any
    # worker; it holds it back as the command line does, and _preload lets it in at its end
    from torchroofline._startup import started_as_the_batch_forkserver

    command = "from multiprocessing.forkserver import main; main(%d, %d, %r, **%r)"  # 3.11
    for preload, held in ((["torchroofline._preload"], True), (["__main__"], False)):
        argv = [sys.executable, "-c", command % (3, 4, preload, {"sys_path": []})]
        monkeypatch.setattr(sys, "orig_argv", argv)
        assert started_as_the_batch_forkserver() is held
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "-m", "pytest"])
    assert not started_as_the_batch_forkserver()
    preload = (Path(__file__).parents[1] / "src" / "torchroofline" / "_preload.py").read_text()
    assert preload.rstrip().endswith("let_triton_in()")  # after everything it imports


ENDS_AT_ITS_EXIT_CODE = """
import atexit, os, sys
sys.argv[0] = sys.argv[1]  # "torchroofline" is how the console script starts
class Torn:
    def __del__(self, write=os.write):
        write(2, b"torn down\\n")
sys.modules["torn"] = Torn()  # freed only when the interpreter is torn down
atexit.register(os.write, 2, b"exit handlers ran\\n")
from torchroofline.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _ended(started_as: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ENDS_AT_ITS_EXIT_CODE, started_as, *argv],
                          capture_output=True, text=True)


def test_the_command_line_ends_without_tearing_the_interpreter_down():
    # the teardown frees, one by one, what the start-up froze (~0.7 s of CPU), and native
    # bindings whose objects it froze complain of them: Triton's (every CUDA build of torch
    # imports it) printed some 30 lines of "nanobind: leaked instance" after every command.
    # Exit handlers still run (the batch's workers end, temporary folders go); output is whole
    command_line = _ended("torchroofline", "gpus", "--json")
    assert (command_line.returncode, command_line.stderr) == (0, "exit handlers ran\n")
    assert command_line.stdout.rstrip().endswith("]") and '"h100-sxm"' in command_line.stdout
    usage = _ended("torchroofline", "gpus", "--jsn")  # argparse's own exit, too
    assert usage.returncode == 2
    assert usage.stderr.endswith("(did you mean --json?)\nexit handlers ran\n")
    imported = _ended("a_script", "gpus", "--json")  # a program calling main() ends its way
    assert (imported.returncode, imported.stderr) == (0, "exit handlers ran\ntorn down\n")
