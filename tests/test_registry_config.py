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
        ({"graph": {"order": "zigzag"}}, "graph.order 'zigzag'; allowed: as-is, degree, metis"),
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
        ({"training": {"batch_size": 0}}, "training.batch_size must be >= 1, got 0"),
        ({"training": {"epochs": -1}}, "training.epochs must be >= 1, got -1"),
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


@pytest.mark.parametrize(
    "toml_text, message",
    [
        ("[graph]\nscale = nan", "run.toml: graph.scale must be a finite number, got nan"),
        ("[graph]\nscale = inf", "run.toml: graph.scale must be a finite number, got inf"),
        ("[graph]\nscale = 0.0", "run.toml: graph.scale must be positive, got 0.0"),
        ("[graph]\nscale = true", "run.toml: graph.scale must be a number or none, got True"),
        ("[graph]\nseed = -1", "run.toml: graph.seed must be at least 0, got -1"),
        ("[graph]\nname = ''", "run.toml: graph.name must not be empty"),
        (
            "[training]\nlearning_rate = inf",
            "run.toml: training.learning_rate must be a finite number, got inf",
        ),
        (
            "[training]\nlearning_rate = -nan",
            "run.toml: training.learning_rate must be a finite number, got nan",
        ),
        ("[training]\nbatch_size = true", "run.toml: training.batch_size must be an integer, got True"),
        ("[training]\nbatch_size = 1.0", "run.toml: training.batch_size must be an integer, got 1.0"),
        (
            "[training]\nbatch_size = 9223372036854775808",
            "training.batch_size must be at most 9223372036854775807",
        ),
        (
            "[training]\nbatch_size = -9223372036854775809",
            "training.batch_size must be at least -9223372036854775808",
        ),
        ("[model]\nhidden = [256]", "run.toml: model.hidden must be an integer, got [256]"),
        ("[hardware]\nmachines = 0", "run.toml: hardware.machines must be at least 1, got 0"),
        ("[cache]\ncapacity = true", "run.toml: cache.capacity must be a string or integer, got True"),
        ("[cache]\ncapacity = 'nan%'", "run.toml: cache.capacity 'nan%' must lie between 0% and 100%"),
        ("seed = -3", "run.toml: seed must be at least 0, got -3"),
        ("seed = 1e3", "run.toml: seed must be an integer, got 1000.0"),
        ("name = 3", "run.toml: name must be a string, got 3"),
        ("graph = 'products-like'", "run.toml: graph must be a table, got 'products-like'"),
        ("[[training]]\nepochs = 1", "run.toml: training must be a table, got [{'epochs': 1}]"),
        ("sampling = 'neighbor'", "run.toml: [sampling] must be a table, got 'neighbor'"),
        ("[sampling]\nname = 3", "run.toml: [sampling] name must be a string, got 3"),
        (
            "[sampling]\nname = 'neighbor'\nfanouts = []",
            "[sampling] sampler 'neighbor': fanouts needs at least one layer",
        ),
        (
            "[sampling]\nname = 'neighbor'\nfanouts = [15, 0, 5]",
            "[sampling] sampler 'neighbor': every entry of fanouts must be >= 1, got [15, 0, 5]",
        ),
        (
            "[sampling]\nname = 'neighbor'\nfanouts = [15, nan, 5]",
            "run.toml: sampling.fanouts[1] must be a finite number",
        ),
        (
            "[sampling]\nname = 'neighbor'\nfanouts = [15, true, 5]",
            "fanouts must be a list of integers, got [15, True, 5]",
        ),
        (
            "[placement]\nname = 'degree'\nalpha = nan",
            "run.toml: placement.alpha must be a finite number, got nan",
        ),
        ("[colour]\nred = 1", "run.toml: unknown field(s) colour; allowed:"),
        ("[graph]\ncolour = 1", "run.toml: graph: unknown field(s) colour; allowed: name, scale"),
    ],
)
def test_bad_config_files_name_file_table_and_key(toml_text: str, message: str, tmp_path, capsys) -> None:
    """Each document is a valid base with one table or key replaced; the error names file, table, key."""
    import tomllib

    from workbench.cli.main import main

    data = {
        "graph": {"name": "er:n=200,deg=4", "scale": 1.0},
        "hardware": {"name": "h100-1x"},
        "model": {"num_layers": 3},
    }
    for key, value in tomllib.loads(toml_text).items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key in data else value
    path = tmp_path / "run.toml"
    path.write_text(_to_toml(data))
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert message in str(exc.value).replace(str(tmp_path) + "/", "")
    assert "\n" not in str(exc.value)
    # The same through a command: one line on stderr, exit status 2.
    assert main(["plan", str(path), "-o", str(tmp_path / "plan.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "run.toml" in err, err


def _to_toml(data: dict) -> str:
    """A small TOML writer for the tests' documents (strings, numbers, booleans, lists, tables)."""
    import json
    import math

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, list):
            if v and all(isinstance(x, dict) for x in v):
                return (
                    "["
                    + ", ".join("{" + ", ".join(f"{k} = {value(y)}" for k, y in x.items()) + "}" for x in v)
                    + "]"
                )
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, str):
            return json.dumps(v)
        return repr(v)

    top = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    tables = [
        f"[{k}]\n" + "\n".join(f"{kk} = {value(vv)}" for kk, vv in v.items())
        for k, v in data.items()
        if isinstance(v, dict)
    ]
    return "\n".join(top + tables) + "\n"
