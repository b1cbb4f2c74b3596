"""Ctrl-C at every phase of a batch, many times in one process: run by
tests/suites/test_interrupts.py in a session of its own (one Python and one forkserver for all
the tries: a fresh command per try would spend seconds on ``import torch`` each time).

Each try runs ``torchroofline kernelbench`` on three tiny problems in two workers and sends
SIGINT the way ``timeout -s INT`` does (to the command, then to its whole process group, so
the forkserver and the workers get it too) at a chosen moment: a delay after the workers start
to start, after the first problem finished, after the last, or inside the writing of the
report. It prints one JSON line per try: the exit code, the problems the progress lines said
were finished, the problems the report holds, and what is wrong, if anything."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from torchroofline.cli import main

PROBLEMS = sorted((Path(__file__).parents[1] / "fixtures" / "kernelbench_tiny").glob("*/*.py"))
#: What starts the clock of a try's signal: a line on stderr (the CLI's progress) or, for
#: "writing", the report's first write to stdout (with --out: the summary note after it).
EVENTS = {"start": "analyzing ", "first": "[1/", "last": f"[{len(PROBLEMS)}/"}
FORMATS = ("stdout", ".md", ".json", ".csv")
#: (event, delay in s, format); the first try lands while the forkserver imports torch.
TRIES = [("start", 1.0, ".json")] + [
    (event, delay, suffix)
    for suffix in FORMATS
    for event, delay in (("start", 0.0), ("start", 0.1), ("first", 0.0), ("first", 0.03),
                         ("last", 0.0), ("writing", 0.0))
] + [("last", 0.5, "stdout"), ("writing", 0.5, ".csv")]  # likely after the command returned
#: An offline page cut short, run on their own (``interrupt_tries.py html``): before any
#: problem finished, and after the first.
PAGE_TRIES = [("start", 0.0, ".html"), ("first", 0.0, ".html")]


def interrupt() -> None:
    """SIGINT as ``timeout -s INT`` sends it: to the command, then to its process group."""
    os.kill(os.getpid(), signal.SIGINT)
    os.killpg(0, signal.SIGINT)


class Hooked(io.StringIO):
    """A captured stream that calls ``hook`` with each piece written to it."""

    def __init__(self, hook) -> None:
        super().__init__()
        self.hook = hook

    def write(self, text: str) -> int:
        written = super().write(text)
        self.hook(text)
        return written


def reported(text: str, suffix: str) -> list[str]:
    """The problems (file stems) a report holds."""
    if suffix == ".json":
        return [Path(problem["file"]).stem for problem in json.loads(text)["problems"]]
    if suffix == ".csv":
        rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
        return [Path(row["problem"]).stem for row in rows]
    return [path.stem for path in PROBLEMS if path.stem in text]


def attempt(event: str, delay: float, suffix: str, folder: Path) -> dict:
    out = None if suffix == "stdout" else folder / f"report{suffix}"
    argv = ["kernelbench", *map(str, PROBLEMS), "-j", "2", *(["--out", str(out)] * bool(out))]
    timers: list[threading.Timer] = []

    def fire(text: str, stream: str) -> None:
        if timers:
            return
        wanted = {"stdout": "writing"} if out is None else {}
        if wanted.get(stream) == event or (
            stream == "stderr" and (text.startswith(EVENTS.get(event, "\0"))
                                    or (event == "writing" and out is not None
                                        and "problems analyzed" in text))
        ):
            timers.append(threading.Timer(delay, interrupt))
            timers[0].start() if delay else timers[0].run()  # run: here, amid the write

    stdout = Hooked(lambda text: fire(text, "stdout"))
    stderr = Hooked(lambda text: fire(text, "stderr"))
    late = False
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(argv)
        for timer in timers:
            timer.join() if timer.ident else None
        time.sleep(0.05)  # a signal sent after the command returned lands here
    except KeyboardInterrupt:
        late, code = True, locals().get("code")
    err = stderr.getvalue()
    finished = [Path(name).stem for name in re.findall(r"\] ok +\S+ (\S+)", err)]
    text = stdout.getvalue() if out is None else (out.read_text() if out.exists() else "")
    held = reported(text, ".md" if out is None else suffix) if text else []
    problems = []
    if code not in (0, 130):
        problems.append(f"exit {code}")
    if "Traceback" in err:
        problems.append("a traceback")
    if not set(finished) <= set(held):
        problems.append("a finished problem missing from the report")
    if code == 0 and (len(held) != len(PROBLEMS) or "artial" in text):
        problems.append("exit 0 without the whole report")
    marked = re.search(r"interrupted after (\d+) of", text)
    if marked and int(marked.group(1)) != len(held):
        problems.append("a partial report whose count is not its problems")
    return {"event": event, "delay": delay, "format": suffix, "code": code, "late": late,
            "finished": finished, "reported": held, "partial": bool(marked),
            "problems": problems, "stderr": err[-600:] if problems else ""}


if __name__ == "__main__":
    tries = PAGE_TRIES if sys.argv[1:] == ["html"] else TRIES
    with tempfile.TemporaryDirectory() as folder:
        for number, (event, delay, suffix) in enumerate(tries):
            place = Path(folder) / str(number)
            place.mkdir()
            print(json.dumps(attempt(event, delay, suffix, place)), flush=True)
