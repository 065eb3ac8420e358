"""Bad dataset specs, seeds, scales, graph files and output paths: one line naming what and where."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.errors import ConfigError, GraphFormatError
from workbench.graph import io, specs
from workbench.graph.datasets import load_dataset


def _one_line_error(capsys, argv: list[str], message: str) -> str:
    """Run ``gnnwb argv`` in-process; it must exit 2 with ``message`` on one stderr line."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "spec, message",
    [
        ("er:n=1000,deg=-1", "er:n=1000,deg=-1: deg must be a number >= 0, got -1"),
        ("er:n=0,deg=3", "er:n=0,deg=3: n must be an integer >= 2, got 0"),
        ("er:n=1,deg=3", "n must be an integer >= 2, got 1"),
        ("rmat:n=-5", "rmat:n=-5: n must be an integer >= 2, got -5"),
        ("rmat:n=0", "rmat:n=0: n must be an integer >= 2, got 0"),
        ("rmat:n=-5,m=10", "n must be an integer >= 2, got -5"),
        ("rmat:n=0,m=10", "n must be an integer >= 2, got 0"),
        ("rmat:n=1.5,m=10", "n must be an integer >= 2, got 1.5"),
        ("sbm:n=-1,blocks=2,deg=3", "sbm:n=-1,blocks=2,deg=3: n must be an integer >= 2, got -1"),
        ("er:n=nan,deg=3", "n must be an integer >= 2, got nan"),
        ("er:n=inf,deg=3", "n must be an integer >= 2, got inf"),
        ("er:n=100,deg=nan", "deg must be a number >= 0, got nan"),
        ("er:n=100,deg=inf", "deg must be a number >= 0, got inf"),
        ("er:n=100,deg=1e400", "deg must be a number >= 0, got 1e400"),
        ("er:n=100,deg=true", "deg='true' is not a number"),
        ("er:n=100,deg=", "deg='' is not a number"),
        ("er:n=100,deg=200", "deg must be at most n-1 = 99"),
        ("er:n=100,deg=2,n=5", "n is given twice"),
        ("rmat:n=100,m=-2", "m must be an integer >= 0, got -2"),
        ("rmat:n=100,m=201", "m must be even"),
        ("rmat:n=100,m=99999999999999999999", "m must be an integer >= 0, got 99999999999999999999"),
        ("rmat:n=100,m=3000", "denser than a quarter"),
        ("rmat:n=100,m=200,a=0", "a must be a number > 0 and <= 1, got 0"),
        ("rmat:n=100,m=200,a=0.5,b=0.3,c=0.3", "a + b + c must be below 1"),
        ("rmat:n=100,m=200,p_in=1.5", "p_in must be a number in [0, 1], got 1.5"),
        ("rmat:n=100,m=200,connect=2", "connect must be an integer in [0, 1], got 2"),
        ("rmat:n=100,m=200,communities=-1", "communities must be an integer >= 0, got -1"),
        ("rmat:n=100,m=200,communities=500", "communities=500 is more than the 100 vertices"),
        ("sbm:n=100,blocks=0,deg=3", "blocks must be an integer >= 1, got 0"),
        ("sbm:n=100,blocks=200,deg=3", "blocks=200 is more than the 100 vertices"),
        ("sbm:n=100,blocks=2,deg=3,exponent=2", "exponent must be a number > 2, got 2"),
        ("sbm:n=100,blocks=2,deg=3,concentration=0", "concentration must be a number > 0, got 0"),
        ("sbm:n=100,blocks=2,deg=30", "denser than a quarter"),
        ("er:n=100,deg=3,classes=0", "classes must be an integer >= 1, got 0"),
        ("er:n=100,deg=3,feat=-1", "feat must be an integer >= 0, got -1"),
        ("er:n=100,deg=3,noise=2", "noise must be a number in [0, 1], got 2"),
        ("er:n=100,deg=3,train=0.8,val=0.3", "train + val + test must be at most 1"),
        ("rmat:n=99999999999,m=2", "at most 3037000499 are possible"),
    ],
)
def test_bad_spec_is_one_line_naming_the_key(spec: str, message: str, capsys) -> None:
    with pytest.raises(ConfigError) as exc:
        load_dataset(spec, cache=False)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    _one_line_error(capsys, ["datasets", "show", spec, "--no-cache"], message)


