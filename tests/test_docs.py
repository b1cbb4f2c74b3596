"""Every figure README.md and METHOD.md show is what the code prints now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
import torch.nn as nn

import torchroofline

ROOT = Path(__file__).resolve().parent.parent


def test_generated_blocks_are_current():
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "sync_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_readme_quickstart_output_matches():
    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128))
    result = torchroofline.analyze(model, (torch.randn(1, 512),), gpu="h100-sxm", precision="fp32")
    readme = (ROOT / "README.md").read_text()
    assert result.format() in readme
    assert "result = torchroofline.analyze(model, (torch.randn(1, 512),)" in readme


def test_ci_runs_the_readme_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    for command in ('pip install -e ".[dev]"', "pytest"):
        assert command in readme and command in ci
    example = next(line for line in ci.splitlines() if line.startswith("torchroofline analyze"))
    assert example.split(" --")[0] in readme
