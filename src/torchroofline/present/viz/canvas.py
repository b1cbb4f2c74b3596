"""What every picture shares: matplotlib on demand, figures on the Agg canvas, saving, colours,
sizes and tick formatters.

matplotlib is imported inside these functions only, so ``import torchroofline`` never needs it.
Figures are :class:`matplotlib.figure.Figure` objects on the non-interactive Agg canvas (pyplot
and its global state are not used), returned to the caller and saved when a ``path`` ending in
``.png`` or ``.svg`` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InputError, TorchrooflineError
from ...units import si

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FIGSIZE_IN = (9.0, 6.0)  #: roofline figure size, inches
GPUS_FIGSIZE_IN = (10.0, 4.8)
SUITE_FIGSIZE_IN = (8.0, 6.0)
DPI = 150  #: pixels per inch of saved PNGs
SAVE_SUFFIXES = (".png", ".svg")

CATEGORY_COLOURS = {
    "compute": "#1f77b4",
    "reduction": "#9467bd",
    "pointwise": "#2ca02c",
    "data-movement": "#7f7f7f",
}
BOUND_COLOURS = {"compute": "#1f77b4", "memory": "#ff7f0e", "host": "#bdbdbd"}
IMPOSSIBLE_COLOUR = "#d62728"
ROOF_COLOUR = "#333333"

_MISSING_MATPLOTLIB = "plotting needs matplotlib: pip install 'torchroofline[viz]'"


# --- matplotlib ---------------------------------------------------------------------------------


def figure_class() -> type:
    """matplotlib's Figure, or the one-line error that says how to get it."""
    try:
        import matplotlib  # noqa: F401  (checked first: a cached submodule would hide its absence)
        from matplotlib.figure import Figure
    except ImportError:
        raise TorchrooflineError(_MISSING_MATPLOTLIB) from None
    return Figure


def new_figure(figsize: tuple[float, float], **subplots: Any) -> tuple[Figure, Any]:
    """A Figure on an Agg canvas (no pyplot, no display) and its axes."""
    figure = figure_class()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(**subplots)


def axes_for(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes, bool]:
    """The caller's axes, or new ones; the flag says whether the figure is ours to lay out."""
    if ax is None:
        fig, ax = new_figure(figsize)
        return fig, ax, True
    return ax.figure, ax, False


def save_target(path: str | Path | None) -> Path | None:
    """The path a figure will be saved to, checked before any drawing."""
    figure_class()
    if path is None:
        return None
    path = Path(path)
    if path.suffix.lower() not in SAVE_SUFFIXES:
        raise InputError(f"cannot save a figure as {path.name!r}; end the path in .png or .svg")
    if not path.parent.is_dir():
        raise InputError(f"cannot save a figure in {str(path.parent)!r}: no such folder; create "
                         "it first")
    return path


def output_folder(path: str | Path) -> Path:
    """The folder pictures go to, made where it does not exist; never a missing folder above
    it (as :func:`save_target`: a mistyped path is refused, not built)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"cannot write pictures in {str(path)!r}: it is a file; give a folder")
    if not path.parent.is_dir():
        raise InputError(f"cannot write pictures in {str(path)!r}: no folder "
                         f"{str(path.parent)!r}; create it first")
    path.mkdir(exist_ok=True)
    return path


#: What a saved file holds beside the picture: nothing that differs between runs or machines
#: (matplotlib's version, a date, random SVG ids), so one figure always saves to the same bytes.
_STABLE_METADATA = {".png": {"Software": None}, ".svg": {"Creator": None, "Date": None}}
_STABLE_RC = {"svg.hashsalt": "torchroofline"}


def save(fig: Figure, path: Path | None) -> Figure:
    if path is not None:
        from matplotlib import rc_context

        with rc_context(_STABLE_RC):
            fig.savefig(path, dpi=DPI, metadata=_STABLE_METADATA[path.suffix.lower()])
    return fig


def freeze_layout(fig: Figure, owned: bool) -> None:
    """Run the layout once and keep it, so display positions measured now stay true."""
    fig.draw_without_rendering()
    if owned:
        fig.set_layout_engine("none")


def si_formatter(unit: str) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: si(value, unit).replace(".00 ", " "))


def time_formatter(widest_ms: float) -> Any:
    """Ticks of an axis in ms, in one unit that suits its range: "20 µs", "1.5 ms", "2 s"."""
    from matplotlib.ticker import FuncFormatter

    scale, unit = (1e3, "µs") if widest_ms < 1 else (1.0, "ms") if widest_ms < 1e3 else (1e-3, "s")
    return FuncFormatter(lambda value, _: f"{value * scale:g} {unit}" if value else "0")


def plain_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:g}")


def percent_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:g}%")
