"""Shared by the real-run tests: a tiny configuration (600 vertices, 4 one-GPU servers) they all run."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = """
name = "{name}"
seed = 0

[graph]
name = "er:n=600,deg=8"

[hardware]
name = "{hardware}"

[model]
name = "sage"
hidden = 16
num_layers = 2

[training]
batch_size = 32
iterations = {iterations}

[cache]
capacity = "{capacity}"

[partition]
name = "random"

[placement]
name = "{placement}"

[sampling]
name = "neighbor"
fanouts = [5, 5]

[execution]
name = "{scheme}"
{execution}"""


def tiny_config(scheme: str = "model-centric", **values: object) -> str:
    """The tiny configuration's text: ``scheme`` with ``execution`` (more lines of its table)
    and any of ``name``, ``hardware``, ``iterations``, ``capacity``, ``placement`` overridden."""
    defaults = {
        "name": "tiny-launch",
        "hardware": "hopgnn-4xa100-10gbe",
        "iterations": 6,
        "capacity": "10%",
        "placement": "degree",
        "execution": "",
    }
    return TINY.format(scheme=scheme, **{**defaults, **values})


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(tiny_config())
    return path
