"""``--emulate-network``: workers in network namespaces joined by tc-shaped veth links.

A point-to-point transfer between two workers on 100 Mbit/s links runs within 10% of
100 Mbit/s; every namespace a run creates is gone when it ends, also after a failure;
without the permission the run says why in one line and how to run without emulation.
The tests that create namespaces are skipped, with the reason, where that is not allowed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import realrun.network as network
from realrun.network import (
    EmulatedNetwork,
    NetworkEmulationUnavailable,
    check_available,
    cluster_link_bandwidth,
    emulated_network,
    namespaces,
    parse_link_bandwidth,
)
from workbench.cli.main import main
from workbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MBIT = 1e6


def _why_no_namespaces() -> str | None:
    try:
        check_available()
    except NetworkEmulationUnavailable as exc:
        return str(exc)
    name = f"gnnwb-probe-{os.getpid()}"
    proc = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"`ip netns add` fails here: {proc.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    tc = subprocess.run(["tc", "qdisc", "help"], capture_output=True, text=True)
    if "tbf" not in tc.stdout + tc.stderr and tc.returncode not in (0, 1):
        return "tc is not usable here"
    return None


WHY = _why_no_namespaces()
needs_namespaces = pytest.mark.skipif(WHY is not None, reason=f"cannot create network namespaces: {WHY}")


def ours(pid: int | None = None) -> list[str]:
    """Namespaces a run of this process (or of ``pid``) created."""
    prefix = f"gnnwb-{pid or os.getpid()}-"
    return [n for n in namespaces() if n.startswith(prefix)]


# ---- no namespaces needed ---------------------------------------------------------------------
def test_link_bandwidth_reads_bits_and_bytes() -> None:
    assert parse_link_bandwidth("100Mbit") == 100 * MBIT
    assert parse_link_bandwidth("100 Mbit/s") == 100 * MBIT
    assert parse_link_bandwidth("1Gbit") == 1000 * MBIT
    assert parse_link_bandwidth("12.5 MB/s") == 100 * MBIT
    with pytest.raises(ConfigError, match="--link-bandwidth"):
        parse_link_bandwidth("fast")
    with pytest.raises(ConfigError, match="below"):
        parse_link_bandwidth("1bit")


def test_the_default_rate_is_the_clusters_network_link() -> None:
    from workbench.hardware import load_hardware

    assert cluster_link_bandwidth(load_hardware("hopgnn-4xa100-10gbe")) == 10_000 * MBIT
    assert cluster_link_bandwidth(load_hardware("h100-1x")) is None


def test_without_root_the_run_says_why_and_how_to_run_without(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(network.os, "geteuid", lambda: 1000)
    code = main(
        ["realrun", str(config), "--workers", "2", "--emulate-network", "--link-bandwidth", "100Mbit"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "\n" not in err
    assert err.startswith("gnnwb realrun: error: --emulate-network needs root")
    assert "run without --emulate-network" in err
    code = main(["microbench", "--only", "p2p", "--emulate-network", "--link-bandwidth", "100Mbit"])
    assert code == 2 and "needs root" in capsys.readouterr().err


def test_a_namespace_that_cannot_be_created_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_run = network._run

    def refuse(*cmd: str) -> subprocess.CompletedProcess[str]:
        if cmd[:3] == ("ip", "netns", "add"):
            return subprocess.CompletedProcess(
                cmd, 1, "", "mount --make-shared /run/netns failed: Operation not permitted\n"
            )
        return real_run(*cmd)

    monkeypatch.setattr(network, "_run", refuse)
    monkeypatch.setattr(network, "check_available", lambda: None)
    with pytest.raises(NetworkEmulationUnavailable, match="cannot create network namespace") as failure:
        with emulated_network(2, 100 * MBIT):
            pass
    assert "\n" not in str(failure.value) and "run without --emulate-network" in str(failure.value)


def test_link_bandwidth_without_emulation_and_microbench_without_a_rate_are_errors(config: Path) -> None:
    from realrun.microbench import MicrobenchConfig

    assert main(["realrun", str(config), "--link-bandwidth", "100Mbit"]) == 2
    with pytest.raises(ConfigError, match="needs --link-bandwidth"):
        MicrobenchConfig.default("cpu", quick=True, emulate_network=True)


# ---- namespaces ------------------------------------------------------------------------------
@needs_namespaces
def test_everything_is_torn_down_also_after_an_error() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with emulated_network(3, 100 * MBIT) as net:
            assert isinstance(net, EmulatedNetwork)
            assert set(ours()) == {net.bridge_ns, *net.worker_ns} and len(net.worker_ns) == 3
            # each worker's link is shaped in both directions
            for r, ns in enumerate(net.worker_ns):
                qdisc = subprocess.run(
                    ["tc", "-n", ns, "qdisc", "show", "dev", "eth0"], capture_output=True, text=True
                )
                assert "tbf" in qdisc.stdout and "100Mbit" in qdisc.stdout
                port = subprocess.run(
                    ["tc", "-n", net.bridge_ns, "qdisc", "show", "dev", f"w{r}"],
                    capture_output=True,
                    text=True,
                )
                assert "tbf" in port.stdout
            raise RuntimeError("boom")
    assert ours() == []
    assert net.metadata()["latency"]["emulated"] is False


@needs_namespaces
def test_point_to_point_at_100_mbit_per_link_is_within_10_percent(tmp_path: Path) -> None:
    """8 MiB from worker 0 to worker 1 over shaped links, five times (after one untimed): the
    median rate is within 10% of 100 Mbit/s. TCP's headers take about 4.4% of each
    1514-byte frame, so the payload rate is about 95.6 Mbit/s."""
    from realrun.microbench import MicrobenchConfig, run_microbench

    size = 8 * 1024 * 1024
    cfg = MicrobenchConfig.default(
        "cpu",
        quick=True,
        benchmarks=("p2p",),
        comm_bytes=(size,),
        warmup=1,
        repeats=5,
        emulate_network=True,
        link_bandwidth_bps=100 * MBIT,
    )
    result = run_microbench(cfg, tmp_path / "mb")
    rows = result.trace[result.trace["benchmark"] == "p2p"]
    seconds = (rows["end"] - rows["start"]).to_numpy()
    rate = size * 8 / np.median(seconds)
    print(f"p2p over emulated 100 Mbit/s links: {rate / MBIT:.1f} Mbit/s (median of {len(seconds)})")
    assert abs(rate - 100 * MBIT) <= 0.10 * 100 * MBIT, f"{rate / MBIT:.1f} Mbit/s"
    meta = json.loads((tmp_path / "mb" / "config.json").read_text())
    assert meta["network"]["link_bandwidth_bps"] == 100 * MBIT
    assert meta["network"]["latency"]["emulated"] is False
    assert any("network namespace" in n for n in meta["notes"])
    assert ours() == []


@pytest.mark.slow
@needs_namespaces
def test_a_real_run_over_the_emulated_network_records_it_and_leaves_nothing(
    config: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    assert main(["realrun", str(config), "--workers", "2", "--emulate-network", "--link-bandwidth", "100Mbit",
                 "--out", str(out), "--no-eval"]) == 0  # fmt: skip
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "complete"
    assert meta["network"]["emulated"] and meta["network"]["link_bandwidth"] == "100 Mbit/s"
    assert meta["network"]["addresses"] == ["10.213.0.1", "10.213.0.2"]
    assert ours() == []


@pytest.mark.slow
@needs_namespaces
def test_a_failed_run_leaves_no_namespace(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from realrun.faults import FAULT_ENV
    from realrun.launcher import WorkerFailure, launch, prepare_real_run

    monkeypatch.setenv(FAULT_ENV, "raise:1:2")
    prepared, plan, _ = prepare_real_run(config, 2, "cpu")
    with pytest.raises(WorkerFailure, match="worker 1 raised"):
        launch(prepared, plan, config, out=tmp_path / "run", collective_timeout=30, emulate_network=True)
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["status"] == "failed" and meta["network"]["link_bandwidth"] == "10 Gbit/s"  # the preset's
    assert ours() == []


@pytest.mark.slow
@needs_namespaces
def test_a_launcher_stopped_by_sigterm_removes_its_namespaces(config: Path, tmp_path: Path) -> None:
    from realrun.faults import FAULT_ENV

    cmd = [sys.executable, "-m", "workbench.cli.main", "realrun", str(config), "--workers", "2",
           "--emulate-network", "--out", str(tmp_path / "run")]  # fmt: skip
    launcher = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, FAULT_ENV: "hang:1:2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not ours(launcher.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ours(launcher.pid), "the launcher made no namespaces"
        time.sleep(3)  # the workers are up
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(30) == 128 + signal.SIGTERM
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert ours(launcher.pid) == []


def exchange_seconds(trace_path: Path, rate_bytes: float) -> tuple[float, float]:
    """Remote fetches of the last epoch: measured seconds and the link-bound prediction, summed over
    workers and iterations. One exchange per worker and iteration (its rows from several owners
    overlap: its span counts); its prediction is the larger of what it receives and what its owner
    side sends, over the worker's own shaped link."""
    import pandas as pd

    trace = pd.read_parquet(trace_path)
    rows = trace[(trace["phase"] == "gather_remote") & (trace["epoch"] == trace["epoch"].max())]
    machine_of_host = {h: int(h.split(".")[0][1:]) for h in rows["src"].unique()}  # "m2.host" -> 2
    keys = ["iteration", "worker"]
    span = rows.groupby(keys).agg(start=("start", "min"), end=("end", "max"))
    received = rows.groupby(keys)["bytes"].sum()
    sent = rows.assign(worker=rows["src"].map(machine_of_host)).groupby(keys)["bytes"].sum()
    both = pd.concat([received.rename("in"), sent.rename("out")], axis=1).fillna(0)
    return float((span["end"] - span["start"]).sum()), float(both.max(axis=1).sum() / rate_bytes)


