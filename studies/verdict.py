"""One rule for every study's verdict on a paper's claim, computed from the figures.

A claim is a comparison the paper makes, written as a ratio whose side of a threshold
is the paper's direction (HopGNN / DGL epoch time above 1 means HopGNN is faster), with
the paper's figure for it where the paper gives one: a value, a range, or "up to" a value.

The rule (DESIGN.md, "one verdict rule"):

* ``not comparable``: the workbench has no figure for the claim (and the page says why);
* ``contradicted``: the direction fails at one or more measured points (a claim the paper
  makes for every setting it shows is not held by one that fails in some); figures within 0.5%
  of the threshold tie, and a tie shows no effect (it fails "above", keeps "at least");
* ``reproduced``: the direction holds at every point and the size matches the paper's:
  every figure judged for size lies inside the paper's range widened by 1.5x, or the paper
  gives no size (a claim of direction only, which the direction then reproduces whole);
* ``direction only``: the direction holds everywhere and the size does not match.

Sizes of ratios are compared on their logarithm, the effect size: "within 1.5x of 1.3x"
means an effect between log(1.3)/1.5 and 1.5 log(1.3), i.e. a speedup of 1.19x to 1.48x.
Compared plainly, a 1.02x speedup would be "within 1.5x" of the paper's 1.3x (1.3 / 1.02 <
1.5) while having almost none of its effect; a ratio of 1 is no effect at all. A claim
whose figure is "up to" a value is sized on the workbench's largest figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

SIZE_TOLERANCE = 1.5
# Two figures within 0.5% of each other tie: below what any claim here is about, above the rounding
# and the small differences of runs that make the same decisions.
TIE = 0.005


class Verdict(StrEnum):
    REPRODUCED = "reproduced"
    DIRECTION_ONLY = "direction only"
    CONTRADICTED = "contradicted"
    NOT_COMPARABLE = "not comparable"


VERDICT_ORDER = (Verdict.REPRODUCED, Verdict.DIRECTION_ONLY, Verdict.CONTRADICTED, Verdict.NOT_COMPARABLE)


@dataclass(frozen=True)
class Claim:
    """What a paper says, as a ratio and a direction.

    ``ratio`` names the workbench's figure ("HopGNN speedup over DGL"); ``direction`` is
    the paper's side of ``threshold``: ``above`` (strictly), ``at_least`` (never below)
    or ``at_most`` (never above). ``paper`` is the paper's figure as (low, high), equal
    for one value, or None where the paper states only a direction; ``up_to`` sizes the
    claim on the largest measured figure (the paper reports a maximum)."""

    statement: str
    source: str
    ratio: str
    direction: Literal["above", "at_least", "at_most"] = "above"
    threshold: float = 1.0
    paper: tuple[float, float] | None = None
    up_to: bool = False
    unit: str = "x"  # how a figure is printed: "x" for ratios, " B" for bytes

    def paper_text(self) -> str:
        if self.paper is None:
            return "direction only"
        figure = span(*self.paper, self.unit)
        return f"up to {figure}" if self.up_to else figure


def span(low: float, high: float, unit: str = "x") -> str:
    """``1.02-1.08x``, or one figure where both print the same."""
    a, b = f"{low:.3g}", f"{high:.3g}"
    return f"{a}{unit}" if a == b else f"{a}-{b}{unit}"


@dataclass(frozen=True)
class Judgement:
    """A claim, the workbench's figures for it (by label) and the verdict with its reason."""

    claim: Claim
    figures: Mapping[str, float]
    verdict: Verdict
    reason: str

    def figure_text(self) -> str:
        values = [v for v in self.figures.values() if math.isfinite(v)]
        if not values:
            return "none"
        return span(min(values), max(values), self.claim.unit)

    def line(self) -> str:
        """One line for a page: verdict, paper beside workbench, why."""
        return (
            f"Verdict: {self.verdict} (paper {self.claim.paper_text()}, {self.claim.source}; workbench "
            f"{self.figure_text()} {self.claim.ratio}). {self.reason}"
        )


def judge(claim: Claim, figures: Mapping[str, float] | Sequence[float], unavailable: str = "") -> Judgement:
    """The verdict on ``claim`` from the workbench's ``figures`` (labelled where a label helps
    the reason name the point). Non-finite figures (a point the workbench could not build)
    are left out; ``unavailable`` says why there is no figure at all."""
    labelled = dict(figures) if isinstance(figures, Mapping) else {str(i): v for i, v in enumerate(figures)}
    finite = {k: float(v) for k, v in labelled.items() if v is not None and math.isfinite(float(v))}
    if not finite:
        why = unavailable or "the workbench has no figure for it"
        return Judgement(claim, finite, Verdict.NOT_COMPARABLE, why)
    against = [k for k, v in finite.items() if not _holds(claim, v)]
    if against:
        where = ", ".join(against[:4]) + (f" and {len(against) - 4} more" if len(against) > 4 else "")
        return Judgement(
            claim,
            finite,
            Verdict.CONTRADICTED,
            f"The direction fails at {len(against)} of {len(finite)} point(s): {where}.",
        )
    if claim.paper is None:
        return Judgement(
            claim, finite, Verdict.REPRODUCED, "The paper gives a direction, which holds everywhere."
        )
    sized = {max(finite, key=finite.__getitem__): max(finite.values())} if claim.up_to else finite
    outside = [k for k, v in sized.items() if not _size_matches(claim, v)]
    if outside:
        return Judgement(
            claim,
            finite,
            Verdict.DIRECTION_ONLY,
            f"The direction holds everywhere; the size misses the paper's by more than "
            f"{SIZE_TOLERANCE:g}x in effect at {len(outside)} of {len(sized)} figure(s).",
        )
    return Judgement(
        claim,
        finite,
        Verdict.REPRODUCED,
        f"The direction holds everywhere and the size is within {SIZE_TOLERANCE:g}x of the paper's.",
    )


def _holds(claim: Claim, value: float) -> bool:
    # Within TIE of the threshold two figures tie: a tie is no effect, so it does not show an
    # "above" claim's effect, and it keeps an "at least" or "at most" claim. Without the band, a
    # tie's last digits (1.0001 in one run, 0.9988 in another) would decide the verdict.
    band = TIE * abs(claim.threshold)
    if claim.direction == "above":
        return value > claim.threshold + band
    if claim.direction == "at_least":
        return value >= claim.threshold - band
    return value <= claim.threshold + band


def _size_matches(claim: Claim, value: float) -> bool:
    assert claim.paper is not None
    low, high = claim.paper
    effect = _effect(value, claim.threshold)
    bounds = sorted((_effect(low, claim.threshold), _effect(high, claim.threshold)))
    widened = (bounds[0] / SIZE_TOLERANCE, bounds[1] * SIZE_TOLERANCE)
    if widened[0] < 0:  # a range on the other side of the threshold widens the other way
        widened = (bounds[0] * SIZE_TOLERANCE, bounds[1] / SIZE_TOLERANCE)
    return widened[0] <= effect <= widened[1]


def _effect(value: float, threshold: float) -> float:
    """A ratio's effect: its log against the threshold (0 is no effect); non-positive values
    (a count of zero against zero) are no effect."""
    if value <= 0 or threshold <= 0:
        return value - threshold
    return math.log(value / threshold)


def count(judgements: Sequence[Judgement]) -> dict[str, int]:
    """How many judgements have each verdict, in the rule's order."""
    return {str(v): sum(j.verdict == v for j in judgements) for v in VERDICT_ORDER}
