"""The TOML writer: what it writes reads back equal, so a run folder's config.toml is the
configuration the run executed, not an approximation of it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from workbench.config import load_config
from workbench.tomlfile import toml_text

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "examples" / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_example_configuration_round_trips(path: Path, tmp_path: Path) -> None:
    config = load_config(path)
    written = tmp_path / path.name
    written.write_text(toml_text(config.to_dict()))
    assert load_config(written) == config


def test_values_toml_quotes_or_nests_read_back_equal() -> None:
    data = {
        "top": 1,
        "odd key": True,
        "text": 'a "quoted" \\ back\tslash\n\x7f é',
        "floats": [2.5e-7, 1e16, -0.0, 3.0],
        "tables": [{"x": 1, "y": [1, 2]}],
        "skipped": None,
        "section": {"n": -3, "deeper": {"m": "z"}, "empty": {}},
        "only_tables": {"inner": {"k": 1}},
    }
    expected = {k: v for k, v in data.items() if v is not None}
    assert tomllib.loads(toml_text(data)) == expected


def test_a_value_toml_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="TOML has no value"):
        toml_text({"x": float("nan")})
    with pytest.raises(TypeError, match="no TOML form for a set"):
        toml_text({"x": {1, 2}})
