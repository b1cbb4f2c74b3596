"""Stage 5, present: a :class:`~torchroofline.price.roofline.Result` (or a suite's report) in,
text, JSON, Markdown, CSV and pictures out.

``report`` formats figures, ``breakdown`` groups them by module, ``viz`` draws them
(matplotlib, the ``viz`` extra). Nothing here computes a bound.
"""

from __future__ import annotations

from typing import Any

from ..price.roofline import PRESENTERS, Result
from .report import format_result, result_to_dict


def plot_result(result: Result, path: str | None = None, *, ax: Any = None, top: int = 10) -> Any:
    """:func:`.viz.plot_result`, imported when first drawn (matplotlib is the ``viz`` extra)."""
    from .viz import plot_result as draw

    return draw(result, path, ax=ax, top=top)


PRESENTERS.update(to_dict=result_to_dict, format=format_result, plot=plot_result)
