"""Compute-time cost models: seconds from a task's cost features.

The pattern is ROC's linear model. For a task on a device with peak rate ``peak_flops``
and memory bandwidth ``memory_bandwidth``::

    seconds = intercept
            + per_flop    * flops / peak_flops             # 1 / achieved fraction of peak
            + per_byte    * bytes / memory_bandwidth       # 1 / achieved fraction of bandwidth
            + per_edge    * edges
            + per_vertex  * vertices

Coefficients are kept per device model: the GPU's ``GPUSpec.model`` (``"P100"``,
``"A100-40GB"``, ...), ``"cpu"`` for host compute, and ``"default"`` for any GPU
model without its own entry. Calibration (a later issue) fits them from traces and
saves them with :meth:`LinearCostModel.to_json`.

A task whose features include ``seconds`` takes exactly that long; the model is not
consulted (hand-written plans and analytic tests use this).

``transfer_overhead`` (phase -> seconds, default none) is the host's fixed work before a
transfer of that phase moves any byte: a real feature store's exchange first sends
request counts and ids and gathers the rows it serves, which a link's latency does not
describe. Calibration fits it for the exchange phases (:mod:`sim.calibrate.links`); the
simulator waits it out before the transfer's first leg. A key ``phase.protocol`` is the
overhead of one exchange protocol of that phase (:func:`exchange_protocol`: what the task's
id names it, e.g. ``gather_remote.remote`` for a feature store's request and reply,
``gather_remote.halo`` for ROC's pushed halo rows); it comes before the phase's own key. Schemes
exchange rows of one phase in ways that cost differently: measured on 2-worker CPU runs, a
~320 KB ``gather_remote`` row took 4.2 ms as a feature-store fetch, 1.35 ms as HopGNN's
pre-gather, 0.96 ms as a ROC halo send and 0.76 ms as a bulk-pipeline id or row message.

A collective phase's entry (``allreduce``, ``alltoall``) is the library's fixed work per call,
paid before the first ring step and on a single device too: a one-rank gloo all-reduce took
0.36-0.42 ms on this project's 2-core CPU runs (median of each run's warm calls) and a one-rank
NCCL one about 0.3 ms on an H200, where the ring's steps cost nothing.

Defaults (why):

* GPU: 5 us per kernel launch; sparse GNN kernels reach about half of peak FLOP/s
  and 70 % of memory bandwidth, and the two are added (a conservative roofline);
  no per-edge or per-vertex terms, because ``flops`` and ``bytes`` already count them.
* CPU (host work such as sampling): 20 us fixed; one core does about 10 M sampled
  edges/s and 5 M vertices/s (id remapping, hashing), in line with DGL's CPU sampler
  (about 70 minibatches/s of ~1.5 M edges on 2 threads, see DESIGN.md); ``flops`` at
  50 GFLOP/s per core and ``bytes`` at the host memory bandwidth.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np

from workbench import validate
from workbench.errors import ConfigError, PlanError
from workbench.hardware.spec import ClusterSpec
from workbench.plan import PHASES, Task

CPU_CORE_FLOPS = 50e9
_FEATURES = ("flops", "bytes", "edges", "vertices")  # peak FLOP/s that ``per_flop`` scales for host compute


@dataclass(frozen=True)
class LinearCoefficients:
    intercept: float = 0.0
    per_flop: float = 0.0
    per_byte: float = 0.0
    per_edge: float = 0.0
    per_vertex: float = 0.0

    def predict(self, features: dict[str, float], peak_flops: float, memory_bandwidth: float) -> float:
        return (
            self.intercept
            + self.per_flop * features.get("flops", 0.0) / peak_flops
            + self.per_byte * features.get("bytes", 0.0) / memory_bandwidth
            + self.per_edge * features.get("edges", 0.0)
            + self.per_vertex * features.get("vertices", 0.0)
        )


DEFAULT_GPU = LinearCoefficients(intercept=5e-6, per_flop=2.0, per_byte=1.0 / 0.7)
DEFAULT_CPU = LinearCoefficients(intercept=20e-6, per_edge=1e-7, per_vertex=2e-7, per_flop=1.0, per_byte=1.0)


@dataclass
class LinearCostModel:
    """Coefficients per device model; ``"default"`` covers GPU models without an entry."""

    coefficients: dict[str, LinearCoefficients] = field(
        default_factory=lambda: {"default": DEFAULT_GPU, "cpu": DEFAULT_CPU}
    )
    provenance: str = "defaults (sim/costmodel.py)"
    transfer_overhead: dict[str, float] = field(default_factory=dict)  # phase -> seconds (module docstring)
    # Per cluster (by identity, holding it so the id stays unique), per device:
    # the coefficients, peak FLOP/s and memory bandwidth that apply.
    _devices: dict[int, tuple[ClusterSpec, dict[str, tuple[LinearCoefficients, float, float]]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def coefficients_for(self, model: str) -> LinearCoefficients:
        c = self.coefficients.get(model)
        if c is None:
            c = self.coefficients.get("default", DEFAULT_GPU if model != "cpu" else DEFAULT_CPU)
        return c

    def seconds(self, task: Task, cluster: ClusterSpec) -> float:
        """Duration of compute ``task`` on its device."""
        features = task.features
        explicit = features.get("seconds")
        if explicit is not None:
            return float(explicit)
        entry = self._devices.get(id(cluster))
        if entry is None or entry[0] is not cluster:
            entry = self._devices[id(cluster)] = (cluster, {})
        params = entry[1].get(task.device or "")
        if params is None:
            params = entry[1][task.device or ""] = self._device_params(task.device or "", cluster)
        coefficients, peak, bandwidth = params
        seconds = coefficients.predict(features, peak, bandwidth)
        if not math.isfinite(seconds):
            check_finite_seconds(np.array([seconds]), [task])
        return seconds

    def seconds_many(
        self, tasks: Sequence[Task], cluster: ClusterSpec, features: Sequence[dict[str, float]] | None = None
    ) -> np.ndarray:
        """``[self.seconds(t, cluster) for t in tasks]`` as an array, computed per device in numpy.

        Bit-identical to :meth:`seconds`: the same float operations in the same order
        (elementwise IEEE arithmetic is the same in numpy). Falls back to :meth:`seconds`
        per task for a subclass that overrides it or coefficients that are not plain floats.
        ``features``: the tasks' ``features`` when the caller has them at hand.
        """
        n = len(tasks)
        if type(self).seconds is not LinearCostModel.seconds:
            return np.array([self.seconds(t, cluster) for t in tasks], dtype=np.float64).reshape(n)
        feats = list(features) if features is not None else list(map(attrgetter("features"), tasks))
        # One pass over the feature dicts (they are scattered in memory; a pass per
        # feature would cost a cache miss per dict each time), then per-task parameters.
        values = np.array([f.get(k, 0.0) for f in feats for k in _FEATURES], dtype=np.float64).reshape(n, 4)
        devices = list(map(attrgetter("device"), tasks))
        names = list(dict.fromkeys(devices))
        codes = np.fromiter(map({d: k for k, d in enumerate(names)}.__getitem__, devices), np.int64, count=n)
        table = np.zeros((len(names), 7), dtype=np.float64)
        odd: list[int] = []  # devices whose coefficients are not plain floats: per task, by seconds()
        for k, device in enumerate(names):
            try:
                c, peak, bandwidth = self._device_params(device or "", cluster)
            except (
                ConfigError,
                KeyError,
                ValueError,
                AttributeError,
            ):  # left to seconds(), which may not need it
                odd.append(k)
                continue
            row = (c.intercept, c.per_flop, c.per_byte, c.per_edge, c.per_vertex, peak, bandwidth)
            if type(c) is not LinearCoefficients or not all(type(x) is float for x in row):
                odd.append(k)
            else:
                table[k] = row
        p = table[codes]
        with np.errstate(all="ignore"):  # rows of odd devices are zeros, overwritten below
            out = (
                p[:, 0]
                + p[:, 1] * values[:, 0] / p[:, 5]
                + p[:, 2] * values[:, 1] / p[:, 6]
                + p[:, 3] * values[:, 2]
                + p[:, 4] * values[:, 3]
            )
        explicit = [f.get("seconds") for f in feats]
        if explicit.count(None) != n:
            for i, x in enumerate(explicit):
                if x is not None:
                    out[i] = float(x)
        for k in odd:
            for i in np.flatnonzero(codes == k).tolist():
                out[i] = self.seconds(tasks[i], cluster)
        check_finite_seconds(out, tasks)
        return out

    def _device_params(self, device: str, cluster: ClusterSpec) -> tuple[LinearCoefficients, float, float]:
        if device.endswith(".host"):
            machine = cluster.machine_of(device)
            return self.coefficients_for("cpu"), CPU_CORE_FLOPS, machine.host_memory_bandwidth
        gpu = cluster.gpu(device)
        return self.coefficients_for(gpu.model), gpu.flops, gpu.memory_bandwidth

    # ---- files -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "linear",
            "provenance": self.provenance,
            "coefficients": {k: asdict(v) for k, v in self.coefficients.items()},
        }
        if self.transfer_overhead:
            out["transfer_overhead"] = dict(self.transfer_overhead)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<cost model>") -> LinearCostModel:
        """A cost model from :meth:`to_dict`'s layout; errors name ``source`` and the field.

        Coefficients are finite and non-negative (calibration fits them by non-negative
        least squares; a negative or NaN one would make kernels take negative or no time).
        """
        validate.table(data, source)
        unknown = set(data) - _FILE_FIELDS
        if unknown:
            raise ConfigError(
                f"{source}: unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_FILE_FIELDS))}"
            )
        kind = data.get("kind", "linear")
        if kind != "linear":
            raise ConfigError(f"{source}: kind {kind!r}; allowed: linear")
        coefficients = {
            model: coefficients_from_dict(raw, f"{source}: coefficients.{model}")
            for model, raw in validate.table(data.get("coefficients", {}), f"{source}: coefficients").items()
        }
        if not coefficients:
            raise ConfigError(f"{source}: no coefficients")
        overhead = parse_transfer_overhead(data.get("transfer_overhead", {}), source)
        provenance = validate.string(data.get("provenance", source), f"{source}: provenance")
        return cls(coefficients, provenance, overhead)

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1, sort_keys=True)
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> LinearCostModel:
        """A saved cost model: a path (a :class:`~pathlib.Path`, or a string that does not
        start with ``{``) or the JSON text itself. A missing path, a folder, a binary file,
        invalid JSON or a wrong field raises :class:`ConfigError` naming the file."""
        if isinstance(text_or_path, str) and text_or_path.lstrip().startswith("{"):
            return cls.from_dict(_parse_json(text_or_path, "cost model"), "cost model")
        p = validate.existing_file(text_or_path, "cost model file")
        try:
            text = p.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{p}: not a cost model: not UTF-8 text (a binary file?)") from None
        except OSError as exc:
            raise ConfigError(f"{p}: cannot read cost model file ({exc.strerror or exc})") from None
        return cls.from_dict(_parse_json(text, str(p)), str(p))


_FILE_FIELDS = frozenset({"kind", "provenance", "coefficients", "transfer_overhead"})
COEFFICIENT_FIELDS = tuple(f.name for f in fields(LinearCoefficients))


def coefficients_from_dict(raw: Any, where: str) -> LinearCoefficients:
    """One device model's coefficients: a table of finite non-negative numbers."""
    validate.table(raw, where)
    unknown = set(raw) - set(COEFFICIENT_FIELDS)
    if unknown:
        raise ConfigError(
            f"{where} has unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(COEFFICIENT_FIELDS))}"
        )
    return LinearCoefficients(
        **{k: validate.finite_number(v, f"{where}.{k}", minimum=0.0) for k, v in raw.items()}
    )


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{source}: not a cost model: JSON nested too deeply to read") from None


def check_finite_seconds(seconds: np.ndarray, tasks: Sequence[Task]) -> None:
    """Raise :class:`PlanError` naming the first task whose predicted time is not finite:
    cost features near a float's limit (``flops = 1e308``) overflow the model's arithmetic,
    and an infinite time would make every later time infinite."""
    bad = np.flatnonzero(~np.isfinite(seconds))
    if bad.size:
        t = tasks[int(bad[0])]
        largest = max(t.features, key=lambda k: t.features[k], default="")
        raise PlanError(
            f"task {t.id!r}: its cost features give a compute time of {seconds[bad[0]]} s on {t.device} "
            f"(largest: {largest} = {t.features.get(largest)!r}); features that large are not a plan's"
        )


# Fields of an exchange task's id that name one end of it (its worker, the machine and memory
# it reads from, the peer it is from or to), and a peer named inside a field (``ids-to-w1``).
_END = re.compile(r"(?:w\d+|m\d+|host|gpu\d+|from\d+|to\d+)")
_PEER = re.compile(r"-w\d+$")
_WHEN = re.compile(r"[it]\d+")  # iteration, time step


def exchange_of(task_id: str) -> str:
    """The exchange a transfer belongs to, the same for every pair of ends: its id without the
    fields naming its ends (``i3.w1.remote.m0.host`` -> ``i3.remote``, ``i3.w1.t2.remote.m0.host``
    -> ``i3.t2.remote``, ``i0.w0.halo1.from1`` -> ``i0.halo1``, ``i0.w1.ids-to-w0`` -> ``i0.ids-to``)."""
    return ".".join(_PEER.sub("", f) for f in task_id.split(".") if not _END.fullmatch(f))


def exchange_protocol(task_id: str) -> str:
    """How an exchange moves its rows, as its id names it: :func:`exchange_of` less when it runs
    and its numbering (``remote``, ``pregather``, ``halo``, ``halograd``, ``ids-to``); "" when
    nothing else is left."""
    for field_ in exchange_of(task_id).split("."):
        if not _WHEN.fullmatch(field_):
            return field_.rstrip("0123456789")
    return ""


def overhead_of(table: dict[str, float], phase: str, task_id: str) -> float:
    """The fixed cost before a transfer of ``phase`` with id ``task_id`` (module docstring):
    its protocol's entry, else its phase's, else none."""
    if not table:
        return 0.0
    own = table.get(f"{phase}.{exchange_protocol(task_id)}")
    return own if own is not None else table.get(phase, 0.0)


def parse_transfer_overhead(raw: Any, source: str) -> dict[str, float]:
    """``transfer_overhead`` of a cost model file: phase (or ``phase.protocol``) -> non-negative seconds."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: transfer_overhead must be a table of phase = seconds, got {raw!r:.40}")
    out = {}
    for key, value in raw.items():
        phase = str(key).split(".", 1)[0]
        if phase not in PHASES:
            raise ConfigError(
                f"{source}: transfer_overhead.{phase}: unknown phase; allowed: {', '.join(PHASES)}"
            )
        out[str(key)] = validate.finite_number(
            value, f"{source}: transfer_overhead.{key} (seconds)", minimum=0.0
        )
    return out
