"""Make the README pictures under docs/img/: ``python docs/make_images.py [out_dir]``.

Every figure is drawn by torchroofline.present.viz from a real analysis. The MEASURED TIMES ARE
ILLUSTRATIVE: invented multiples of the speed of light, chosen to look like a typical suite
(one deliberately faster than light, to show the "impossible" highlight). No GPU was used.
The trace picture is the exception: its times were measured on an H100 (a profiler trace).

The pictures are deterministic: run twice, it writes the same bytes (the saved files carry no
matplotlib version or date: ``present.viz.canvas.save``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import torchroofline
from torchroofline.present.html import sweep_html
from torchroofline.present.viz import plot_gpus, plot_result, plot_suite, plot_sweep, plot_trace
from torchroofline.suites.batch_report import BatchReport
from torchroofline.suites.kineto import analyze_trace
from torchroofline.suites.sweep import Sweep, sweep_kernelbench

IMG_DIR = Path(__file__).resolve().parent / "img"
#: A real H100 profiler trace (AMD-AGI/TraceLens, MIT): its times are measured, not invented.
BERT_TRACE = (Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "traces"
              / "h100_gaunernst_bert-small-uncased__1016001.json.gz")
GPU = "h100-sxm"
PRECISION = "fp32"
ROOT = Path(__file__).resolve().parent.parent
#: The README's sweep: ``torchroofline sweep`` of this file over ``N`` on two GPUs.
SWEEP_FILE = "examples/kernelbench/level1/1_Square_matrix_multiplication_.py"
SWEEP_AXIS = {"N": [32, 128, 512, 2048, 8192, 32768, 131072]}
SWEEP_GPUS = ("h100", "l40s")


class TransformerBlock(nn.Module):
    """Pre-norm attention (SDPA) and MLP: matmuls, attention, layer norms and pointwise ops."""

    def __init__(self, dim: int = 512, heads: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, self.heads, -1).unbind(2)
        attn = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        )
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def _meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta")


class Transpose(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(0, 1).contiguous()


class Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


# (level, KernelBench-style file name, model, inputs, illustrative measured time as a multiple of
# SoL — below 1 is faster than light, i.e. a broken timing)
SUITE = (
    (
        1,
        "1_Square_matrix_multiplication_.py",
        nn.Linear(2048, 2048, bias=False),
        _meta(2048, 2048),
        1.6,
    ),
    (1, "23_Softmax.py", Softmax(), _meta(256, 16384), 3.1),
    (1, "40_LayerNorm.py", nn.LayerNorm(1024), _meta(4096, 1024), 5.2),
    (1, "88_Transpose.py", Transpose(), _meta(4096, 4096), 0.7),
    (
        2,
        "6_Conv2d_ReLU.py",
        nn.Sequential(nn.Conv2d(64, 64, 3), nn.ReLU()),
        _meta(16, 64, 56, 56),
        9.0,
    ),
    (2, "12_Gemm_GELU.py", nn.Sequential(nn.Linear(1024, 4096), nn.GELU()), _meta(512, 1024), 2.4),
    (3, "TransformerBlock.py", TransformerBlock(), _meta(4, 256, 512), 14.0),
)


def suite_report() -> BatchReport:
    """A KernelBench batch report (the JSON layout `torchroofline kernelbench` writes, read back)
    over SUITE, with illustrative measured times and one failed problem."""
    problems = []
    for level, file, model, inputs, factor in SUITE:
        result = torchroofline.analyze(model.eval(), inputs, GPU, PRECISION)
        measured = result.sol_ms * factor
        problems.append(
            {
                "level": level,
                "file": file,
                "status": "ok",
                "error": None,
                "result": result.to_dict(),
                "measured_ms": measured,
                "gen_ms": None,
                "sol_fraction": result.sol_ms / measured,
                "speedup": None,
            }
        )
    problems.append(
        {
            "level": 3,
            "file": "99_Broken.py",
            "status": "failed",
            "error": "ProblemFileError: no class Model in 99_Broken.py",
            "result": None,
            "measured_ms": None,
            "gen_ms": None,
            "sol_fraction": None,
            "speedup": None,
        }
    )
    return BatchReport.from_dict({"gpu": GPU, "precision": PRECISION, "problems": problems})


def main(out_dir: str | Path = IMG_DIR) -> list[Path]:
    """Write every README picture into ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    block = TransformerBlock().eval()
    result = torchroofline.analyze(block, _meta(8, 512, 512), GPU, PRECISION)
    measured = result.with_actual(result.sol_ms * 2.7)  # illustrative measured time
    written = [out_dir / "roofline.png", out_dir / "gpus.png"]
    plot_result(measured, written[0])
    plot_gpus(
        result, gpus=("v100", "a100-80gb", "h100-sxm", "b200", "l40s", "mi300x"), path=written[1]
    )
    return written + plot_suite(suite_report(), out_dir) + [
        trace_picture(out_dir), sweep_picture(readme_sweep(), out_dir)
    ]


def readme_sweep() -> Sweep:
    """The README's sweep (``torchroofline sweep FILE --set N=32:131072:*4 --gpu h100,l40s
    --data any``)."""
    return sweep_kernelbench(ROOT / SWEEP_FILE, SWEEP_AXIS, SWEEP_GPUS, data="any")


def sweep_picture(sweep: Sweep, out_dir: Path) -> Path:
    """``torchroofline sweep --plot`` of the README's sweep."""
    path = out_dir / "sweep.png"
    plot_sweep(sweep, path)
    return path


def sweep_page_screenshot(out_dir: Path) -> Path | None:
    """A headless Chromium's screenshot of the README sweep's ``--format html`` page
    (docs/guide.md); None where no chromium binary is installed."""
    import shutil
    import subprocess
    import tempfile

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    path = out_dir / "sweep_page.png"
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "sweep.html"
        page.write_text(sweep_html(readme_sweep()), encoding="utf-8")
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={folder}/profile", "--window-size=1200,900",
             f"--screenshot={path}", page.as_uri()],
            capture_output=True, timeout=120, check=True,
        )
    return path


def trace_picture(out_dir: Path) -> Path:
    """``torchroofline trace --plot`` of the BERT-small H100 trace (docs/trace.md)."""
    path = out_dir / "trace.png"
    plot_trace(analyze_trace(BERT_TRACE), path)
    return path


if __name__ == "__main__":
    for path in main(*sys.argv[1:2]):
        print(path)
    shot = sweep_page_screenshot(Path(*sys.argv[1:2]) if sys.argv[1:2] else IMG_DIR)
    print(shot or "no chromium: docs/img/sweep_page.png not remade")
