"""The study runner: a grid of run configurations, each point's result stored under its hash, then an analysis.

A :class:`Study` is a list of :class:`Point`\\ s (run configurations, quick or full
grid) plus an analysis that turns their results into plots, a table and a page. Each
point's result is a JSON file under ``reports/studies/<study>/points/<key>.json``;
``key`` hashes the point's full configuration, its measure and
:data:`RESULTS_VERSION` (bumped whenever the simulator, the plans or a measure change
what a point would produce), so:

* an interrupted study resumes where it stopped: finished points are files already;
* an unchanged point is never recomputed; a changed one gets a new key;
* a stored result from an older, incompatible version is not found under the new key
  and is computed again (a stored file whose content does not match its key, or that
  does not parse, is recomputed too, never plotted).

Points run in parallel in local processes (``jobs``), or on a Dask cluster when
``scheduler`` names one (``tcp://host:8786``); a study whose points time this machine
(``local_only``: real runs) runs them here, one at a time. Points that share a sampled epoch reuse
it through the sample cache (``workbench.epoch``). A progress bar shows points done and
the time left.

SIGINT and SIGTERM (Ctrl-C, ``kill``, a batch scheduler) stop a study cleanly
(:func:`interruptible`): the pool's workers are killed, no process is left behind, the
finished points stay stored and :class:`Interrupted` says how many and how to resume.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import ConfigError, UnknownNameError, WorkbenchError

# Bump when a change to the simulator, the schemes or a measure changes any point's result.
# 8: CPU workers as processes, exchange costs per protocol; 9: trees correct the linear model.
RESULTS_VERSION = 9


@dataclass(frozen=True)
class Point:
    """One run of a study: a run configuration (a TOML-shaped dict) and how to measure it."""

    study: str
    label: dict[str, Any]  # the grid coordinates a plot groups by (scheme, GPUs, placement, ...)
    config: dict[str, Any]
    measure: str = "sim"  # a name in studies.measures.MEASURES
    options: dict[str, Any] = field(default_factory=dict)  # the measure's own settings
    # It needs most of this machine's memory (a graph at full size): run locally after the other
    # points, one at a time, each in a fresh process. Not part of the key: it says how, not what.
    alone: bool = False

    @property
    def key(self) -> str:
        text = json.dumps(
            {"config": self.config, "measure": self.measure, "options": self.options, "v": RESULTS_VERSION},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Study:
    """A grid of points and the analysis that turns their results into a page."""

    name: str
    title: str
    paper: str  # which paper and figure it reproduces
    claim: str  # the paper's headline claim, in words
    points: Callable[[bool], list[Point]]  # full grid when True, quick when False
    analyze: Callable[[pd.DataFrame, Path], Any]  # results -> writes plots and returns a ReportPage
    # Its points time this machine (real runs): they run here, one at a time, even when a
    # Dask scheduler is given for the others.
    local_only: bool = False
    # Why quick and full mode reach different verdicts on a claim (its statement -> the reason),
    # shown on the page where they do; a claim not named here shows "no reason recorded".
    mode_notes: Mapping[str, str] = field(default_factory=dict, hash=False)


STUDIES: dict[str, Study] = {}


def register_study(study: Study) -> Study:
    if study.name in STUDIES:
        raise ValueError(f"study {study.name!r} registered twice")
    STUDIES[study.name] = study
    return study


def load_studies() -> dict[str, Study]:
    """Every study module under ``studies/`` (``study_*.py``) registers itself on import."""
    import importlib
    import pkgutil

    import studies

    for info in pkgutil.iter_modules(studies.__path__):
        if info.name.startswith("study_"):
            importlib.import_module(f"studies.{info.name}")
    return STUDIES


def get_study(name: str) -> Study:
    studies = load_studies()
    if name not in studies:
        raise UnknownNameError(f"unknown study {name!r}; valid: {', '.join(sorted(studies))}")
    return studies[name]


# ---- one point -------------------------------------------------------------------------------
def run_point(point: Point) -> dict[str, Any]:
    """Measure one point (in whatever process or Dask worker runs it); returns its result row."""
    from studies.measures import MEASURES

    if point.measure not in MEASURES:
        raise ConfigError(
            f"study {point.study!r}: unknown measure {point.measure!r}; valid: {', '.join(MEASURES)}"
        )
    t0 = time.perf_counter()
    row = MEASURES[point.measure](point)
    return {**row, **point.label, "wall_s": time.perf_counter() - t0}  # the grid labels name the point


def _point_file(folder: Path, point: Point) -> Path:
    return folder / "points" / f"{point.key}.json"


def load_result(folder: Path, point: Point) -> dict[str, Any] | None:
    """The stored result of ``point``, or None when there is none or it is not trustworthy."""
    path = _point_file(folder, point)
    if not path.is_file():
        return None
    try:
        stored = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if stored.get("key") != point.key or stored.get("results_version") != RESULTS_VERSION:
        return None
    return stored.get("result")


def store_result(folder: Path, point: Point, result: dict[str, Any]) -> None:
    path = _point_file(folder, point)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "key": point.key,
        "results_version": RESULTS_VERSION,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "point": asdict(point),
        "result": result,
    }
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(record, indent=1, default=_plain))
        tmp.replace(path)  # atomic: a killed run leaves either the whole file or none
    except BaseException:  # an error, or a signal (interruptible) while writing: no stray .tmp
        tmp.unlink(missing_ok=True)
        raise


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


class PointWorkerDied(WorkbenchError):
    """A process running points ended abruptly (killed, out of memory, a crash in native code)."""


# ---- interruption ----------------------------------------------------------------------------
class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a study; ``detail`` says what was kept and how to resume.

    A KeyboardInterrupt, so whatever catches Ctrl-C catches it too; ``gnnwb`` prints
    ``interrupted (SIGTERM): <detail>`` and exits with 128 + the signal's number.
    """

    def __init__(self, signum: int, detail: str = "") -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.detail = detail