@pytest.mark.slow
@needs_namespaces
def test_over_shaped_links_hopgnn_saves_the_fetch_time_its_bytes_predict(tmp_path: Path) -> None:
    """4 workers, 100 Mbit/s links, the shipped SBM example as hopgnn (All) and as model-centric.

    HopGNN fetches about 0.68x model-centric's remote bytes; over links this narrow the fetch
    time follows the bytes. Each exchange also pays its protocol (three message rounds, the
    owner's gather) on 2 cores shared by 4 workers, which the byte count leaves out, so the
    times sit above the link-bound prediction and their ratio is checked within 15% of the
    bytes' ratio (measured here: 0.62 against 0.69)."""
    example = (ROOT / "examples" / "configs" / "hopgnn-sbm-real.toml").read_text()
    configs = {"hopgnn": tmp_path / "hop.toml", "model-centric": tmp_path / "mc.toml"}
    configs["hopgnn"].write_text(example)
    cut = example.rindex("[execution]")
    configs["model-centric"].write_text(example[:cut] + '[execution]\nname = "model-centric"\n')
    payload = 100 * MBIT * 1448 / 1514 / 8  # TCP payload bytes/s of a 100 Mbit/s Ethernet link
    seconds, predicted, moved = {}, {}, {}
    for scheme, config in configs.items():
        out = tmp_path / scheme
        argv = ["realrun", str(config), "--workers", "4", "--epochs", "2", "--no-eval", "--out", str(out)]
        assert main([*argv, "--emulate-network", "--link-bandwidth", "100Mbit"]) == 0
        seconds[scheme], predicted[scheme] = exchange_seconds(out / "trace.parquet", payload)
        moved[scheme] = int(last_results_row(out / "results.csv")["measured_gather_remote_bytes"])
        assert seconds[scheme] >= 0.95 * predicted[scheme]  # the links really are shaped
    byte_ratio = moved["hopgnn"] / moved["model-centric"]
    time_ratio = seconds["hopgnn"] / seconds["model-centric"]
    print(f"remote fetch over 100 Mbit/s: {seconds} s (link-bound {predicted}); bytes {moved}; "
          f"time ratio {time_ratio:.2f} vs byte ratio {byte_ratio:.2f}")  # fmt: skip
    assert byte_ratio < 0.8
    assert abs(time_ratio - byte_ratio) <= 0.15 * byte_ratio
    assert ours() == []


def last_results_row(path: Path) -> dict:
    import pandas as pd

    return pd.read_csv(path).iloc[-1].to_dict()
