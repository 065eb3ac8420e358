"""Microbenchmarks: what calibration needs, measured on this machine, written as traces.

``gnnwb microbench --device cpu|cuda`` sweeps sizes for

============  ==========  =============================================================
benchmark     phase       what is timed
============  ==========  =============================================================
``h2d``       h2d         host -> device copy, ``pageable`` and ``pinned`` host buffers
``d2h``       d2h         device -> host copy, the same two kinds of host buffer
``d2d``       d2d         a copy within one GPU (``local``) and, with two GPUs, to the peer
``gather``    gather_local  ``index_select`` of random rows of a feature table on the device
``spmm``      forward     sparse aggregation (a sum over in-edges, :func:`realrun.layers.aggregate_sum`)
                          over a block the workbench's neighbor sampler drew from an R-MAT graph
``allreduce`` allreduce   ``torch.distributed.all_reduce`` between two worker processes
``p2p``       other       ``send`` from worker 0, ``recv`` on worker 1
============  ==========  =============================================================

Every measurement is warmed up, then repeated; every repeat is one trace row whose
``iteration`` is the repeat's index. Timing is wall clock (``time.perf_counter``)
around the operation, with ``torch.cuda.synchronize`` before and after on a GPU.
Repeats reuse the same buffers, so on a CPU whatever fits in the last-level cache is
measured cache-warm (a 1 MiB host memcpy runs at cache, not DRAM, bandwidth), as a
training loop's small, repeated copies mostly are; the largest sizes show DRAM.

The trace is built by :func:`workbench.trace.build_trace` from a small plan of the
measured tasks (one task per benchmark, variant, size and repeat), so its columns mean
what they mean in a simulated trace: memories are the hardware's node names (``m0.host``,
``m0.gpu0``), a copy within one memory has ``bytes`` 0 and its size in
``buffer_bytes``, a collective's ``bytes`` is the ring's share. Three extra columns say
what was swept: ``benchmark``, ``variant`` and ``size`` (bytes for copies and
communication, rows for ``gather``, seed vertices for ``spmm``).

On the CPU there is no device memory: ``h2d``, ``d2h`` and ``d2d`` are host memcpy
between two host buffers (variant ``host-memcpy``, ``src == dst == m0.host``, engine
``cpu``), and pinned memory does not exist (nothing is recorded for it). The two
communicating workers are two processes on this machine talking gloo over 127.0.0.1;
their memories are named ``m0.host`` and ``m1.host``, as two machines' hosts would be,
since loopback TCP is what a two-machine run's traffic goes through here. On a GPU
with a peer GPU the workers use NCCL between ``m0.gpu0`` and ``m0.gpu1``; with a single
GPU, NCCL cannot pair two processes on it, so they use gloo on host memory and the
run's ``config.json`` says so.

With ``emulate_network`` (``--emulate-network --link-bandwidth 100Mbit``) the two
workers sit in network namespaces of their own, joined through a bridge by veth links
that tc shapes to the given rate (:mod:`realrun.network`; gloo, also on a GPU), and
``config.json``'s ``network`` describes the links (no latency is added: tc netem is
missing on these machines). The namespaces are removed when the benchmark ends.

A run writes one folder: ``trace.parquet``, ``plan.json`` (the measured tasks, whose
``features`` — rows, edges, widths, FLOPs — a cost-model fit joins to the trace by
``task``), ``summary.csv`` (per benchmark, variant and size: median, min and max
seconds, bandwidth) and ``config.json`` (the configuration, the library versions, the
device and the notes above that apply).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from realrun.processes import worker_context, worker_process
from workbench import validate
from workbench.errors import ConfigError, WorkbenchError
from workbench.model import DTYPE_BYTES, INDEX_BYTES
from workbench.plan import Plan, Task
from workbench.trace import TraceRows, build_trace, write_trace

BENCHMARKS = ("h2d", "d2h", "d2d", "gather", "spmm", "allreduce", "p2p")
DEVICES = ("cpu", "cuda")
HOST, PEER_HOST = "m0.host", "m1.host"
KiB, MiB = 1024, 1024 * 1024
# Over an emulated link, the longest the repeats of one size may take (see comm_sizes).
LINK_SECONDS_PER_SIZE = 10.0


class MicrobenchError(WorkbenchError):
    """A microbenchmark that cannot run here, or a worker process that failed or hung."""


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class MicrobenchConfig:
    """What to measure; :meth:`default` gives the sweep for a device, quick or not."""

    device: str = field(default="cpu", metadata=_help("cpu or cuda"))
    benchmarks: tuple[str, ...] = field(default=BENCHMARKS, metadata=_help("which benchmarks to run"))
    warmup: int = field(default=3, metadata=_help("untimed runs before the timed repeats"))
    repeats: int = field(default=20, metadata=_help("timed repeats per size (one trace row each)"))
    copy_bytes: tuple[int, ...] = field(
        default=tuple(4**k * KiB for k in range(10)),
        metadata=_help("sizes of h2d, d2h and d2d copies (bytes)"),
    )
    gather_rows: tuple[int, ...] = field(
        default=tuple(4**k * 1000 for k in range(6)), metadata=_help("rows gathered per index_select")
    )
    gather_table_rows: int = field(default=200_000, metadata=_help("rows of the feature table gathered from"))
    feature_dim: int = field(default=128, metadata=_help("feature width (float32) of gather and spmm"))
    spmm_seeds: tuple[int, ...] = field(
        default=(256, 1024, 4096, 16384), metadata=_help("seed vertices of each sampled block")
    )
    spmm_fanout: int = field(default=10, metadata=_help("neighbors sampled per seed"))
    spmm_graph: tuple[int, int] = field(
        default=(200_000, 4_000_000), metadata=_help("vertices and edges of the R-MAT graph sampled from")
    )
    comm_bytes: tuple[int, ...] = field(
        default=tuple(4**k * 4 * KiB for k in range(8)), metadata=_help("sizes of all-reduce and p2p (bytes)")
    )
    comm_timeout_s: float = field(
        default=120.0, metadata=_help("seconds the two worker processes may take before they are stopped")
    )
    seed: int = field(default=0, metadata=_help("seed of the random indices, features and sampled blocks"))
    threads: int | None = field(
        default=None,
        metadata=_help(
            "torch CPU threads during the run (default: torch's own); 1 keeps a multi-threaded copy "
            "from waiting for a core another process holds"
        ),
    )
    quick: bool = field(default=False, metadata=_help("the small sweep (what the tests run)"))
    emulate_network: bool = field(
        default=False,
        metadata=_help(
            "run all-reduce and p2p between two network namespaces joined by tc-shaped veth links "
            "(realrun.network; root on Linux)"
        ),
    )
    link_bandwidth_bps: float | None = field(
        default=None, metadata=_help("each emulated link's rate in bits/s (needed with emulate_network)")
    )

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(f"microbench device {self.device!r} unknown; allowed: {', '.join(DEVICES)}")
        unknown = [b for b in self.benchmarks if b not in BENCHMARKS]
        if unknown or not self.benchmarks:
            raise ConfigError(
                f"microbench benchmarks {unknown or '(none)'} unknown; allowed: {', '.join(BENCHMARKS)}"
            )
        if self.warmup < 0 or self.repeats < 1:
            raise ConfigError(
                f"microbench needs warmup >= 0 and repeats >= 1, got {self.warmup}, {self.repeats}"
            )
        for name in ("copy_bytes", "gather_rows", "spmm_seeds", "comm_bytes"):
            values = getattr(self, name)
            if not values or min(values) < 1:
                raise ConfigError(f"microbench {name} must be positive sizes, got {list(values)}")
        if any(b % DTYPE_BYTES for b in self.comm_bytes):
            raise ConfigError(f"microbench comm_bytes must be multiples of {DTYPE_BYTES} (float32 buffers)")
        if max(self.spmm_seeds) > self.spmm_graph[0]:
            raise ConfigError(
                f"microbench spmm_seeds {list(self.spmm_seeds)} exceed the graph's {self.spmm_graph[0]} vertices"
            )
        if min(self.gather_table_rows, self.feature_dim, self.spmm_fanout, *self.spmm_graph) < 1:
            raise ConfigError("microbench table rows, feature width, fanout and graph size must be >= 1")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"microbench threads must be >= 1, got {self.threads}")
        if not self.comm_timeout_s > 0:
            raise ConfigError(f"microbench comm_timeout_s must be positive, got {self.comm_timeout_s}")
        if self.emulate_network and not (self.link_bandwidth_bps or 0) > 0:
            raise ConfigError(
                "microbench --emulate-network needs --link-bandwidth (no configuration names a cluster "
                "here), for example --link-bandwidth 100Mbit"
            )
        if self.link_bandwidth_bps is not None and not self.emulate_network:
            raise ConfigError("microbench --link-bandwidth applies only with --emulate-network")

    def comm_sizes(self) -> tuple[int, ...]:
        """The all-reduce and p2p sizes this run measures. Over an emulated link only those whose
        repeats cross it within :data:`LINK_SECONDS_PER_SIZE` (at least the smallest): the default
        sweep's 64 MiB, 23 times at 100 Mbit/s, alone needs two minutes per benchmark."""
        if not (self.emulate_network and self.link_bandwidth_bps):
            return tuple(self.comm_bytes)
        reps = self.warmup + self.repeats
        fits = tuple(
            b for b in self.comm_bytes if reps * b * 8 / self.link_bandwidth_bps <= LINK_SECONDS_PER_SIZE
        )
        return fits or (min(self.comm_bytes),)

    def comm_timeout(self) -> float:
        """Seconds the two communication workers may take: the configured limit, or longer where
        the measured sizes need it at the emulated link's rate (twice the time the bytes take)."""
        if not (self.emulate_network and self.link_bandwidth_bps):
            return self.comm_timeout_s
        reps = self.warmup + self.repeats
        benches = sum(b in ("allreduce", "p2p") for b in self.benchmarks)
        seconds = sum(reps * b * 8 / self.link_bandwidth_bps for b in self.comm_sizes()) * benches
        return max(self.comm_timeout_s, 2 * seconds + 30)

    @classmethod
    def default(cls, device: str = "cpu", quick: bool = False, **overrides: Any) -> MicrobenchConfig:
        """The full sweep, or with ``quick`` one that runs in seconds on two CPU cores."""
        if quick:
            small: dict[str, Any] = {
                "warmup": 2,
                "repeats": 5,
                "copy_bytes": (4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB),
                "gather_rows": (1000, 4000, 16000),
                "gather_table_rows": 20_000,
                "spmm_seeds": (256, 1024, 4096),
                "spmm_graph": (20_000, 400_000),
                "comm_bytes": (4 * KiB, 64 * KiB, 1 * MiB, 4 * MiB),
                "comm_timeout_s": 60.0,
                "quick": True,
            }
            overrides = {**small, **overrides}
        return cls(device=device, **overrides)