def test_a_size_too_large_to_allocate_is_refused_before_generating(monkeypatch) -> None:
    # 3e9 vertices and 2e12 edges need ~100 TiB: refused with the sizes, nothing allocated.
    with pytest.raises(
        ConfigError, match=r"3,000,000,000 vertices and 2,000,000,000,000 stored edges need about"
    ):
        load_dataset("rmat:n=3000000000,m=2000000000000", cache=False)
    # The same check against a small machine: a graph of a few MB on a machine with 1 MB free.
    monkeypatch.setattr(specs, "available_memory", lambda: 2**20)
    with pytest.raises(ConfigError, match=r"of memory to generate .* only 0.0 GiB is available"):
        load_dataset("er:n=20000,deg=8", cache=False)


def test_a_graph_whose_cache_file_would_not_fit_the_disk_is_refused_before_generating(
    tmp_path, monkeypatch
) -> None:
    # er n=20000 deg=8: 160,000 stored edges as int32 (640,000 bytes) + indptr and per-vertex arrays
    # (20,001 * 8 + 20,000 * 19 bytes) = 1,180,008 bytes, against 1,000,000 free.
    assert specs.cache_file_bytes(20_000, 160_000) == 640_000 + 20_001 * 8 + 20_000 * 19
    monkeypatch.setattr(specs, "free_disk", lambda folder: 1_000_000)
    with pytest.raises(
        ConfigError, match=r"in the graph cache \(.*\), but only 0.0 GiB is free there; set GNNWB_CACHE"
    ):
        load_dataset("er:n=20000,deg=8", cache_dir=tmp_path)
    assert not list(tmp_path.rglob("*.npz"))
    load_dataset("er:n=20000,deg=8", cache=False)  # nothing written: no disk needed
    monkeypatch.setattr(specs, "free_disk", lambda folder: 1_300_000)
    assert load_dataset("er:n=20000,deg=8", cache_dir=tmp_path).num_nodes == 20_000


def test_free_disk_reads_the_nearest_existing_folder(tmp_path) -> None:
    assert specs.free_disk(tmp_path / "not" / "yet") == specs.free_disk(tmp_path) > 0


def test_integral_exponent_notation_is_the_integer(tmp_path) -> None:
    g = load_dataset("er:n=1e3,deg=4", cache_dir=tmp_path)
    assert g.num_nodes == 1000


def test_scale_that_leaves_too_few_vertices_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"n=10 at scale 0.01 leaves 0 vertices; a graph needs 2"):
        load_dataset("er:n=10,deg=2", scale=0.01, cache=False)


def test_scaled_odd_edge_count_rounds_to_even(tmp_path) -> None:
    g = load_dataset("rmat:n=1000,m=2000", scale=0.5005, cache_dir=tmp_path)
    assert g.num_edges % 2 == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--graph-seed", "-1"], "--graph-seed must be at least 0, got '-1'"),
        (["--seed", "-1"], "--graph-seed must be at least 0, got '-1'"),
        (["--scale", "nan"], "--scale must be a finite number, got 'nan'"),
        (["--scale", "inf"], "--scale must be a finite number, got 'inf'"),
        (["--scale", "-inf"], "--scale must be a finite number, got '-inf'"),
        (["--scale", "0"], "--scale must be positive, got '0'"),
        (["--scale", "-2"], "--scale must be positive, got '-2'"),
        (["--degree-scale", "nan"], "--degree-scale must be a finite number, got 'nan'"),
    ],
)
def test_bad_seed_and_scale_name_the_option(argv: list[str], message: str, capsys) -> None:
    _one_line_error(capsys, ["datasets", "show", "products-like", "--no-cache", *argv], message)


def test_negative_graph_seed_names_graph_seed() -> None:
    # `--graph --graph-seed` commands pass the seed on as load_dataset's default seed_name says.
    with pytest.raises(ConfigError, match=r"^--graph-seed must be at least 0, got -1$"):
        load_dataset("er:n=100,deg=3", seed=-1, cache=False)
    with pytest.raises(ConfigError, match=r"--graph-seed must be at most 9223372036854775807"):
        load_dataset("er:n=100,deg=3", seed=2**64, cache=False)
    with pytest.raises(ConfigError, match=r"--graph-seed must be an integer, got True"):
        load_dataset("er:n=100,deg=3", seed=True, cache=False)


