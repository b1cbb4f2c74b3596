"""What a measured time says against the bound: the one verdict the text report, the JSON, the
picture and the suite columns all print (:func:`verdict`).

A time is judged against two ladders of speeds of light (one bound per math rung the GPU has,
:func:`.precision.math_rungs`): the bound's, after the algebraic shortcuts it takes, and the
program's as written (where a shortcut lowers the bound). Five answers:

- faster than the bound at every rung: no correct kernel can be (a timing bug or a kernel that
  skips work);
- faster than the bound at the analysis's math: possible only with lower math (the highest
  rung whose bound the time does not beat);
- between the bound and the bound as written: possible only with an algebraic shortcut; where
  the ladder as written also has a rung the time does not beat below the analysis's math,
  lower math as written explains it as well, and the verdict names both;
- a program whose output is a constant (it reads no input: ``x - x.max(1, keepdim=True)``
  over a dim of size 1) has a bound that only writes it, ~0 beyond the launch: its time says
  how long the kernels ran that a correct program may skip, and a % of SoL says nothing; the
  same for a bound of 0 (no output tensor, or only empty ones: "infx headroom" said nothing);
- otherwise the headroom: how many times faster a kernel could still get.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..units import human_ms, percent, times
from .precision import possible_rung, rung_name


@dataclass(frozen=True)
class Verdict:
    """One measured time judged: ``kind`` is "impossible", "lower math", "shortcut",
    "shortcut or lower math", "constant output", "nothing kept" or "headroom"; ``text`` the
    sentence the reports print; ``rung`` the highest math rung whose bound (after shortcuts)
    the time does not beat (None: none); ``rung_as_written`` the same on the ladder as
    written, where there is one."""

    kind: str
    text: str
    rung: str | None
    rung_as_written: str | None = None
    headroom: float = 1.0
    #: the rungs as printed ("TF32"; "fp32" for the program's own)
    rung_label: str = ""
    written_label: str = ""

    @property
    def impossible(self) -> bool:
        return self.kind == "impossible"

    @property
    def measures_kernel(self) -> bool:
        """Whether a % of SoL says anything of the kernel (not for a constant output, whose
        bound writes it and reads nothing: the reports print the verdict instead)."""
        return self.kind not in NO_PERCENT_KINDS

    @property
    def shortcut(self) -> str | None:
        """The sentence where an algebraic shortcut explains the time (else None)."""
        return self.text if self.kind.startswith("shortcut") else None

    @property
    def short(self) -> str:
        """A few words for a picture's label: "IMPOSSIBLE", "needs TF32 or lower math", ..."""
        return {
            "impossible": "IMPOSSIBLE",
            "lower math": f"needs {self.rung_label} or lower math",
            "shortcut": "needs an algebraic shortcut",
            "shortcut or lower math": f"needs an algebraic shortcut or {self.written_label} "
            "or lower math",
            CONSTANT_OUTPUT: "constant output: no % of SoL",
            NOTHING_KEPT: "nothing kept: no % of SoL",
            "headroom": f"{times(self.headroom)} headroom",
        }[self.kind]

    @property
    def sol_fraction(self) -> float | None:
        """SoL / measured (1.0 = at the bound); None where a % of SoL says nothing
        (:attr:`measures_kernel`)."""
        return 1 / self.headroom if self.measures_kernel else None

    @property
    def percent_of_sol(self) -> str:
        """"65.5% of SoL", or "no % of SoL" where it says nothing (:attr:`sol_fraction`)."""
        fraction = self.sol_fraction
        return "no % of SoL" if fraction is None else f"{percent(fraction)} of SoL"

    @property
    def sentence(self) -> str:
        """The verdict as the text reports print it after the % of SoL: starred where the time
        beats the bound (led by "IMPOSSIBLE", as the picture's label is, where no math reaches
        it), the headroom beside a shortcut's sentence, else in parentheses."""
        if self.impossible:
            return f"*** {self.short}: {self.text} ***"
        if self.kind == "lower math":
            return f"*** {self.text} ***"
        if self.shortcut:
            return f"({times(self.headroom)} headroom; {self.text})"
        return f"({self.text})"

    def to_dict(self) -> dict[str, str | None]:
        return dict(zip(_FIELDS, (self.text, self.kind, self.short, self.rung_as_written),
                        strict=True))


