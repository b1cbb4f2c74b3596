"""A bound far below the executed work says why: the share of the FLOPs that feed no kept value
and which output makes it so (a ViT that keeps only its class token), and a constant output
(issue 38, item 6)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import meta
from torchroofline import analyze
from torchroofline.present.html import suite_html
from torchroofline.present.report import CONSTANT_OUTPUT, suite_markdown
from torchroofline.present.viz.rooflines import _measured_label, _note
from torchroofline.suites.batch_report import BatchReport, ProblemReport

B, S, D, C = 2, 8, 16, 4  #: batch, tokens, width, classes


class ClassToken(nn.Module):
    """Every token through a projection and a ReLU; the head reads the first token only."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(D, D)
        self.head = nn.Linear(D, C)

    def forward(self, x):
        return self.head(torch.relu(self.proj(x))[:, 0])


class ConstantOutput(nn.Module):
    """KernelBench level 2 #80: y - y.mean(1, keepdim=True) over a dim of size 1 is zeros."""

    def __init__(self) -> None:
        super().__init__()
        self.gemm = nn.Linear(D, D)

    def forward(self, x):
        y = self.gemm(x).max(dim=1, keepdim=True).values
        return F.gelu(y - y.mean(dim=1, keepdim=True))


def test_the_share_of_work_no_kept_value_needs_and_the_output_that_drops_it():
    result = analyze(ClassToken(), meta(B, S, D))
    necessary = result.necessary
    # proj's addmm: 2·(B·S)·D·D FLOPs (the bias is folded in, as torch's flop counter does);
    # the ReLU B·S·D; the head 2·B·D·C. The head keeps token 0 of S, so (S − 1)/S of proj's
    # and the ReLU's FLOPs are unkept
    executed = 2 * B * S * D * D + B * S * D + 2 * B * D * C
    assert necessary.executed_flops == result.executed_flops == executed
    assert necessary.unkept_flops == (2 * B * S * D * D + B * S * D) * (S - 1) // S
    assert necessary.unkept_share == necessary.unkept_flops / result.executed_flops > 0.5
    note = next(n for n in result.notes if "feed no kept value, so" in n)
    assert note.startswith(f"{necessary.unkept_share:.1%} of the executed FLOPs")
    # the ReLU's output (no module of its own: the model's) is read in part by the head
    assert f"the model's output (relu, {B}×{S}×{D}) is {1 / S:.2%} kept (1 of {S} along dim 1)" \
        in note
    assert note.endswith("as head (addmm) reads it")
    unkept = result.to_dict()["unkept"]
    assert unkept["flops_share"] == necessary.unkept_share
    assert unkept["where"] in note
    assert result.to_dict()["constant_output"] is False


def test_a_program_that_keeps_all_it_computes_has_no_such_note():
    result = analyze(nn.Sequential(nn.Linear(D, D), nn.ReLU()), meta(B, D))
    assert result.necessary.unkept_flops == 0 and result.necessary.narrowed_at is None
    assert not any("feed no kept value" in note for note in result.notes)


def test_a_constant_output_is_named_so_and_not_read_as_a_percent_of_sol():
    result = analyze(ConstantOutput(), meta(B, D)).with_actual(0.05)
    assert result.necessary.constant_output
    assert result.compulsory_bytes == B * 1 * 4  # the (B, 1) fp32 zeros written, nothing read
    assert any(note.startswith("the output is a constant") for note in result.notes)
    document = result.to_dict()
    assert document["constant_output"] is True
    problem = ProblemReport(2, "80_x.py", "level2/80_x.py", "level2/80_x.py", "ok", None, 0.1,
                            document, 0.05, None)
    markdown = suite_markdown(BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (problem,)))
    row = markdown.strip().splitlines()[-1]
    # it read "1.223e-06 | … | 0.0%": a bound that writes a constant, and no % of it
    assert "(writes a constant)" in row and "— (constant output)" in row
    assert CONSTANT_OUTPUT in row and "0.0%" not in row


def test_a_constant_output_reads_the_same_in_every_report() -> None:
    # one verdict (price.verdicts.verdict) for the text, the JSON, the picture and the suite
    # columns: "% of SoL: 0.0% (196289x headroom)" read as a kernel far from its bound
    result = analyze(ConstantOutput(), meta(B, D)).with_actual(0.05)
    judged = result.judge(0.05)
    assert judged.kind == "constant output" and not judged.measures_kernel
    (line,) = [line for line in result.format().splitlines() if "% of SoL" in line]
    figure = line.split(":", 1)[1].split("(")[0]
    assert figure.strip() == "—" and "the output is a constant" in line
    assert "headroom" not in line
    actual = result.to_dict()["actual"]
    assert actual["verdict_kind"] == "constant output"
    assert _measured_label(result.to_dict(), 0.05, 1e-5) == \
        "measured 50 µs: constant output: no % of SoL"
    problem = ProblemReport(2, "80_x.py", "level2/80_x.py", "level2/80_x.py", "ok", None, 0.1,
                            result.to_dict(), 0.05, 0.02)
    assert problem.sol_fraction is None and problem.gen_sol_fraction is None
    report = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (problem,))
    assert report.summary["all"]["median_sol_fraction"] is None  # not a 0.0% in the median
    assert "constant output: no % of SoL" in suite_html(report)
    # a program that reads its input still gets its % (the verdict's kind is headroom)
    reading = analyze(nn.Linear(D, D), meta(B, D)).with_actual(0.05)
    assert reading.judge(0.05).measures_kernel


