"""``gnnwb datasets``: list, show, generate, and one-line errors for bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.graph import io


def _run(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GNNWB_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "workbench.cli.main", "datasets", *args],
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("action", [[], ["list"], ["show"], ["generate"]])
def test_help(action: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["datasets", *action, "--help"])
    assert exc.value.code == 0
    assert "usage: gnnwb datasets" in capsys.readouterr().out


def test_list_shows_presets_with_real_sizes(capsys) -> None:
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    assert "products-like" in out and "2,449,029" in out and "61,859,140" in out
    assert "papers-like" in out and "111,059,956" in out


def test_show_prints_nodes_edges_degrees_and_features(capsys) -> None:
    assert main(["datasets", "show", "products-like", "--scale", "0.002"]) == 0
    out = capsys.readouterr().out
    for expected in (
        "nodes          4,898",
        "edges",
        "degree         mean",
        "p99",
        "max",
        "features       100 dims",
    ):
        assert expected in out, expected
    assert "full size      ogbn-products: 2,449,029 nodes" in out
    assert "cache" in out


def test_generate_writes_cache_and_output(tmp_path, capsys) -> None:
    out_file = tmp_path / "g.npz"
    assert main(["datasets", "generate", "rmat:n=2000,m=20000", "--seed", "3", "-o", str(out_file)]) == 0
    text = capsys.readouterr().out
    assert "2,000 vertices, 20,000 edges" in text and "cache:" in text
    assert io.load_graph(out_file).num_edges == 20_000
    # A written file is itself a data set name.
    assert main(["datasets", "show", str(out_file)]) == 0
    assert "nodes          2,000" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "products-lke"], "unknown data set 'products-lke'"),
        (["show", "products-like", "--scale", "-2"], "scale must be positive"),
        (["generate", "rmat:n=10"], "missing m"),
        (["show", "NOT_A_GRAPH.npz"], "not a readable graph file"),
        (["show", "NOT_A_GRAPH.bin"], "not a DGL graph file"),
    ],
)
def test_bad_input_is_one_line_error(args: list[str], message: str, tmp_path) -> None:
    args = list(args)
    for i, arg in enumerate(args):
        if arg.startswith("NOT_A_GRAPH"):
            bad = tmp_path / arg
            bad.write_text("these are my notes, not a graph\n")
            args[i] = str(bad)
    r = _run(*args, cache=tmp_path / "cache")
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