def verdict_fields(judged: Verdict | None, prefix: str = "") -> dict[str, str | None]:
    """:meth:`Verdict.to_dict`'s keys (each after ``prefix``: "gen_verdict_kind"), all None
    where there is no verdict (no time, or no bound): the fields every JSON report carries."""
    data = judged.to_dict() if judged else dict.fromkeys(_FIELDS)
    return {prefix + key: value for key, value in data.items()}


#: The kind of verdict on the time of a program whose output is a constant.
CONSTANT_OUTPUT = "constant output"
#: The kind of verdict on the time of a program that keeps nothing (no output tensor, or only
#: empty ones): a bound of 0.
NOTHING_KEPT = "nothing kept"
#: The kinds of verdict of which a % of SoL says nothing (:attr:`Verdict.measures_kernel`).
NO_PERCENT_KINDS = frozenset({CONSTANT_OUTPUT, NOTHING_KEPT})

#: The keys of :meth:`Verdict.to_dict`.
_FIELDS = ("verdict", "verdict_kind", "verdict_short", "possible_with_as_written")


def verdict(
    measured_ms: float,
    sol_by_math_ms: Mapping[str, float],
    math: str,
    precision: str,
    as_written_by_math_ms: Mapping[str, float] | None = None,
    shortcut: str | None = None,
    constant_output: bool = False,
) -> Verdict:
    """``measured_ms`` against the ladder ``sol_by_math_ms`` (ms per math rung, after the
    shortcuts; ``sol_by_math_ms[math]`` is the bound) and, where shortcuts lower the bound,
    the ladder as written and the shortcuts' labels ``shortcut``; ``constant_output``: the
    program's kept outputs read no input (see the module doc)."""
    bound = sol_by_math_ms[math]
    rung = possible_rung(sol_by_math_ms, measured_ms)
    label = "" if rung is None else rung_name(rung, precision)
    headroom = measured_ms / bound if bound else float("inf")
    if rung is None:
        return Verdict("impossible", "faster than any math on this GPU (a timing bug or a kernel "
                       "that skips work)", None, headroom=headroom)
    if measured_ms < bound:
        text = (f"faster than the {rung_name(math, precision)} bound; possible only with "
                f"{label} or lower math (check your tolerance), else a timing bug or skipped "
                "work")
        return Verdict("lower math", text, rung, headroom=headroom, rung_label=label)
    if constant_output or not bound:
        what = (f"the output is a constant: the bound only writes it ({human_ms(bound)}, "
                "launch-free)" if bound else
                "nothing is kept, no output tensor or only empty ones: the bound is 0")
        text = f"{what}, so a % of SoL says nothing of the {human_ms(measured_ms)} measured"
        return Verdict(CONSTANT_OUTPUT if bound else NOTHING_KEPT, text, rung,
                       headroom=headroom, rung_label=label)
    as_written = as_written_by_math_ms or {}
    if not shortcut or not as_written or measured_ms >= as_written.get(math, 0.0):
        return Verdict("headroom", f"{times(headroom)} headroom", rung, headroom=headroom,
                       rung_label=label)
    written = possible_rung(as_written, measured_ms)
    text = f"possible only with an algebraic shortcut ({shortcut})"
    if written is None:
        return Verdict("shortcut", text, rung, None, headroom, label)
    written_label = rung_name(written, precision)
    text += f", or as written with {written_label} or lower math (check your tolerance)"
    return Verdict("shortcut or lower math", text, rung, written, headroom, label, written_label)
