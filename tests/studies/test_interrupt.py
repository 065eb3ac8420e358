"""An interrupted study (SIGTERM from ``kill`` or a batch scheduler, SIGINT from Ctrl-C) leaves no process
behind, says what it kept and how to resume, and a rerun computes only the points it had not finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from studies.runner import Interrupted, Point, Study, run_study

ROOT = Path(__file__).resolve().parents[2]

# A study whose points sleep (points 0 and 1 briefly, the rest for $SLOW_STUDY_SECONDS), run through
# gnnwb's own command line. Its measure is registered at import: the pool's fork server imports this
# file as __mp_main__ (multiprocessing preloads the main module), so its workers know it too. Each
# point leaves "<index>-<pid>" in $SLOW_STUDY_STARTED when it starts.
SLOW_STUDY = """
import os, sys, time
from pathlib import Path

from studies import measures
from studies.report import ReportPage
from studies.runner import Point, Study, register_study


def measure_sleep(point):
    Path(os.environ["SLOW_STUDY_STARTED"], f"{point.label['i']}-{os.getpid()}").touch()
    time.sleep(0.2 if point.label["i"] < 2 else float(os.environ["SLOW_STUDY_SECONDS"]))
    return {"slept": True}


measures.MEASURES["sleep"] = measure_sleep
register_study(
    Study(
        "slow", "slow", "none", "none",
        lambda full: [Point("slow", {"i": i}, {"i": i}, "sleep") for i in range(6)],
        lambda results, folder: ReportPage("slow", "points that sleep"),
    )
)

if __name__ == "__main__":
    from workbench.cli.main import main

    sys.exit(main(sys.argv[1:]))
"""


def marked(marker: str) -> list[int]:
    """Processes whose environment holds GNNWB_TEST_MARKER=marker: the study's process, its fork server,
    resource tracker and pool workers (the fork server is re-parented to init: no parent chain finds it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        if f"GNNWB_TEST_MARKER={marker}".encode() in environ:
            found.append(int(entry.name))
    return found


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def start(tmp_path: Path, marker: str, seconds: float, *args: str) -> subprocess.Popen:
    """The study's command in a subprocess; its output goes to files (processes it leaves behind would
    hold pipes open), read them with :func:`output`."""
    script = tmp_path / "slow_study.py"
    script.write_text(textwrap.dedent(SLOW_STUDY))
    started = tmp_path / "started"
    started.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "GNNWB_TEST_MARKER": marker,
        "SLOW_STUDY_STARTED": str(started),
        "SLOW_STUDY_SECONDS": str(seconds),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    with (tmp_path / "stdout").open("w") as out, (tmp_path / "stderr").open("w") as err:
        return subprocess.Popen(
            [sys.executable, str(script), *args, "--reports", str(tmp_path / "reports"), "--jobs", "2"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=err,
        )


def output(tmp_path: Path) -> tuple[str, str]:
    return (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text()


@pytest.fixture
def marker(request):
    """A marker for the processes a test starts; any still alive at its end are killed (a failed test
    must not leave 250 MB workers behind)."""
    value = f"interrupt-{os.getpid()}-{request.node.name}"
    yield value
    for pid in marked(value):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize(
    ("sig", "command"),
    [(signal.SIGTERM, ("study", "run", "slow")), (signal.SIGINT, ("run", "--only", "slow"))],
    ids=["SIGTERM-study-run", "SIGINT-run"],
)
def test_an_interrupted_study_leaves_no_process_and_a_rerun_resumes(tmp_path, marker, sig, command):
    points = tmp_path / "reports" / "studies" / "slow" / "points"
    started = tmp_path / "started"
    proc = start(tmp_path, marker, 60, *command)
    try:
        # Both short points stored, both workers inside a 60 s point: the pool is busy.
        busy = wait_for(
            lambda: len(list(points.glob("*.json"))) == 2 and len(list(started.iterdir())) == 4, 60
        )
        assert busy, output(tmp_path) if proc.poll() is not None else "no point started in 60 s"
        workers = {int(name.split("-")[1]) for name in os.listdir(started)}
        assert len(workers) == 2 and workers <= set(marked(marker))
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _, err = output(tmp_path)
    assert proc.returncode == 128 + sig, err
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert lines == [
        f"gnnwb {command[0]}: interrupted ({sig.name}): kept 2 of 6 points in {points}; run the same "
        "command again to resume"
    ]
    assert "Traceback" not in err  # neither the study nor its workers print one
    # The workers are killed (and reaped) before the study exits; the fork server and resource tracker
    # end as it does.
    assert not workers & set(marked(marker))
    assert wait_for(lambda: marked(marker) == [], 10), f"left behind: {marked(marker)}"
    assert not list(points.glob("*.tmp"))
    if sig != signal.SIGTERM:
        return
    # A rerun computes only the four unfinished points.
    for entry in started.iterdir():
        entry.unlink()
    rerun = start(tmp_path, marker, 0, *command)
    rerun.wait(timeout=60)
    out, err = output(tmp_path)
    assert rerun.returncode == 0, err
    assert "4 points computed, 2 reused" in out
    assert sorted(int(name.split("-")[0]) for name in os.listdir(started)) == [2, 3, 4, 5]
    assert wait_for(lambda: marked(marker) == [], 10), f"left behind: {marked(marker)}"


def test_an_interruption_in_process_names_what_was_kept(tmp_path):
    """Ctrl-C during a point run here (one job): the same Interrupted, with the count kept."""
    done: list[int] = []

    def run(points: list[Point]):
        for point in points:
            if len(done) == 3:
                raise KeyboardInterrupt
            done.append(point.label["i"])
            yield point, {"x": 1}

    study = Study(
        "few", "few", "none", "none", lambda full: [Point("few", {"i": i}, {"i": i}) for i in range(5)], print
    )
    with pytest.raises(Interrupted) as caught:
        run_study(study, reports=tmp_path, progress=False, executor=run)
    assert caught.value.signum == signal.SIGINT
    assert caught.value.detail == (
        f"kept 3 of 5 points in {tmp_path / 'studies' / 'few' / 'points'}; run the same command again to resume"
    )