_interruptible_depth = 0  # nested interruptible() blocks install the handlers once


@contextmanager
def interruptible(detail: str = "") -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` (with ``detail`` unless an
    inner block gave one) in the main thread; the previous handlers come back after.

    SIGTERM's default is to die on the spot: no ``finally`` runs, so a process pool's workers
    (and the fork server they hold open) outlive the study as orphans. As an exception it
    unwinds like Ctrl-C: the executor stops its pool, an in-process point's own cleanup runs
    (a real run stops its workers). A second signal while stopping is ignored, so the cleanup
    is not cut short; outside the main thread (no handlers there) this does nothing.
    """
    global _interruptible_depth
    if _interruptible_depth or threading.current_thread() is not threading.main_thread():
        try:
            yield
        except Interrupted as exc:
            exc.detail = exc.detail or detail
            raise
        return
    fired: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        if not fired:
            fired.append(signum)
            raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    _interruptible_depth += 1
    try:
        yield
    except Interrupted as exc:
        exc.detail = exc.detail or detail
        raise
    finally:
        _interruptible_depth -= 1
        for sig, old in previous.items():
            signal.signal(sig, old)


# ---- a study ---------------------------------------------------------------------------------
@dataclass
class StudyRun:
    """What :func:`run_study` did: every point's result, how many were computed now, and which
    grid ran (``full``: the larger one), so its page can say which mode its verdicts are."""

    study: Study
    results: pd.DataFrame
    computed: int
    reused: int
    folder: Path
    full: bool
    first_config: dict[str, Any]  # the grid's first point's configuration, shown on the page
    measures: dict[str, int] = field(default_factory=dict)  # points per measure: how figures were obtained


def study_folder(reports: Path, name: str) -> Path:
    return reports / "studies" / name


def run_study(
    study: Study,
    *,
    full: bool = False,
    reports: Path = Path("reports"),
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    executor: Callable[[Iterable[Point]], Iterable[tuple[Point, dict[str, Any]]]] | None = None,
) -> StudyRun:
    """Run the points of ``study`` that have no stored result, store each as it finishes, analyse all.

    ``executor`` (tests) replaces the parallel execution: it gets the pending points and
    yields (point, result) pairs as they finish.
    """
    folder = study_folder(reports, study.name)
    points = study.points(full)
    if not points:
        raise ConfigError(f"study {study.name!r} has no points")
    results: dict[str, dict[str, Any]] = {}
    pending: dict[str, Point] = {}  # by key: two points of one configuration run once
    for point in points:
        stored = load_result(folder, point)
        if stored is None:
            pending.setdefault(point.key, point)
        else:
            results[point.key] = stored
    bar = _Progress(len(results) + len(pending), len(results), study.name, progress)
    if study.local_only:
        if scheduler and pending and progress:
            print(
                f"study {study.name}: runs on this machine, one point at a time (not on {scheduler})",
                file=sys.stderr,
            )
        run = executor or _local_executor(1)
    else:
        run = executor or (_dask_executor(scheduler) if scheduler else _local_executor(jobs))
        if executor is None:
            run = _alone_after(run)
    with interruptible():
        produced = run(list(pending.values()))
        try:
            for point, result in produced:
                store_result(folder, point, result)  # atomic: a signal leaves the whole file or none
                results[point.key] = result
                bar.step()
        except PointWorkerDied as exc:
            raise WorkbenchError(
                f"study {study.name}: a worker process died while running points ({exc}); the "
                f"{len(results)} finished points are stored: run it again to resume (--jobs 1 runs "
                "points here, one at a time)"
            ) from None
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGINT/SIGTERM through interruptible()
            # Distinct configurations, as the progress bar and the points folder count them.
            distinct = len({p.key for p in points})
            raise Interrupted(
                getattr(exc, "signum", signal.SIGINT),
                f"kept {len(results)} of {distinct} points in {folder / 'points'}; run the same command "
                "again to resume",
            ) from None
        finally:
            # Stop the executor now (its pool, its workers), not whenever the abandoned generator
            # is collected: the traceback keeps it alive until the process exits.
            close = getattr(produced, "close", None)
            if close is not None:
                close()
            bar.close()
    # Each row carries its own point's grid labels (a configuration shared by two points of the
    # grid, say a baseline in two plots, is computed and stored once).
    table = pd.DataFrame([{**results[p.key], **p.label} for p in points])
    first = points[0].config if points else {}
    return StudyRun(
        study, table, len(pending), len(points) - len(pending), folder, full, first, measure_counts(points)
    )


def measure_counts(points: list[Point]) -> dict[str, int]:
    """How many of ``points`` each measure obtains."""
    counts: dict[str, int] = {}
    for p in points:
        counts[p.measure] = counts.get(p.measure, 0) + 1
    return counts


def _local_executor(
    jobs: int | None, *, fresh: bool = False
) -> Callable[[list[Point]], Iterable[tuple[Point, dict[str, Any]]]]:
    """Points in a pool of ``jobs`` processes (one: here, in this process); ``fresh``: a new
    process for every point, even one at a time."""

    def run(points: list[Point]) -> Iterable[tuple[Point, dict[str, Any]]]:
        workers = max(1, min(jobs or os.cpu_count() or 1, len(points)))
        if workers == 1 and not fresh:
            for point in points:
                yield point, run_point(point)
            return
        # Workers come from a fork server, a fresh process: forking this one, which may already
        # run OpenMP or torch threads (a real-run study, calibration), is unsafe and kills them.
        # It is the process's one fork server, so it is the real runs' too, which preload PyTorch
        # and DGL into it (realrun.processes): a server started here without them would serve the
        # later real runs' workers, each then importing both itself (9 s a run instead of 2.5 s).
        from realrun.processes import worker_context

        context = worker_context()
        pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_worker_start,
            max_tasks_per_child=1 if fresh else None,
        )  # fmt: skip
        finished = False
        try:
            futures = {pool.submit(run_point, p): p for p in points}
            for future in as_completed(futures):
                yield futures[future], future.result()
            finished = True
        except BrokenProcessPool as exc:
            raise PointWorkerDied(str(exc)) from None
        finally:
            # Interrupted, a point failed, or the caller stopped reading: nobody wants the rest,
            # so kill the workers rather than wait for (or, with shutdown's default, run) it all.
            if finished:
                pool.shutdown()
            else:
                _stop_pool(pool)

    return run


def _alone_after(
    run: Callable[[list[Point]], Iterable[tuple[Point, dict[str, Any]]]],
) -> Callable[[list[Point]], Iterable[tuple[Point, dict[str, Any]]]]:
    """``run`` for the points that share the machine, then each :attr:`Point.alone` point here,
    one at a time in a fresh process (whatever a point's process holds when it ends goes with it)."""

    def both(points: list[Point]) -> Iterable[tuple[Point, dict[str, Any]]]:
        alone = [p for p in points if p.alone]
        shared = [p for p in points if not p.alone]
        if shared:
            yield from run(shared)
        if alone:
            yield from _local_executor(1, fresh=True)(alone)

    return both


def _worker_start() -> None:
    """Each pool worker, first: its own process group, and an exit when the study's process ends.

    The group: :func:`_stop_pool` kills the worker with whatever it started, and Ctrl-C at a
    terminal (SIGINT to the foreground group) reaches only the study's process, which stops the
    pool itself instead of every worker printing a traceback. The exit: a study killed by
    SIGKILL (or the out-of-memory killer) runs no cleanup; its workers would wait on their
    queue forever and keep the fork server alive, so each watches its parent's sentinel (a pipe
    that closes when the parent's process ends) and then kills its own group.
    """
    try:
        os.setpgid(0, 0)
        own_group = True
    except OSError:
        own_group = False  # then kill only itself: its group is the study's (and the shell job's)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(
            target=_exit_with_parent,
            args=(parent.sentinel, own_group),
            name="gnnwb-parent-watch",
            daemon=True,
        ).start()


def _exit_with_parent(sentinel: int, own_group: bool) -> None:
    multiprocessing.connection.wait([sentinel])
    if own_group:
        os.killpg(0, signal.SIGKILL)
    os._exit(1)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: cancel its waiting points, kill its workers and what they started.

    ``shutdown(wait=False, cancel_futures=True)`` alone leaves the running points running: the
    workers would outlive this process (about 250 MB each), blocked on their queue once it is
    gone. The fork server and multiprocessing's resource tracker need no killing: they end as
    soon as no process holds their pipes, that is once the workers are dead and this process
    exits (or the next study reuses them).
    """
    # The pool's Process objects are private (``_processes``), and the only handle on its workers.
    workers = [p for p in (getattr(pool, "_processes", None) or {}).values() if p.pid is not None]
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        for kill in (os.killpg, os.kill):  # its group (see _worker_start), then itself if not moved yet
            try:
                kill(worker.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for worker in workers:
        worker.join(timeout=5)


def _dask_executor(address: str) -> Callable[[list[Point]], Iterable[tuple[Point, dict[str, Any]]]]:
    def run(points: list[Point]) -> Iterable[tuple[Point, dict[str, Any]]]:
        try:
            from distributed import Client
            from distributed import as_completed as dask_completed
        except ImportError:
            raise WorkbenchError(
                "--scheduler needs dask's distributed package (pip install 'dask[distributed]')"
            ) from None
        try:
            client = Client(address, timeout="5s")
        except (OSError, TimeoutError) as exc:
            raise WorkbenchError(
                f"Dask scheduler {address} did not answer within 5 s ({type(exc).__name__})"
            ) from None
        try:
            futures = {client.submit(run_point, p, pure=False): p for p in points}
            for future in dask_completed(futures):
                yield futures[future], future.result()
        finally:
            client.close()

    return run


class _Progress:
    """Points done out of the total and the time left, on stderr (a tqdm bar)."""

    def __init__(self, total: int, done: int, name: str, show: bool) -> None:
        self.bar = None
        if show:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, desc=f"study {name}", unit="point", file=sys.stderr)

    def step(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
