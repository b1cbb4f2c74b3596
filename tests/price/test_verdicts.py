"""The one verdict (torchroofline.price.verdicts.verdict) on synthetic ladders: a bound of 10 ms
at fp32 (the program's math), 4 ms at TF32, 2 ms at BF16; as written 40 / 8 / 5 ms."""

from __future__ import annotations

import pytest

from torchroofline.price.verdicts import verdict

LADDER = {"program": 10.0, "tf32": 4.0, "bf16": 2.0}
WRITTEN = {"program": 40.0, "tf32": 8.0, "bf16": 5.0}
NAMES = "fc, sum through the linear map"
SHORTCUT = f"possible only with an algebraic shortcut ({NAMES})"


@pytest.mark.parametrize(
    ("measured", "kind", "rung", "text"),
    [
        (1.0, "impossible", None, "faster than any math on this GPU"),
        (3.0, "lower math", "bf16", "faster than the fp32 bound; possible only with BF16"),
        (6.0, "lower math", "tf32", "possible only with TF32 or lower math"),
        # between the bound and the bound as written, above the as-written BF16 rung: either
        (12.0, "shortcut or lower math", "program",
         f"{SHORTCUT}, or as written with TF32 or lower math"),
        (30.0, "shortcut or lower math", "program", "or as written with TF32"),
        (50.0, "headroom", "program", "5.00x headroom"),
    ],
)
def test_each_time_gets_one_verdict(measured: float, kind: str, rung: str | None,
                                    text: str) -> None:
    judged = verdict(measured, LADDER, "program", "fp32", WRITTEN, NAMES)
    assert (judged.kind, judged.rung) == (kind, rung)
    assert text in judged.text
    assert judged.impossible == (kind == "impossible")
    assert (judged.shortcut is not None) == kind.startswith("shortcut")


def test_a_time_no_math_as_written_reaches_needs_the_shortcut_alone() -> None:
    # 4.5 ms: above the bound (BF16 after the shortcut: 2) but below every rung as written (5)
    judged = verdict(4.5, LADDER, "bf16", "fp32", WRITTEN, NAMES)
    assert (judged.kind, judged.text) == ("shortcut", SHORTCUT)
    assert judged.short == "needs an algebraic shortcut"


def test_without_a_shortcut_a_time_above_the_bound_has_headroom() -> None:
    judged = verdict(12.0, LADDER, "program", "fp32")
    assert (judged.kind, judged.headroom) == ("headroom", 1.2)
    assert judged.shortcut is None
