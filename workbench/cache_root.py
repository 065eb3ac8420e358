"""The one folder every cache of the workbench lives under: generated graphs (``graphs/``),
sampled epochs (``samples/``), partitions, estimates and placements (``spine/``), the fidelity
study's real runs (``fidelity/``) and the hopgnn study's what-if profile (``hopgnn/``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$GNNWB_CACHE``, else ``~/.cache/gnnwb``."""
    env = os.environ.get("GNNWB_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gnnwb"
