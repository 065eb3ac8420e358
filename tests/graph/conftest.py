"""Graph-test fixtures: every test gets its own graph cache folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_graph_cache(tmp_path_factory, monkeypatch):
    """Never touch the user's ~/.cache/gnnwb from tests."""
    monkeypatch.setenv("GNNWB_CACHE", str(tmp_path_factory.mktemp("graph-cache")))