class ReturnsNothing(nn.Module):
    """Computes x @ x and returns None: nothing is kept."""

    def forward(self, x: torch.Tensor) -> None:
        x @ x


class ReturnsItsInput(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def test_a_model_that_returns_no_tensor_is_told_why_its_bound_is_zero() -> None:
    # it read "Speed of light: 0 ns" with no note: the matmul's output is never returned
    result = analyze(ReturnsNothing(), torch.randn(8, 8), "h100-sxm")
    assert result.sol_s == 0
    assert any(note.startswith("the model returns no tensor") for note in result.notes)
    # returning its input keeps a tensor (a bound of 0 that needs no note)
    kept = analyze(ReturnsItsInput(), torch.randn(8, 8), "h100-sxm")
    assert not any(note.startswith("the model returns no tensor") for note in kept.notes)


class ScalesItsInputInPlace(nn.Module):
    """Returns None, but its input holds 2x afterwards: that write is kept."""

    def forward(self, x: torch.Tensor) -> None:
        x.mul_(2)


class SumsToAPythonNumber(nn.Module):
    def forward(self, x: torch.Tensor) -> float:
        return x.sum().item()


def test_a_model_that_returns_no_tensor_but_writes_in_place_keeps_the_write() -> None:
    # the note said "nothing is kept, so the bound is 0" beside a bound of 9.78 ns
    result = analyze(ScalesItsInputInPlace(), torch.randn(64, 64), "h100-sxm")
    # x read and written once, fp32: 2 · 64 · 64 · 4 B at the HBM bandwidth
    assert result.compulsory_bytes == 2 * 64 * 64 * 4 and result.sol_s > 0
    [note] = [note for note in result.notes if note.startswith("the model returns no tensor")]
    assert "the bound is what it keeps otherwise (in-place writes to inputs and buffers" in note
    assert "bound is 0" not in note
    # so is the sum a Python number is read from: x read once, 64 · 64 · 4 B
    summed = analyze(SumsToAPythonNumber(), torch.randn(64, 64), "h100-sxm")
    assert summed.compulsory_bytes == 64 * 64 * 4
    assert not any("bound is 0" in note for note in summed.notes)


def test_a_bound_of_zero_gets_no_percent_of_sol() -> None:
    # a model that keeps nothing read "% of SoL 0.0% (infx headroom)", and the JSON's
    # sol_fraction 0.0: any time is infinitely far from a bound of 0, which says nothing
    result = analyze(ReturnsNothing(), torch.randn(8, 8), "h100-sxm").with_actual(0.01)
    assert result.sol_s == 0
    judged = result.actual.verdict
    assert not judged.measures_kernel and judged.sol_fraction is None
    assert judged.text.startswith("nothing is kept, no output tensor or only empty ones")
    # the picture said "constant output: no % of SoL" and "pure data movement" of 0 B
    assert judged.kind == "nothing kept" and judged.short == "nothing kept: no % of SoL"
    data = result.to_dict()
    assert _measured_label(data, 0.01, 0.0) == "measured 10 µs: nothing kept: no % of SoL"
    assert "no FLOPs, no bytes: nothing to compute or move" in _note(data, [], [], 0.0)
    report = result.format()
    assert "infx" not in report and "inf FLOPs/Byte" not in report
    assert "(nothing to compute or move)" in report and "BOUND ***" not in report


def test_an_empty_output_is_named_not_called_a_constant() -> None:
    # x * 2 on a [0, 5] input was "the output is a constant: it needs no element of any
    # input", with "Arithmetic intensity: inf FLOPs/Byte" (0 FLOPs / 0 B) and "live then: "
    result = analyze(Doubles(), torch.randn(0, 5), "h100-sxm")
    assert result.sol_s == 0
    assert any(note.startswith("the outputs have no elements (shape [0, 5])")
               for note in result.notes)
    assert not any(note.startswith("the output is a constant") for note in result.notes)
    # nor in the JSON and the suite tables ("0 (writes a constant)", "constant output")
    assert result.to_dict()["constant_output"] is False
    report = result.format()
    assert "Arithmetic intensity     :              —" in report
    assert "live then: nothing" in report


class Doubles(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2