@dataclass
class MicrobenchResult:
    trace: pd.DataFrame
    summary: pd.DataFrame
    meta: dict[str, Any]
    plan: Plan
    out_dir: Path | None = None


# ---- recording -----------------------------------------------------------------------
@dataclass
class _Recorder:
    """Tasks of the synthetic plan and their measured rows, one per repeat."""

    t0: float
    tasks: list[Task] = field(default_factory=list)
    device: list[str] = field(default_factory=list)
    engine: list[str] = field(default_factory=list)
    row_task: list[int] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    extra: list[tuple[str, str, int]] = field(default_factory=list)  # per row: benchmark, variant, size
    # per (benchmark, variant, size): bytes moved and floating-point operations per repeat
    work: dict[tuple[str, str, int], tuple[float, float]] = field(default_factory=dict)

    def add(
        self,
        task: Task,
        rows: Sequence[tuple[str, float, float]],
        engine: str,
        benchmark: str,
        variant: str,
        size: int,
        moved: float = 0.0,
        flops: float = 0.0,
    ) -> None:
        """``task`` and its rows ``(device, start, end)`` in absolute ``perf_counter`` seconds;
        ``moved`` and ``flops``: the work one repeat does (for the summary's rates)."""
        self.work[(benchmark, variant, size)] = (moved, flops)
        self.tasks.append(task)
        for device, start, end in rows:
            self.row_task.append(len(self.tasks) - 1)
            self.device.append(device)
            self.engine.append(engine)
            self.start.append(start - self.t0)
            self.end.append(end - self.t0)
            self.extra.append((benchmark, variant, size))

    def plan(self, run_id: str, device_workers: dict[str, int]) -> Plan:
        """The measured tasks as a plan (no dependencies: each repeat stands alone)."""
        plan = Plan(name=run_id, tasks=list(self.tasks), workers=dict(device_workers),
                    meta={"kind": "microbench"})  # fmt: skip
        plan.validate()  # the vocabulary is the plan's
        return plan

    def trace(self, plan: Plan) -> pd.DataFrame:
        rows = TraceRows(self.row_task, self.device, self.engine, self.start, self.start, self.end)
        df = build_trace(plan.tasks, rows, plan.name, "real", plan.workers)
        extra = pd.DataFrame(self.extra, columns=["benchmark", "variant", "size"])
        return pd.concat([df, extra.astype({"size": np.int64})], axis=1)


