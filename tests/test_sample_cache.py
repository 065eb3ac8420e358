"""The sample cache: concurrent writers of one entry never warn and never leave a partial file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from workbench import atomic, epoch
from workbench.graph.datasets import load_dataset
from workbench.registry import SAMPLERS

WRITERS = 4
ROUNDS = 40  # each writer writes the entry this many times, so the writes overlap
DESCRIBE = {"name": "neighbor", "fanouts": [4, 3]}


def _setup() -> tuple:
    graph = load_dataset("er:n=400,deg=6", cache=False)
    owner = np.zeros(graph.num_nodes, dtype=np.int64)
    batches = epoch.worker_seed_batches(graph, owner, 1, batch_size=64, seed=0)
    samplers = [SAMPLERS.create("neighbor", fanouts=[4, 3])]
    return graph, samplers, batches


# One writer process: write the epoch in the `source` entry to the shared `target` entry
# ROUNDS times, reading it back after each write, starting when the parent creates the
# "go" file. Processes (not fork: the sampler's OpenMP forbids it) that do not sample
# themselves: compiling the sampler's kernels would take each of them seconds.
_WRITER = """
import sys, time
from pathlib import Path
import numpy as np
from workbench import epoch, mapped_arrays
source, target, go, ready, mode, rounds, iterations = sys.argv[1:8]
source, target, rounds, iterations = Path(source), Path(target), int(rounds), int(iterations)
if mode == "shared":  # the old writer: one temporary name for everybody
    def shared_name(path, arrays):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        mapped_arrays.write_mapped_arrays(tmp, arrays)
        tmp.replace(path)
    epoch.write_mapped_arrays = shared_name
minibatches = epoch._load(source, iterations, 1)
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.001)
for _ in range(rounds):
    epoch._save(target, minibatches)
    if epoch._load(target, iterations, 1) is None:
        print("entry missing", file=sys.stderr)
"""


def _run_writers(cache_dir: Path, signals: Path, mode: str = "atomic") -> list[str]:
    """WRITERS processes writing the epoch's cache entry in ``cache_dir`` at once; their stderr texts."""
    graph, samplers, batches = _setup()
    epoch._LAST[:] = [None, None]
    epoch.sample_epoch(graph, samplers, batches, seed=0, describe=DESCRIBE, cache_dir=signals / "source")
    (source,) = (signals / "source").glob("*.epoch")
    target = epoch._cache_path(graph, DESCRIBE, batches, 0, cache_dir)
    go = signals / "go"
    root = Path(__file__).resolve().parents[1]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(source), str(target), str(go), str(signals / f"ready{i}")]
            + [mode, str(ROUNDS), str(len(batches))],
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        for i in range(WRITERS)
    ]
    deadline = time.monotonic() + 120
    while len(list(signals.glob("ready*"))) < WRITERS and time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break  # one died before it was ready: its stderr says why
        time.sleep(0.005)
    go.touch()
    return [proc.communicate(timeout=120)[1] for proc in procs]


def _cached_entry(cache_dir: Path) -> tuple:
    graph, samplers, batches = _setup()
    epoch._LAST[:] = [None, None]
    path = epoch._cache_path(graph, DESCRIBE, batches, 0, cache_dir)
    return path, epoch._load(path, len(batches), len(samplers)), graph, samplers, batches


def test_concurrent_writers_of_one_entry_never_warn(tmp_path) -> None:
    cache = tmp_path / "cache"
    errors = _run_writers(cache, tmp_path / "signals")
    assert errors == [""] * WRITERS, errors
    path, loaded, graph, samplers, batches = _cached_entry(cache)
    assert loaded is not None, "the cache entry is unreadable"
    fresh = epoch.sample_epoch(graph, samplers, batches, seed=0)  # no describe: sampled, not cached
    assert len(loaded) == len(fresh)
    for got, want in zip(loaded, fresh, strict=True):
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g.seeds, w.seeds)
            for gb, wb in zip(g.blocks, w.blocks, strict=True):
                assert np.array_equal(gb.edge_src, wb.edge_src) and np.array_equal(gb.src_nodes, wb.src_nodes)
    assert [p.name for p in cache.iterdir()] == [path.name], "a temporary file was left behind"


def test_a_failed_write_warns_once_and_leaves_no_temporary(tmp_path, monkeypatch, capsys) -> None:
    def half_then_full(f):
        f.write(b"half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(
        epoch, "write_mapped_arrays", lambda path, arrays: atomic.write_atomically(path, half_then_full)
    )
    graph, samplers, batches = _setup()
    epoch._LAST[:] = [None, None]
    epoch.sample_epoch(graph, samplers, batches, seed=0, describe=DESCRIBE, cache_dir=tmp_path)
    err = capsys.readouterr().err
    assert err.startswith("sample cache: could not write") and "No space left on device" in err
    assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_write_leaves_no_temporary(tmp_path, monkeypatch) -> None:
    def interrupted(f):
        f.write(b"half a file")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic.write_atomically(tmp_path / "entry", interrupted)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_shared_temporary_name_would_warn(tmp_path) -> None:
    """The check above can fail: with one shared temporary name, concurrent writers do warn."""
    errors = _run_writers(tmp_path / "cache", tmp_path / "signals", mode="shared")
    assert any("sample cache: could not write" in e for e in errors), errors


def test_sampling_another_epoch_lets_go_of_the_last_one(tmp_path) -> None:
    """While the process keeps its last epoch, that epoch's bulk outputs stay in use and the next
    epoch's are allocated afresh; sampling another epoch drops the kept one first."""
    import gc

    from workbench.strategies.sampling._common import SHARED_OUTPUTS

    graph = load_dataset("er:n=400,deg=6", cache=False)
    owner = np.zeros(graph.num_nodes, dtype=np.int64)
    samplers = [SAMPLERS.create("bulk-matrix", fanouts=[4, 3], bulk=4)]
    describe = {"name": "bulk-matrix", "fanouts": [4, 3], "bulk": 4}
    epoch._LAST[:] = [None, None]
    buffers = []
    for seed in range(3):
        batches = epoch.worker_seed_batches(graph, owner, 1, batch_size=64, seed=seed)
        sampled = epoch.sample_epoch(
            graph, samplers, batches, seed=seed, describe=describe, cache_dir=tmp_path
        )
        assert epoch._LAST[1] is sampled
        del sampled
        gc.collect()
        buffers.append(len(SHARED_OUTPUTS._buffers))
    # The first epoch fills the pool; the next ones sample into the same buffers.
    assert buffers[1] == buffers[0] and buffers[2] == buffers[0], buffers