def test_huge_preset_scale_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"products-like at scale 1e\+300 .* at most 3037000499 vertices"):
        load_dataset("products-like", scale=1e300, cache=False)


# ---- graph recipe files -----------------------------------------------------------
@pytest.mark.parametrize(
    "text, message",
    [
        ('generator = "er"\nn = 100\ndeg = 3\nseed = -1', "seed must be at least 0, got -1"),
        ('generator = "er"\nn = 100\ndeg = 3\nseed = 1.5', "seed must be an integer, got 1.5"),
        ('generator = "er"\nn = 100\ndeg = 3\nseed = "x"', "seed must be an integer, got 'x'"),
        ('generator = "er"\nn = 100.0\ndeg = 3', "n must be an integer >= 2, got 100.0"),
        ('generator = "er"\nn = true\ndeg = 3', "n must be an integer >= 2, got True"),
        ('generator = "er"\nn = 100\ndeg = nan', "deg must be a number >= 0, got nan"),
        ('generator = "er"\nn = 100\ndeg = inf', "deg must be a number >= 0, got inf"),
        ('generator = "er"\nn = 100\ndeg = [3]', "deg must be a number >= 0, got [3]"),
        ('generator = "er"\nn = 9223372036854775807\ndeg = 3', "at most 3037000499 are possible"),
        ("graph = 3", "[graph] must be a table, got 3"),
        ("generator = 3\nn = 100\ndeg = 3", "generator must be one of rmat, sbm, er, got 3"),
        ('generator = "er"\ndescription = 3\nn = 100\ndeg = 3', "description must be a string, got 3"),
    ],
)
def test_bad_recipe_files(text: str, message: str, tmp_path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_dataset(str(path), cache=False)
    assert message in str(exc.value) and str(path) in str(exc.value)


def test_recipe_file_flag_takes_true(tmp_path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('generator = "rmat"\nn = 500\nm = 2000\nconnect = true\nseed = 3')
    assert load_dataset(str(path), cache_dir=tmp_path).meta["seed"] == 3


def test_recipe_path_that_is_a_folder(tmp_path) -> None:
    folder = tmp_path / "g.toml"
    folder.mkdir()
    with pytest.raises(ConfigError, match="is a folder, expected a graph description file"):
        load_dataset(str(folder), cache=False)


# ---- graph files given by path ---------------------------------------------------------
def _header(extra: dict | None = None) -> np.ndarray:
    header = {"magic": "gnnwb-csr-graph", "format_version": io.FORMAT_VERSION, **(extra or {})}
    return np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)


def _garbage(path: Path, what: str) -> Path:
    """Write a damaged graph file of kind ``what`` at ``path``."""
    if what == "empty":
        path.write_bytes(b"")
    elif what == "random":
        path.write_bytes(np.random.default_rng(0).bytes(300))
    elif what == "fake-zip":
        path.write_bytes(b"PK\x03\x04 and then nothing")
    elif what == "list-header":
        np.savez(path, header=np.frombuffer(b"[1]", dtype=np.uint8), indptr=np.zeros(2, int), indices=[])
    elif what == "float-ids":
        np.savez(path, header=_header(), indptr=np.array([0, 1.5]), indices=np.array([0.0]))
    elif what == "2d-labels":
        np.savez(
            path, header=_header(), indptr=np.zeros(2, int), indices=np.zeros(0, int), labels=np.zeros((1, 3))
        )
    elif what == "nan-weights":
        np.savez(path, header=_header(), indptr=np.array([0, 1]), indices=np.array([0]), edge_weight=[np.nan])
    elif what == "bad-header-field":
        np.savez(
            path, header=_header({"num_classes": "many"}), indptr=np.zeros(2, int), indices=np.zeros(0, int)
        )
    elif what == "bad-indptr":
        np.savez(path, header=_header(), indptr=np.array([0, 5]), indices=np.zeros(1, int))
    return path


@pytest.mark.parametrize(
    "name, what, error, message",
    [
        ("g", "empty", GraphFormatError, "unknown graph file type"),
        ("g.npz", "empty", GraphFormatError, "not a readable graph file"),
        ("g.bin", "empty", GraphFormatError, "not a DGL graph file"),
        ("g", "random", GraphFormatError, "unknown graph file type"),
        ("g.npz", "random", GraphFormatError, "not a readable graph file"),
        ("g", "fake-zip", GraphFormatError, "not a readable graph file"),
        ("g.npz", "list-header", GraphFormatError, "the header is not a table"),
        ("g.npz", "float-ids", GraphFormatError, "array indptr must be 1-D of integers, got 1-D of float64"),
        ("g.npz", "2d-labels", GraphFormatError, "array labels must be 1-D of integers, got 2-D of float64"),
        ("g.npz", "nan-weights", GraphFormatError, "array edge_weight holds NaN or infinite values"),
        (
            "g.npz",
            "bad-header-field",
            GraphFormatError,
            "header field num_classes must be an integer, got 'many'",
        ),
        ("g.npz", "bad-indptr", GraphFormatError, "indptr must start at 0 and end at the edge count"),
    ],
)
def test_damaged_graph_files(name: str, what: str, error: type, message: str, tmp_path, capsys) -> None:
    path = _garbage(tmp_path / name, what)
    with pytest.raises(error) as exc:
        load_dataset(str(path))
    assert message in str(exc.value) and str(path) in str(exc.value)
    _one_line_error(capsys, ["datasets", "show", str(path)], message)


def test_folder_where_a_graph_file_is_expected(tmp_path, capsys) -> None:
    folder = tmp_path / "g.npz"
    folder.mkdir()
    _one_line_error(capsys, ["datasets", "show", str(folder)], "not an OGB data set folder")


# ---- gnnwb datasets generate -o -------------------------------------------------------------
def test_generate_output_that_is_a_folder_is_refused_before_generating(tmp_path, capsys) -> None:
    _one_line_error(
        capsys,
        ["datasets", "generate", "er:n=100,deg=3", "--no-cache", "-o", str(tmp_path)],
        f"--out {tmp_path}: is a folder, expected a graph file to write",
    )


def test_generate_output_under_a_file_is_refused(tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _one_line_error(
        capsys,
        ["datasets", "generate", "er:n=100,deg=3", "--no-cache", "-o", str(blocker / "g.npz")],
        "is a file, so no graph file can be written under it",
    )


def test_generate_says_where_it_wrote(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["datasets", "generate", "er:n=100,deg=3", "--no-cache", "-o", "out/g.npz"]) == 0
    out = capsys.readouterr().out
    written = tmp_path / "out" / "g.npz"
    assert f"wrote {written}" in out
    assert io.load_graph(written).num_nodes == 100


def test_nan_features_in_an_ogb_folder_are_refused(tmp_path, capsys) -> None:
    raw = tmp_path / "ogbn_nan" / "raw"
    raw.mkdir(parents=True)
    feats = np.ones((3, 2), dtype=np.float32)
    feats[1, 1] = np.nan
    np.savez(
        raw / "data.npz", edge_index=np.array([[0, 1], [1, 2]]), num_nodes_list=np.array([3]), node_feat=feats
    )
    message = "node features hold NaN or infinite values (first at vertex 1, column 1)"
    with pytest.raises(GraphFormatError, match=re.escape(message)):
        load_dataset(str(tmp_path / "ogbn_nan"))
    _one_line_error(capsys, ["datasets", "show", str(tmp_path / "ogbn_nan")], message)


@pytest.mark.parametrize("scale", [[], ["--scale", "0.5"]])
def test_unknown_generator_is_named(scale: list[str], capsys) -> None:
    _one_line_error(
        capsys,
        ["datasets", "show", "ba:n=100,m=3", *scale],
        "ba:n=100,m=3: unknown generator 'ba'; generators: rmat, sbm, er",
    )


@pytest.mark.parametrize(
    "option, message",
    [
        (["--graph-seed", "-1"], "--graph-seed must be at least 0"),
        (["--graph-seed", "99999999999999999999"], "--graph-seed must be at most 9223372036854775807"),
        (["--scale", "inf"], "--scale must be a finite number"),
    ],
)
def test_graph_options_of_a_command_name_the_option(option: list[str], message: str, capsys) -> None:
    argv = ["partition", "--graph", "er:n=100,deg=3", *option, "--strategy", "metis", "--parts", "2"]
    _one_line_error(capsys, argv, message)
