"""``gnnwb microbench``: a quick sweep writes a trace in the shared schema whose sizes and
bytes are what was asked, with positive times that grow with the size of a copy.

The quick run is shared by the tests (module fixture): about 10 s on two cores, most of
it the two worker processes starting (spawn imports torch in each).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from realrun.microbench import (
    BENCHMARKS,
    MicrobenchConfig,
    MicrobenchError,
    run_microbench,
)
from workbench.cli.main import main
from workbench.errors import ConfigError
from workbench.plan import Plan
from workbench.trace import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, read_trace


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[MicrobenchConfig, Path]:
    """One quick CPU run through the command line, as a user runs it."""
    out = tmp_path_factory.mktemp("microbench") / "cpu"
    assert main(["microbench", "--device", "cpu", "--quick", "--out", str(out)]) == 0
    return MicrobenchConfig.default("cpu", quick=True), out


def test_writes_one_folder_in_the_trace_schema(quick) -> None:
    cfg, out = quick
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "plan.json",
        "summary.csv",
        "trace.parquet",
    ]
    trace = read_trace(out / "trace.parquet")  # validates the schema
    plan = Plan.load(out / "plan.json")
    assert [t.id for t in plan.tasks] == list(dict.fromkeys(trace["task"]))
    spmm = next(t for t in plan.tasks if t.id.startswith("spmm."))
    assert spmm.features["edges"] == spmm.items > 0 and spmm.features["in_dim"] == cfg.feature_dim
    assert list(trace.columns[: len(REQUIRED_COLUMNS) + len(OPTIONAL_COLUMNS)]) == [
        *REQUIRED_COLUMNS,
        *OPTIONAL_COLUMNS,
    ]
    assert set(trace["benchmark"]) == set(BENCHMARKS)
    assert set(trace["executor"]) == {"real"}
    assert set(trace["run_id"]) == {"microbench-cpu"}
    meta = json.loads((out / "config.json").read_text())
    assert meta["config"]["quick"] is True and meta["environment"]["torch"] == torch.__version__
    assert any("host memcpy" in n for n in meta["notes"])  # the CPU run says what its "copies" are
    summary = pd.read_csv(out / "summary.csv")
    assert (summary["repeats"] == cfg.repeats).all()


def test_every_repeat_is_a_row(quick) -> None:
    cfg, out = quick
    trace = read_trace(out / "trace.parquet")
    per_task = trace.groupby(["benchmark", "variant", "size"])["iteration"]
    assert (per_task.nunique() == cfg.repeats).all()
    rows = trace.groupby(["benchmark", "variant", "size", "iteration"]).size()
    # one row per repeat; an all-reduce has one per worker
    assert set(rows.xs("allreduce", level="benchmark")) == {2}
    assert set(rows.drop("allreduce", level="benchmark")) == {1}
    assert set(trace["iteration"]) == set(range(cfg.repeats))


def test_sizes_and_bytes_are_what_was_asked(quick) -> None:
    cfg, out = quick
    trace = read_trace(out / "trace.parquet")
    by = {b: trace[trace["benchmark"] == b] for b in BENCHMARKS}
    for bench in ("h2d", "d2h", "d2d"):
        t = by[bench]
        assert sorted(set(t["size"])) == sorted(cfg.copy_bytes)
        assert (t["buffer_bytes"] == t["size"]).all()
        # on the CPU a "copy" is host memcpy: within one memory, so nothing crosses a wire
        assert set(t["variant"]) == {"host-memcpy"}
        assert set(t["src"]) == set(t["dst"]) == {"m0.host"} and (t["bytes"] == 0).all()
        assert set(t["phase"]) == {bench} and set(t["kind"]) == {"transfer"} and set(t["engine"]) == {"cpu"}
    g = by["gather"]
    assert sorted(set(g["size"])) == sorted(cfg.gather_rows) and (g["items"] == g["size"]).all()
    assert set(g["phase"]) == {"gather_local"} and set(g["kind"]) == {"compute"} and (g["bytes"] == 0).all()
    s = by["spmm"]
    assert sorted(set(s["size"])) == sorted(cfg.spmm_seeds)
    assert set(s["phase"]) == {"forward"} and (s["items"] > 0).all()
    a = by["allreduce"]
    assert sorted(set(a["size"])) == sorted(cfg.comm_bytes) and (a["buffer_bytes"] == a["size"]).all()
    assert set(a["device"]) == {"m0.host", "m1.host"} and set(a["worker"]) == {0, 1}
    assert (a["bytes"] == a["size"]).all()  # ring all-reduce over 2 devices: each sends 2(n-1)/n = 1 buffer
    p = by["p2p"]
    assert (p["bytes"] == p["size"]).all() and (p["buffer_bytes"] == p["size"]).all()
    assert set(zip(p["src"], p["dst"], strict=True)) == {("m0.host", "m1.host")} and set(p["engine"]) == {
        "net"
    }


def test_times_are_positive_and_ordered(quick) -> None:
    _cfg, out = quick
    trace = read_trace(out / "trace.parquet")
    assert (trace["end"] > trace["start"]).all()
    assert (trace["start"] >= trace["ready"]).all() and (trace["start"] >= 0).all()


@pytest.mark.parametrize("bench", ["h2d", "d2h", "d2d"])
def test_copy_time_grows_with_size(quick, bench: str) -> None:
    """The largest copy (16 MiB) takes longer than the smallest (4 KiB).

    Statistic: the minimum over the repeats. This machine is shared (other processes
    preempt ours in ~8 ms slices, which can put a 4 KiB copy's median at 8 ms), and such
    noise only ever adds time, so the minimum estimates the undisturbed time; it is a
    median-free check that cannot be fooled by a preempted small copy unless all its
    repeats were preempted. Margin: a factor 2, where physics gives ~100-1000 (16 MiB
    at even 100 GB/s is 160 us; 4 KiB is ~1 us plus Python's call overhead).
    """
    _cfg, out = quick
    t = read_trace(out / "trace.parquet")
    t = t[t["benchmark"] == bench].assign(seconds=lambda d: d["end"] - d["start"])
    fastest = t.groupby("size")["seconds"].min()
    assert fastest.loc[fastest.index.max()] > 2 * fastest.loc[fastest.index.min()]


def test_only_runs_what_is_asked(tmp_path: Path) -> None:
    cfg = MicrobenchConfig.default(
        "cpu", quick=True, benchmarks=("gather",), gather_rows=(10, 100), repeats=3, warmup=0, threads=1
    )
    threads = torch.get_num_threads()
    result = run_microbench(cfg, tmp_path)
    assert result.meta["environment"]["cpu_threads"] == 1 and torch.get_num_threads() == threads
    assert set(result.trace["benchmark"]) == {"gather"} and len(result.trace) == 6
    assert list(result.summary["size"]) == [10, 100]
    assert np.isfinite(result.summary["gb_per_s"]).all()


def test_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="benchmarks \\['fft'\\] unknown; allowed: h2d, d2h"):
        MicrobenchConfig.default("cpu", benchmarks=("fft",))
    with pytest.raises(ConfigError, match="repeats >= 1"):
        MicrobenchConfig.default("cpu", repeats=0)
    with pytest.raises(ConfigError, match="threads must be >= 1"):
        MicrobenchConfig.default("cpu", threads=0)
    with pytest.raises(ConfigError, match="multiples of 4"):
        MicrobenchConfig.default("cpu", comm_bytes=(6,))
    assert main(["microbench", "--only", "fft"]) == 2
    assert (
        "gnnwb microbench: error: --only 'fft': unknown benchmark 'fft'; valid: h2d"
        in capsys.readouterr().err
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_request_without_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(MicrobenchError, match="no CUDA device here"):
        run_microbench(MicrobenchConfig.default("cuda", quick=True))
    assert main(["microbench", "--device", "cuda", "--quick"]) == 2
    assert "use --device cpu" in capsys.readouterr().err


def test_a_hung_worker_is_stopped_within_the_timeout(tmp_path: Path) -> None:
    """The two worker processes run under a deadline: a sweep far too long for it ends
    with a clear error and no process left behind."""
    import multiprocessing

    cfg = MicrobenchConfig.default(
        "cpu",
        quick=True,
        benchmarks=("p2p",),
        comm_bytes=(64 * 1024 * 1024,),
        repeats=1000,  # 64 GiB in all: over 10 s even at 5 GB/s loopback
        comm_timeout_s=3.0,
    )
    began = time.monotonic()
    with pytest.raises(MicrobenchError, match=r"worker\(s\) \[0, 1\] still running after 3 s; stopped them"):
        run_microbench(cfg, tmp_path)
    assert time.monotonic() - began < 3.0 + 10.0  # the deadline, plus killing and joining
    assert multiprocessing.active_children() == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_quick_run(tmp_path: Path) -> None:
    result = run_microbench(MicrobenchConfig.default("cuda", quick=True), tmp_path)
    t = result.trace
    h2d = t[t["benchmark"] == "h2d"]
    assert set(h2d["variant"]) == {"pageable", "pinned"}
    assert set(h2d["dst"]) == {"m0.gpu0"} and (h2d["bytes"] == h2d["size"]).all()
    assert (t["end"] > t["start"]).all()


def test_an_emulated_link_measures_the_sizes_it_can_carry_in_time() -> None:
    """The README's --emulate-network --link-bandwidth 100Mbit: 23 repeats (3 warm-up, 20 timed)
    of a size cross a 100 Mbit/s link in 23 * 8 * size / 1e8 s; within 10 s means at most
    5,434,782 bytes, so the sweep keeps 4 KiB to 4 MiB and leaves out 16 and 64 MiB. Those six
    sizes total 5,592,064 bytes: 10.29 s per benchmark, 20.6 s for both; the 120 s limit stands.
    At 10 Mbit/s only 4 KiB to 256 KiB fit (1 MiB takes 19.3 s), 349,184 bytes: 6.4 s per
    benchmark, and the limit stays 120 s; at 1 Mbit/s only 4 KiB and 16 KiB (64 KiB: 12.1 s),
    20,480 bytes: 3.77 s each."""
    from realrun.microbench import KiB, MiB, MicrobenchConfig

    fast = MicrobenchConfig(emulate_network=True, link_bandwidth_bps=100e6)
    assert fast.comm_sizes() == (4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB)
    assert fast.comm_timeout() == 120.0
    slow = MicrobenchConfig(emulate_network=True, link_bandwidth_bps=10e6)
    assert slow.comm_sizes() == (4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB)
    slowest = MicrobenchConfig(emulate_network=True, link_bandwidth_bps=1e6)
    assert slowest.comm_sizes() == (4 * KiB, 16 * KiB)
    assert MicrobenchConfig().comm_sizes() == MicrobenchConfig().comm_bytes  # loopback: every size


def test_the_limit_grows_with_what_the_link_must_carry() -> None:
    """One 64 MiB size (23 repeats) kept as the smallest size at 1 Mbit/s: 23 * 8 * 67,108,864 /
    1e6 = 12,348 s per benchmark, both benchmarks 24,696 s; the limit is twice that plus 30 s."""
    from realrun.microbench import MiB, MicrobenchConfig

    config = MicrobenchConfig(emulate_network=True, link_bandwidth_bps=1e6, comm_bytes=(64 * MiB,))
    assert config.comm_sizes() == (64 * MiB,)
    assert config.comm_timeout() == pytest.approx(2 * 2 * 23 * 8 * 64 * MiB / 1e6 + 30)
