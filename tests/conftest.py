"""Shared fixtures. Sub-folders keep their own conftest.py for topic fixtures."""

from __future__ import annotations

import os

# Tests share a 2-core machine; keep BLAS and torch from oversubscribing it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Property tests draw the same examples on every run unless GNNWB_FUZZ_RANDOM=1: a submission's
# CI must not pass or fail by the luck of a draw. Hunting for new failures is what the slow runs
# (10,000 examples each) and GNNWB_FUZZ_RANDOM=1 are for.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("workbench", derandomize=os.environ.get("GNNWB_FUZZ_RANDOM") != "1")
_hypothesis_settings.load_profile("workbench")
