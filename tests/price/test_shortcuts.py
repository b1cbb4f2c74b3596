"""An algebraic shortcut named: ``result.rewrites`` (JSON ``rewrites``), ``time_ms.sol`` after
the rewrites beside ``time_ms.sol_as_written``, the report's and the prompt's lines, and the
verdict on a measured time between the two bounds."""

from __future__ import annotations

import torch
import torch.nn as nn

from conftest import analyze, meta
from torchroofline.present.report import format_prompt
from torchroofline.price.roofline import Result

SIZE = 4096


class _Scaled(nn.Module):
    """(fc(x) / 2).sum(1): a sum through a scale, which the demand walk's own rule misses."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(SIZE, SIZE, bias=False, device="meta")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.fc(x) / 2).sum(1)


def _result() -> Result:
    return analyze(_Scaled(), meta(SIZE, SIZE), gpu="h100")


def test_the_shortcut_is_in_the_result_and_its_json() -> None:
    # as written: 2·n³ for the product, n² each for the divide and the sum; after: n² adds to
    # sum W, 2·n² for x @ ΣW, n divides
    result = _result()
    (shortcut,) = result.rewrites
    assert (shortcut.module, shortcut.rule, shortcut.op) == (
        "fc", "sum through the linear map", "aten.mm.default"
    )
    assert shortcut.flops_before == 2 * SIZE**3 + 2 * SIZE**2
    assert shortcut.flops_after == 3 * SIZE**2 + SIZE
    assert shortcut.time_saved_ms > 0
    data = result.to_dict()
    assert data["rewrites"] == [shortcut.to_dict()]
    assert data["time_ms"]["sol_as_written"] > 10 * data["time_ms"]["sol"]
    assert result.time_ms["sol"] == result.sol_ms


def test_the_report_and_the_prompt_state_the_shortcut() -> None:
    result = _result()
    sol = result.time_ms
    text = result.format(top=0)
    assert "Algebraic shortcut (fc, sum through the linear map): 137.47 GFLOPs → 50.34 MFLOPs" in (
        text
    )
    assert "Algebraic shortcut the bound assumes: sum through the linear map at fc" in (
        format_prompt(result)
    )
    assert sol["sol_as_written"] > sol["sol"]


def test_a_time_between_the_bounds_needs_the_shortcut() -> None:
    result = _result()
    low, high = result.time_ms["sol"], result.time_ms["sol_as_written"]
    actual = result.with_actual((low + high) / 2).actual
    # halfway between the fp32 bounds is above the bound as written with TF32 math
    assert actual.shortcut == (
        "possible only with an algebraic shortcut (fc, sum through the linear map), or as "
        "written with TF32 or lower math (check your tolerance)"
    )
    assert actual.to_dict()["shortcut"] == actual.shortcut
    text = result.with_actual((low + high) / 2).format(0)
    assert "possible only with an algebraic shortcut" in text
    assert result.with_actual(2 * high).actual.shortcut is None


def test_no_shortcut_no_second_bound() -> None:
    result = analyze(nn.Linear(SIZE, SIZE, device="meta"), meta(SIZE, SIZE))
    assert not result.rewrites
    assert "sol_as_written" not in result.time_ms and result.to_dict()["rewrites"] == []