class SyncedClock:
    """Wall-clock time with the queues of the GPUs involved drained first (a GPU runs
    asynchronously; a peer copy involves two)."""

    def __init__(self, *devices: torch.device) -> None:
        self.gpus = [d for d in devices if d.type == "cuda"]

    def now(self) -> float:
        for d in self.gpus:
            torch.cuda.synchronize(d)
        return time.perf_counter()


def timed_repeats(
    clock: SyncedClock, op: Callable[[], Any], warmup: int, repeats: int
) -> list[tuple[float, float]]:
    """``op`` run ``warmup`` times untimed, then ``repeats`` times, each timed from and to a drained
    ``clock``: the (start, end) of each timed run."""
    for _ in range(warmup):
        op()
    clock.now()
    out = []
    for _ in range(repeats):
        start = clock.now()
        op()
        out.append((start, clock.now()))
    return out


def _task_id(benchmark: str, variant: str, size: int, rep: int) -> str:
    return f"{benchmark}.{variant}.{size}.r{rep}"


# ---- copies ---------------------------------------------------------------------------
def _copy_benchmarks(
    cfg: MicrobenchConfig, rec: _Recorder, say: Callable[[str], None], notes: list[str]
) -> None:
    cuda = cfg.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    gpu = "m0.gpu0"
    if not cuda and {"h2d", "d2h", "d2d"} & set(cfg.benchmarks):
        notes.append(
            "cpu: h2d, d2h and d2d are host memcpy between two host buffers (variant host-memcpy, "
            "src == dst == m0.host, so bytes is 0 and buffer_bytes the size); pinned memory needs CUDA "
            "and is not measured"
        )
    peers = cuda and torch.cuda.device_count() >= 2
    for bench in ("h2d", "d2h", "d2d"):
        if bench not in cfg.benchmarks:
            continue
        if not cuda:
            variants = [("host-memcpy", HOST, HOST, "cpu")]
        elif bench == "d2d":
            variants = [("local", gpu, gpu, "d2d")] + ([("peer", gpu, "m0.gpu1", "d2d")] if peers else [])
        else:
            src, dst = (HOST, gpu) if bench == "h2d" else (gpu, HOST)
            variants = [("pageable", src, dst, bench), ("pinned", src, dst, bench)]
        for variant, src, dst, engine in variants:
            for size in cfg.copy_bytes:
                a, b = _copy_buffers(bench, variant, size, dev)
                non_blocking = variant == "pinned"
                clock = SyncedClock(a.device, b.device)
                spans = timed_repeats(clock, lambda a=a, b=b, nb=non_blocking: b.copy_(a, non_blocking=nb),
                               cfg.warmup, cfg.repeats)  # fmt: skip
                row_device = dst if dst.split(".")[-1].startswith("gpu") else src
                for rep, (start, end) in enumerate(spans):
                    task = Task(
                        id=_task_id(bench, variant, size, rep), kind="transfer", phase=bench,
                        src=src, dst=dst, bytes=size, items=0, iteration=rep,
                        carries="features", label=variant,
                    )  # fmt: skip
                    rec.add(task, [(row_device, start, end)], engine, bench, variant, size, moved=size)
                del a, b
            med = np.median([e - s for s, e in _spans(rec, bench, variant, max(cfg.copy_bytes))])
            say(
                f"{bench} {variant}: {max(cfg.copy_bytes) / med / 1e9:.2f} GB/s at {max(cfg.copy_bytes) // KiB} KiB"
            )


