"""attribute_gaps counts a row's idle gap on the worker whose clock timed it: a migration (the
sender's task, timed by its receiver) on the receiver's timeline, not the sender's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.calibrate.fidelity import phase_busy
from sim.calibrate.sources import attribute_gaps, timing_worker


def late_receiver() -> pd.DataFrame:
    """Worker 0 computes until 1.0 and sends its model to worker 1, which computes until 2.9 and
    reads a feature, then takes the model from 3.0 to 3.1 (its row; the task is worker 0's) and
    computes with it. Worker 0 is idle from 1.0 on: the model waited for a busy receiver."""
    return pd.DataFrame(
        {
            "run_id": "r",
            "worker": [0, 1, 1, 0, 1],
            "device": ["g0", "g1", "g1", "g1", "g1"],
            "kind": ["compute", "compute", "transfer", "transfer", "compute"],
            "phase": ["forward", "forward", "h2d", "migrate", "forward"],
            "src": ["", "", "h1", "g0", ""],
            "dst": ["", "", "g1", "g1", ""],
            "ready": [0.0, 0.0, 2.0, 1.0, 3.1],
            "start": [0.0, 0.0, 2.95, 3.0, 3.2],
            "end": [1.0, 2.9, 2.98, 3.1, 3.5],
        }
    )  # fmt: skip


def test_a_migrations_gap_is_the_receivers_not_the_senders_idle_time() -> None:
    trace = late_receiver()
    assert timing_worker(trace).tolist() == [0, 1, 1, 1, 1]
    out = attribute_gaps(trace)
    # The read's 0.05 s gap after the receiver's forward is its dispatch, as before; the migration
    # follows the read on the receiver (0.02 s gap), the next forward the migration (its ready).
    assert out["start"].tolist() == pytest.approx([0.0, 0.0, 2.9, 2.98, 3.1])
    busy = phase_busy(trace)
    assert busy["migrate"] == pytest.approx(0.12)  # on the sender's timeline: 2.1 s, from 1.0
    assert busy["forward"] == pytest.approx(1.0 + 2.9 + 0.4)


def test_rows_of_one_worker_and_undetermined_destinations_keep_their_worker() -> None:
    trace = late_receiver()
    # A host two workers share drives no one worker: the transfer stays its owner's.
    shared = trace.assign(device=["g0", "g1", "g1", "h", "h"], dst=["", "", "g1", "h", ""])
    shared.loc[0, "device"] = "h"
    assert timing_worker(shared).tolist() == [0, 1, 1, 0, 1]
    # A trace without kind or dst (an old or hand-made one): every row its worker's, as before.
    plain = trace.drop(columns=["kind", "src", "dst"])
    assert np.array_equal(timing_worker(plain), plain["worker"].to_numpy())
    assert attribute_gaps(plain)["start"].tolist() == pytest.approx([0.0, 0.0, 2.9, 1.0, 3.1])
