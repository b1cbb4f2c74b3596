"""Ctrl-C never loses a finished problem: an interrupt at every phase of a batch (the forkserver
importing torch, the workers starting, the first problem, mid-run, the report being written)
leaves a report holding every problem the progress said was finished, exit 130 and no
traceback; or, when the command was done before the signal, exit 0 and the whole report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TRIES = Path(__file__).with_name("interrupt_tries.py")


def _tries(*arguments: str) -> subprocess.CompletedProcess:
    # a session of its own: the tries signal their whole process group, as a terminal's Ctrl-C
    # and `timeout -s INT` do; SIGINT back to its default, which a CI job started with `&`
    # leaves ignored
    return subprocess.run(
        [sys.executable, str(TRIES), *arguments], capture_output=True, text=True, timeout=300,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_ctrl_c_at_every_phase_keeps_every_finished_problem():
    process = _tries()
    assert process.returncode == 0, process.stderr[-3000:]
    # what the forkserver and the workers print reaches this stderr: a KeyboardInterrupt
    # traceback from the forkserver importing torch, or an EOFError one from a worker whose
    # start was cut short, used to
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    tries = [json.loads(line) for line in process.stdout.splitlines()]
    assert len(tries) >= 20
    for one in tries:
        assert one["problems"] == [], one
        assert one["code"] in (0, 130)
    stopped = [one for one in tries if one["code"] == 130]
    # every phase was hit: none finished, some, all but the report not yet written (a partial
    # report of every problem), and a signal while writing (the whole report, not partial)
    assert {len(one["reported"]) for one in stopped if one["partial"]} >= {0, 1, 3}
    assert any(not one["partial"] and len(one["reported"]) == 3 for one in stopped)
    assert {one["format"] for one in stopped} == {"stdout", ".md", ".json", ".csv"}


def test_an_interrupted_page_is_marked_partial():
    # `--out report.html` cut before any problem finished and after the first: the page holds
    # the problems finished and says "interrupted after k of 3 problems" (it said nothing: a
    # page of 1 problem read as a whole batch of 1)
    process = _tries("html")
    assert process.returncode == 0, process.stderr[-3000:]
    tries = [json.loads(line) for line in process.stdout.splitlines()]
    assert len(tries) == 2
    for one in tries:
        assert one["problems"] == [], one
        assert one["code"] == 130 and one["partial"], one


def test_ctrl_c_while_the_command_imports_torch_is_one_line_and_130(tmp_path):
    if not Path("/proc/self/maps").exists():
        pytest.skip("needs /proc to see the import of torch begin")
    problem = Path(__file__).parents[1] / "fixtures" / "kernelbench_tiny" / "level1" / "1_Add.py"
    process = subprocess.Popen(
        [sys.executable, "-m", "torchroofline", "kernelbench", str(problem)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    maps = Path(f"/proc/{process.pid}/maps")
    deadline = time.monotonic() + 60
    # torch's shared library mapped: the package is importing torch, after its start-up guard
    while process.poll() is None and time.monotonic() < deadline:
        if "libtorch" in maps.read_text(errors="replace"):
            break
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    # it printed a KeyboardInterrupt traceback from inside torch's import
    assert "Traceback" not in err, err[-2000:]
    assert process.returncode == 130
    assert err.strip().splitlines()[-1].startswith("torchroofline: error: interrupted")
