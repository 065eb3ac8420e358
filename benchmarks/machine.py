"""What every benchmark prints beside its figures: the machine, its load, and targets as ratios.

A figure that holds only on the machine it was tuned on is not a property of the
software (issue 28): each benchmark states its targets as ratios against a reference
measured in the same run, prints the machine (CPU model, cores), the load average
before and after and, on Linux, the share of the machine's CPU time other processes took
while it ran (:mod:`realrun.machine_cpu`: the load average lags a minute and counts the
benchmark's own threads, so it cannot say whether the run was quiet), and repeats the whole
measurement ``--runs N`` times (default 3)::

    machine = Machine.now()          # before measuring
    ...
    machine.finish()                 # after: prints the machine line with both loads and others' share
    verdict("sim end to end / executing", ratio, at_least=0.75)
"""

from __future__ import annotations

import argparse
import os
import platform
from dataclasses import dataclass, field
from typing import Any

from realrun.machine_cpu import cpu_sample, others_share


def cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:  # not on this platform
        return (float("nan"),) * 3


@dataclass
class Machine:
    """The machine a benchmark ran on and its load (1, 5, 15 minute averages) before and after."""

    cpu: str
    cores: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] | None = None
    results: list[tuple[str, bool]] = field(default_factory=list)
    cpu_before: Any = None  # realrun.machine_cpu.CpuSample, None off Linux

    @classmethod
    def now(cls) -> Machine:
        machine = cls(cpu_model(), os.cpu_count() or 1, load_average(), cpu_before=cpu_sample())
        print(f"machine: {machine.cpu}, {machine.cores} cores; load before {_load(machine.load_before)}")
        return machine

    def finish(self) -> None:
        """Print the load after, the machine again and every target's verdict of the run."""
        self.load_after = load_average()
        share = others_share(self.cpu_before, cpu_sample())
        others = (
            f"; other processes took {share['others_cpu']:.1%} of the CPU time over the "
            f"{share['window_s']:.0f} s it ran (steal {share['steal']:.1%})"
            if share
            else ""
        )
        print(
            f"machine: {self.cpu}, {self.cores} cores; load before {_load(self.load_before)}, "
            f"after {_load(self.load_after)}{others}"
        )
        for name, ok in self.results:
            print(f"  {'PASS' if ok else 'FAIL'}  {name}")

    def verdict(
        self, name: str, value: float, *, at_least: float | None = None, at_most: float | None = None
    ) -> bool:
        """Print and record one target: ``value`` (a ratio) against its bound."""
        ok = (at_least is None or value >= at_least) and (at_most is None or value <= at_most)
        bound = f">= {at_least:g}" if at_least is not None else f"<= {at_most:g}"
        line = f"{name}: {value:.3g} (target {bound})"
        print(f"target {'PASS' if ok else 'FAIL'}: {line}")
        self.results.append((line, ok))
        return ok


def add_runs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs", type=int, default=3, help="repeat the whole measurement this many times (default 3)"
    )


def _load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load) + " (1/5/15 min)"
