"""Shared by the real-run tests: a tiny configuration (600 vertices, 4 one-GPU servers) they all run."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = """
name = "tiny-launch"
seed = 0

[graph]
name = "er:n=600,deg=8"

[hardware]
name = "hopgnn-4xa100-10gbe"

[model]
name = "sage"
hidden = 16
num_layers = 2

[training]
batch_size = 32
iterations = 6

[cache]
capacity = "10%"

[partition]
name = "random"

[placement]
name = "degree"

[sampling]
name = "neighbor"
fanouts = [5, 5]

[execution]
name = "{scheme}"
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.format(scheme="model-centric"))
    return path
