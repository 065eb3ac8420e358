"""Registry and run configuration: resolution, validation, and errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.config import config_from_dict, describe_config, load_config
from workbench.errors import ConfigError, UnknownNameError
from workbench.registry import Registry

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "configs"


def test_registry_resolves_and_lists_valid_names() -> None:
    reg: Registry = Registry("toy")

    @reg.register("alpha")
    class Alpha:
        """The first toy strategy."""

        def __init__(self, k: int = 1) -> None:
            self.k = k

    assert reg.create("alpha", k=3).k == 3
    assert reg.describe("alpha") == "The first toy strategy."
    with pytest.raises(UnknownNameError, match="unknown toy strategy 'beta'; valid: alpha"):
        reg.get("beta")
    with pytest.raises(ConfigError, match="unknown parameter.*zeta; allowed: k"):
        reg.create("alpha", zeta=1)


def _base() -> dict:
    return {"graph": {"name": "products-like", "scale": 0.01}, "hardware": {"name": "h100-1x"}}


def test_defaults_and_round_trip() -> None:
    cfg = config_from_dict(
        {
            **_base(),
            "model": {"name": "gat", "heads": 4},
            "sampling": {"name": "neighbor", "fanouts": [10, 5]},
            "training": {"workers": 1, "optimizer": "sgd"},
            "cache": {"capacity": "10%"},
        }
    )
    assert cfg.model.heads == 4 and cfg.strategy("sampling").params["fanouts"] == [10, 5]
    assert cfg.cache.vertices(1000, 400) == 100 and cfg.training.workers == 1
    assert config_from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"graph": {"scale": -1}}, "graph.scale must be positive"),
        ({"graph": {"order": "zigzag"}}, "graph.order 'zigzag'; allowed: as-is, degree"),
        ({"model": {"name": "transformer"}}, "model.name: unknown model 'transformer'; allowed: gcn"),
        ({"model": {"hidden": "wide"}}, "model.hidden must be an integer"),
        ({"model": {"fanouts": [5]}}, r"\[model\] fanouts: fanouts live in \[sampling\]"),
        (
            {"model": {"num_layers": 2}, "sampling": {"name": "neighbor", "fanouts": [5]}},
            r"\[sampling\] has 1 layers \(\[5\]\) for a 2-layer model",
        ),
        (
            {"sampling": {"name": "neighbor", "fanouts": "5,5"}},
            r"run.toml: \[sampling\] sampling strategy 'neighbor': fanouts must be a list of integers, got '5,5'",
        ),
        (
            {"sampling": {"name": "neighbor", "fanout": [5, 5]}},
            r"\[sampling\] sampling strategy 'neighbor': unknown parameter\(s\) fanout; allowed: fanouts",
        ),
        ({"training": {"optimizer": "lamb"}}, "training.optimizer: unknown optimizer 'lamb'"),
        ({"training": {"workers": 0}}, "training.workers must be >= 1"),
        ({"cache": {"capacity": "150%"}}, r"cache.capacity '150%' must lie between 0% and 100%"),
        ({"cache": {"capacity": "lots"}}, "cache.capacity"),
        ({"training": {"batch_size": 0}}, "batch_size and epochs must be >= 1"),
        ({"training": {"momentum": 0.9}}, r"unknown field\(s\) momentum; allowed: batch_size"),
        ({"colour": "red"}, r"unknown field\(s\) colour"),
        ({"partition": {"name": "nonexistent"}}, r"\[partition\] unknown partition strategy 'nonexistent'"),
    ],
)
def test_bad_values_name_the_field(patch: dict, message: str) -> None:
    data = _base()
    for k, v in patch.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data, "run.toml")


def test_missing_tables() -> None:
    with pytest.raises(ConfigError, match=r"missing table \[hardware\]"):
        config_from_dict({"graph": {"name": "x"}})
    with pytest.raises(ConfigError, match="graph: missing field 'name'"):
        config_from_dict({"graph": {}, "hardware": {"name": "h100-1x"}})


def test_help_texts_cover_every_field() -> None:
    paths = dict(describe_config())
    assert "cache.capacity" in paths and "training.batch_size" in paths and paths["seed"]
    assert "model.fanouts" not in paths  # fanouts live with the sampler


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_example_configs_load(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.name == path.stem


@pytest.mark.parametrize(
    "content, message",
    [(None, "no such run file"), (b"\xff\xfe\x00", "cannot read run file"), (b"a = [", "not valid TOML")],
)
def test_read_toml_errors_name_the_file(tmp_path, content: bytes | None, message: str) -> None:
    from workbench.tomlfile import read_toml

    path = tmp_path / "x.toml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=f"x.toml: {message}"):
        read_toml(path, "run file")
