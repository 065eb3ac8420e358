"""The prefix estimate of an epoch, on increments worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from studies.advisor.estimate import Estimate, from_prefix, increments


def _trace(increments_s: list[float]) -> pd.DataFrame:
    """One row per iteration ending at the running sum of ``increments_s`` (plus an earlier row each)."""
    ends = np.cumsum(increments_s)
    rows = [{"iteration": i, "end": float(e)} for i, e in enumerate(ends)]
    rows += [{"iteration": i, "end": float(e) / 2} for i, e in enumerate(ends)]  # not the iteration's last
    return pd.DataFrame(rows)


def test_increments_are_the_differences_of_each_iterations_last_end() -> None:
    assert increments(_trace([5, 2, 3])).tolist() == [5, 2, 3]


def test_middle_extrapolated_first_and_last_kept() -> None:
    # middle 2, 3, 2, 3: mean 2.5; epoch of 20 = 5 + 18 * 2.5 + 1 = 51; blocks (5, 5) do not vary.
    e = from_prefix(_trace([5, 2, 3, 2, 3, 1]), 20)
    assert e.epoch_s == pytest.approx(51.0)
    assert e.half_width_s == pytest.approx(0.0)
    assert not e.exact


def test_half_width_is_students_t_over_blocks_with_the_finite_population_correction() -> None:
    # middle 1, 3, 2, 4: blocks 4 and 6 (mean 5, sd sqrt 2), k = 2 blocks of the 18 middle iterations.
    e = from_prefix(_trace([5, 1, 3, 2, 4, 1]), 20)
    assert e.epoch_s == pytest.approx(5 + 18 * 2.5 + 1)
    t_1 = 12.706204736  # Student's t, 1 degree of freedom, 97.5%
    expected = t_1 * math.sqrt(2) / math.sqrt(2) * math.sqrt(1 - 4 / 18) * 18 / 2
    assert e.half_width_s == pytest.approx(expected, rel=1e-6)


def test_one_block_has_no_width_yet_and_a_whole_epoch_is_exact() -> None:
    assert math.isnan(from_prefix(_trace([5, 2, 3, 1]), 20).half_width_s)
    whole = from_prefix(_trace([5, 2, 3, 1]), 4)
    assert whole == Estimate(11.0, 0.0, 4, 4) and whole.exact


def test_two_iterations_extrapolate_the_second_with_no_width() -> None:
    # no middle: the second increment stands for the 19 after the cold first, 5 + 19 * 2 = 43
    e = from_prefix(_trace([5, 2]), 20)
    assert e.epoch_s == pytest.approx(43.0) and math.isnan(e.half_width_s) and not e.exact


def test_too_short_a_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="nothing after the cold start"):
        from_prefix(_trace([5]), 20)