def _spans(rec: _Recorder, bench: str, variant: str, size: int) -> list[tuple[float, float]]:
    return [
        (s, e)
        for (b, v, z), s, e in zip(rec.extra, rec.start, rec.end, strict=True)
        if (b, v, z) == (bench, variant, size)
    ]


def _copy_buffers(
    bench: str, variant: str, size: int, dev: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Source and destination of one copy: bytes (uint8), so a size is exactly what moves."""
    if dev.type == "cpu":
        return torch.ones(size, dtype=torch.uint8), torch.empty(size, dtype=torch.uint8)
    host = torch.ones(size, dtype=torch.uint8)
    if variant == "pinned":
        host = host.pin_memory()
    if bench == "h2d":
        return host, torch.empty(size, dtype=torch.uint8, device=dev)
    if bench == "d2h":
        return torch.ones(size, dtype=torch.uint8, device=dev), host
    other = torch.device("cuda", 1) if variant == "peer" else dev
    return torch.ones(size, dtype=torch.uint8, device=dev), torch.empty(size, dtype=torch.uint8, device=other)


# ---- gather and spmm ------------------------------------------------------------------
def _compute_node(cfg: MicrobenchConfig) -> tuple[torch.device, str, str]:
    if cfg.device == "cuda":
        return torch.device("cuda", 0), "m0.gpu0", "compute"
    return torch.device("cpu"), HOST, "cpu"


def _gather_benchmark(cfg: MicrobenchConfig, rec: _Recorder, say: Callable[[str], None]) -> None:
    dev, node, engine = _compute_node(cfg)
    clock = SyncedClock(dev)
    g = torch.Generator().manual_seed(cfg.seed)
    table = torch.randn(cfg.gather_table_rows, cfg.feature_dim, generator=g).to(dev)
    for rows in cfg.gather_rows:
        index = torch.randint(0, cfg.gather_table_rows, (rows,), generator=g).to(dev)
        out = torch.empty(rows, cfg.feature_dim, device=dev)
        spans = timed_repeats(
            clock, lambda i=index, o=out: torch.index_select(table, 0, i, out=o), cfg.warmup, cfg.repeats
        )
        nbytes = rows * cfg.feature_dim * DTYPE_BYTES
        features = {
            "vertices": float(rows),
            "in_dim": float(cfg.feature_dim),
            "out_dim": float(cfg.feature_dim),
            "bytes": float(2 * nbytes + rows * INDEX_BYTES),  # read rows, write them, read the index
            "table_rows": float(cfg.gather_table_rows),
        }
        for rep, (start, end) in enumerate(spans):
            task = Task(
                id=_task_id("gather", "index_select", rows, rep), kind="compute", phase="gather_local",
                device=node, items=rows, iteration=rep, features=dict(features), label="index_select",
            )  # fmt: skip
            rec.add(task, [(node, start, end)], engine, "gather", "index_select", rows, moved=nbytes)
    big = max(cfg.gather_rows)
    med = np.median([e - s for s, e in _spans(rec, "gather", "index_select", big)])
    say(f"gather: {big * cfg.feature_dim * DTYPE_BYTES / med / 1e9:.2f} GB/s gathered at {big} rows")


def _spmm_benchmark(cfg: MicrobenchConfig, rec: _Recorder, say: Callable[[str], None]) -> None:
    from realrun.layers import TensorBlock, aggregate_sum
    from workbench.graph.generators import rmat
    from workbench.strategies.sampling.neighbor import NeighborSampler

    dev, node, engine = _compute_node(cfg)
    clock = SyncedClock(dev)
    graph = rmat(cfg.spmm_graph[0], cfg.spmm_graph[1], seed=cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    sampler = NeighborSampler([cfg.spmm_fanout])
    g = torch.Generator().manual_seed(cfg.seed)
    d = cfg.feature_dim
    for seeds in cfg.spmm_seeds:
        mb = sampler.sample(graph, rng.choice(graph.num_nodes, size=seeds, replace=False), rng)
        b = mb.blocks[0]
        block = TensorBlock.from_block(b, dev)
        feat = torch.randn(b.num_src, d, generator=g).to(dev)
        block.adjacency  # noqa: B018 - built once per block, as training builds it once per minibatch
        with torch.no_grad():
            spans = timed_repeats(
                clock, lambda blk=block, x=feat: aggregate_sum(blk, x), cfg.warmup, cfg.repeats
            )
        features = {
            "vertices": float(b.num_dst),
            "src_vertices": float(b.num_src),
            "edges": float(b.num_edges),
            "in_dim": float(d),
            "out_dim": float(d),
            "flops": float(b.num_edges * d),
            "bytes": float(
                b.num_src * d * DTYPE_BYTES
                + b.num_edges * (INDEX_BYTES + d * DTYPE_BYTES)
                + b.num_dst * d * DTYPE_BYTES
            ),  # fmt: skip
        }
        for rep, (start, end) in enumerate(spans):
            task = Task(
                id=_task_id("spmm", "sum", seeds, rep), kind="compute", phase="forward", device=node,
                items=b.num_edges, iteration=rep, features=dict(features), label="spmm",
            )  # fmt: skip
            rec.add(task, [(node, start, end)], engine, "spmm", "sum", seeds, flops=features["flops"])
        med = np.median([e - s for s, e in spans])
        say(
            f"spmm: {b.num_edges} edges x {d} in {med * 1e3:.3f} ms ({b.num_edges * d / med / 1e9:.2f} GFLOP/s)"
        )


# ---- communication between two worker processes ----------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _comm_worker(rank: int, spec: dict[str, Any], out_path: str) -> None:
    """One of the two worker processes: all-reduce, then p2p, every size; spans to ``out_path``."""
    result: dict[str, Any] = {"rank": rank, "allreduce": [], "p2p": []}
    try:
        import torch.distributed as dist

        torch.set_num_threads(1)
        host = "127.0.0.1"
        if spec.get("netns"):  # the emulated network: this worker's namespace, its shaped link
            from realrun.network import enter

            enter(spec["netns"][rank])
            os.environ["GLOO_SOCKET_IFNAME"] = spec["ifname"]
            host = spec["addresses"][0]
        elif sys.platform.startswith("linux") and Path("/sys/class/net/lo").exists():
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # stay on 127.0.0.1
        backend = spec["backend"]
        dev = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group(
            backend,
            init_method=f"tcp://{host}:{spec['port']}",
            rank=rank,
            world_size=2,
            timeout=timedelta(seconds=spec["timeout"]),
            **({"device_id": dev} if dev.type == "cuda" else {}),
        )
        clock = SyncedClock(dev)

        def barrier() -> None:
            if backend == "nccl":
                dist.barrier(device_ids=[rank])
            else:
                dist.barrier()

        for bench in spec["benchmarks"]:
            for size in spec["sizes"]:
                buf = torch.ones(size // DTYPE_BYTES, dtype=torch.float32, device=dev)
                spans = []
                for rep in range(spec["warmup"] + spec["repeats"]):
                    barrier()
                    start = clock.now()
                    if bench == "allreduce":
                        dist.all_reduce(buf)
                    elif rank == 0:
                        dist.send(buf, dst=1)
                    else:
                        dist.recv(buf, src=0)
                    end = clock.now()
                    if rep >= spec["warmup"]:
                        spans.append((start, end))
                    if bench == "allreduce":
                        buf.fill_(1.0)  # keep values finite over the repeats
                result[bench].append({"size": size, "spans": spans})
        barrier()
        dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - report any failure to the parent, then exit non-zero
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
        Path(out_path).write_text(json.dumps(result))
        raise SystemExit(1) from None
    Path(out_path).write_text(json.dumps(result))


def _comm_benchmarks(
    cfg: MicrobenchConfig,
    rec: _Recorder,
    say: Callable[[str], None],
    notes: list[str],
    network_meta: dict[str, Any] | None = None,
) -> dict[str, int]:
    """All-reduce and p2p between two spawned worker processes; returns device -> worker.
    With ``cfg.emulate_network`` the two run in network namespaces joined by shaped links
    (torn down before this returns, also on a failure) and ``network_meta`` gets their
    description."""
    network_meta = {} if network_meta is None else network_meta
    benches = [b for b in ("allreduce", "p2p") if b in cfg.benchmarks]
    backend, nodes, engines = _comm_transport(cfg, notes)
    spec = {
        "backend": backend,
        "port": _free_port(),
        "timeout": cfg.comm_timeout(),
        "benchmarks": benches,
        "sizes": list(cfg.comm_sizes()),
        "warmup": cfg.warmup,
        "repeats": cfg.repeats,
    }
    results = _run_comm_workers(cfg, spec, network_meta)
    for bench in benches:
        _record_comm_bench(rec, bench, backend, nodes, engines[bench], results)
        big = max(cfg.comm_sizes())
        med = np.median([e - s for s, e in _spans(rec, bench, backend, big)])
        say(f"{bench} ({backend}): {big / med / 1e9:.3f} GB/s of buffer at {big // KiB} KiB")
    return {nodes[0]: 0, nodes[1]: 1}


def _comm_transport(cfg: MicrobenchConfig, notes: list[str]) -> tuple[str, list[str], dict[str, str]]:
    """The backend, the two workers' memories and each benchmark's engine; says which in ``notes``."""
    if cfg.emulate_network:
        from realrun.network import check_available, format_bits

        check_available()
        notes.append(
            "allreduce and p2p: two worker processes on this machine, each in its own network namespace, "
            f"gloo over veth links through a bridge, each link shaped by tc tbf to "
            f"{format_bits(cfg.link_bandwidth_bps or 0)} (see config.json's network); their memories are "
            "named m0.host and m1.host" + ("; gloo on host memory, not NCCL" if cfg.device == "cuda" else "")
        )
        left_out = sorted(set(cfg.comm_bytes) - set(cfg.comm_sizes()))
        if left_out:
            notes.append(
                f"sizes above {max(cfg.comm_sizes()) // KiB} KiB left out: their repeats would take over "
                f"{LINK_SECONDS_PER_SIZE:g} s each at the link's rate"
            )
        return "gloo", [HOST, PEER_HOST], {"allreduce": "collective", "p2p": "net"}
    if cfg.device == "cuda" and torch.cuda.device_count() >= 2:
        return "nccl", ["m0.gpu0", "m0.gpu1"], {"allreduce": "collective", "p2p": "d2d"}
    notes.append(
        "allreduce and p2p: two worker processes on this machine, gloo over 127.0.0.1 (loopback TCP); "
        "their memories are named m0.host and m1.host"
        + ("; NCCL needs two GPUs and this machine has one" if cfg.device == "cuda" else "")
    )
    return "gloo", [HOST, PEER_HOST], {"allreduce": "collective", "p2p": "net"}


def _run_comm_workers(
    cfg: MicrobenchConfig, spec: dict[str, Any], network_meta: dict[str, Any]
) -> list[dict]:
    """Spawn the two workers (in an emulated network when asked), wait for them within the
    timeout, and return each one's results; a hung or failed worker is an error."""
    ctx = worker_context()
    network: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if cfg.emulate_network:
        from realrun.network import emulated_network

        network = emulated_network(2, cfg.link_bandwidth_bps or 0)
    with tempfile.TemporaryDirectory(prefix="gnnwb-microbench-") as tmp, network as net:
        if net is not None:
            spec.update(netns=list(net.worker_ns), addresses=list(net.addresses), ifname=net.ifname)
            network_meta.update(net.metadata())
        paths = [str(Path(tmp) / f"rank{r}.json") for r in range(2)]
        procs = [worker_process(ctx, _comm_worker, (r, spec, paths[r]), daemon=True) for r in range(2)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + cfg.comm_timeout()
        try:
            for p in procs:
                p.join(max(0.0, deadline - time.monotonic()))
        finally:
            hung = [r for r, p in enumerate(procs) if p.is_alive()]
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join(5)
        if hung:
            raise MicrobenchError(
                f"communication benchmark: worker(s) {hung} still running after {cfg.comm_timeout():g} s; "
                "stopped them (raise --timeout on a slow machine)"
            )
        results = []
        for r, p in enumerate(procs):
            body = json.loads(Path(paths[r]).read_text()) if Path(paths[r]).exists() else {}
            if p.exitcode != 0 or "error" in body:
                why = body.get("error", f"exit code {p.exitcode}")
                raise MicrobenchError(f"communication benchmark: worker {r} failed: {why}")
            results.append(body)
    return results


def _record_comm_bench(
    rec: _Recorder, bench: str, backend: str, nodes: list[str], engine: str, results: list[dict]
) -> None:
    """One task and its trace rows per size and repeat of ``bench``, from both workers' spans."""
    for entry0, entry1 in zip(results[0][bench], results[1][bench], strict=True):
        size = entry0["size"]
        for rep, (s0, s1) in enumerate(zip(entry0["spans"], entry1["spans"], strict=True)):
            tid = _task_id(bench, backend, size, rep)
            if bench == "allreduce":
                task = Task(
                    id=tid, kind="collective", phase="allreduce", op="allreduce", devices=list(nodes),
                    bytes=size, items=size // DTYPE_BYTES, iteration=rep, carries="gradients",
                )  # fmt: skip
                rows = [(nodes[0], *s0), (nodes[1], *s1)]
            else:  # the transfer runs from the sender's start to the receiver's end
                task = Task(
                    id=tid, kind="transfer", phase="other", src=nodes[0], dst=nodes[1], bytes=size,
                    items=size // DTYPE_BYTES, iteration=rep, carries="features", label="p2p",
                )  # fmt: skip
                start = min(s0[0], s1[0])
                rows = [(nodes[1] if backend == "nccl" else nodes[0], start, max(s1[1], start))]
            rec.add(task, rows, engine, bench, backend, size, moved=size)


# ---- the run -------------------------------------------------------------------------------
def environment(device: str) -> dict[str, Any]:
    """Library versions and the machine, for the run's config.json."""
    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_threads": torch.get_num_threads(),  # torch's, during the run
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
    }
    if device == "cuda" and torch.cuda.is_available():
        env["cuda"] = torch.version.cuda
        env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        try:
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - a build without NCCL
            env["nccl"] = None
        env["driver"] = _nvidia_driver()
    return env


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _nvidia_driver() -> str | None:
    try:
        return Path("/proc/driver/nvidia/version").read_text().splitlines()[0].strip()
    except OSError:
        return None


def default_out_dir(device: str) -> Path:
    return Path("reports") / "microbench" / device


def run_microbench(
    cfg: MicrobenchConfig,
    out_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> MicrobenchResult:
    """Run the configured benchmarks; write the run's folder when ``out_dir`` is given."""
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise MicrobenchError(
            f"--device cuda: no CUDA device here (torch {torch.__version__}, "
            f"torch.cuda.is_available() is False); use --device cpu"
        )
    if out_dir is not None:  # before any measuring: a file in the way would fail only at the end
        validate.writable_folder(out_dir, "microbenchmark output folder")
    began = time.perf_counter()

    def say(message: str) -> None:
        if progress is not None:
            progress(f"[{time.perf_counter() - began:6.1f} s] {message}")

    notes: list[str] = []
    network_meta: dict[str, Any] = {}
    rec = _Recorder(t0=began)
    threads_before = torch.get_num_threads()
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    try:
        env = environment(cfg.device)
        _copy_benchmarks(cfg, rec, say, notes)
        if "gather" in cfg.benchmarks:
            _gather_benchmark(cfg, rec, say)
        if "spmm" in cfg.benchmarks:
            _spmm_benchmark(cfg, rec, say)
        workers = {"m0.gpu0": 0} if cfg.device == "cuda" else {HOST: 0}
        if {"allreduce", "p2p"} & set(cfg.benchmarks):
            workers.update(_comm_benchmarks(cfg, rec, say, notes, network_meta))
    finally:
        torch.set_num_threads(threads_before)
    run_id = f"microbench-{cfg.device}"
    plan = rec.plan(run_id, workers)
    trace = rec.trace(plan)
    summary = summarize(trace, rec.work)
    meta = {
        "run_id": run_id,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
        "environment": env,
        "notes": notes,
        "timing": "wall clock (perf_counter) around each operation; torch.cuda.synchronize before and "
        "after on a GPU; warm-up runs untimed; every timed repeat is a row, iteration = repeat index; "
        "the communicating workers run torch with one thread each",
        "seconds": round(time.perf_counter() - began, 3),
    }
    if network_meta:
        meta["network"] = network_meta
    result = MicrobenchResult(trace, summary, meta, plan)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_trace(trace, out / "trace.parquet")
        plan.save(out / "plan.json")
        summary.to_csv(out / "summary.csv", index=False)
        (out / "config.json").write_text(json.dumps(meta, indent=2) + "\n")
        result.out_dir = out
    return result


def summarize(trace: pd.DataFrame, work: dict[tuple[str, str, int], tuple[float, float]]) -> pd.DataFrame:
    """Per benchmark, variant and size: repeats, median / min / max seconds, and rates over
    the median: ``gb_per_s`` (the buffer for copies and communication, the gathered rows for
    ``gather``) and ``gflop_per_s`` (``spmm``: one multiply-add per edge and feature). A
    collective's time is its slower worker's."""
    df = (
        trace.assign(seconds=trace["end"] - trace["start"])
        .groupby(["benchmark", "variant", "size", "iteration"], sort=False)
        .agg(phase=("phase", "first"), seconds=("seconds", "max"), buffer_bytes=("buffer_bytes", "first"))
        .reset_index()
    )
    out = (
        df.groupby(["benchmark", "variant", "size"], sort=False)
        .agg(
            phase=("phase", "first"),
            repeats=("seconds", "size"),
            median_s=("seconds", "median"),
            min_s=("seconds", "min"),
            max_s=("seconds", "max"),
            buffer_bytes=("buffer_bytes", "first"),
        )
        .reset_index()
    )
    keys = list(zip(out["benchmark"], out["variant"], out["size"], strict=True))
    moved = np.array([work.get(k, (0.0, 0.0))[0] for k in keys])
    flops = np.array([work.get(k, (0.0, 0.0))[1] for k in keys])
    out["gb_per_s"] = np.where(moved > 0, moved / out["median_s"] / 1e9, np.nan)
    out["gflop_per_s"] = np.where(flops > 0, flops / out["median_s"] / 1e9, np.nan)
    return out


def summary_lines(summary: pd.DataFrame) -> list[str]:
    """The summary as aligned text, for the command line."""
    lines = [
        f"{'benchmark':<10} {'variant':<12} {'size':>10} {'median (ms)':>12} {'min (ms)':>10} {'GB/s':>8} {'GFLOP/s':>8}"
    ]
    for r in summary.itertuples(index=False):
        unit = {"gather": " rows", "spmm": " seeds"}.get(r.benchmark, " B")
        gb = "" if np.isnan(r.gb_per_s) else f"{r.gb_per_s:.3f}"
        gf = "" if np.isnan(r.gflop_per_s) else f"{r.gflop_per_s:.3f}"
        lines.append(
            f"{r.benchmark:<10} {r.variant:<12} {str(r.size) + unit:>10} {r.median_s * 1e3:>12.4f} "
            f"{r.min_s * 1e3:>10.4f} {gb:>8} {gf:>8}"
        )
    return lines
