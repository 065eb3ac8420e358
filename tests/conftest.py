"""Shared fixtures. Sub-folders keep their own conftest.py for topic fixtures."""

from __future__ import annotations

import os

# Tests share a 2-core machine; keep BLAS and torch from oversubscribing it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
