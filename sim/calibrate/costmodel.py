"""The cost model a calibrated profile carries: coefficients per phase and device model.

:class:`sim.costmodel.LinearCostModel` keys its coefficients by device model only; a
calibrated profile fits them per device model *and* per phase (``forward``, ``backward``,
``sample``, ``gather_local``, ``update``, ...), since a sampling step, a gather and a
layer's forward pass cost different things per edge. :class:`PhaseCostModel` is a
``LinearCostModel`` whose fallback coefficients (``coefficients``, the defaults unless
the profile says otherwise) apply to every (phase, device model) pair the profile did not
fit; a fitted pair holds either ROC-style :class:`~sim.costmodel.LinearCoefficients` or,
where calibration found a non-linear regressor clearly better, a :class:`TreeEnsemble`
(gradient-boosted regression trees, evaluated here in numpy, so simulating needs no
scikit-learn).

The features a model reads are the linear model's: ``flops / peak``, ``bytes / memory
bandwidth``, ``edges`` and ``vertices`` (:data:`FEATURE_COLUMNS`), with the device's peak
and bandwidth as :class:`~sim.costmodel.LinearCostModel` takes them (a host's: one core's
:data:`~sim.costmodel.CPU_CORE_FLOPS` and the machine's host memory bandwidth).
:meth:`PhaseCostModel.seconds_many` is bit-identical to :meth:`PhaseCostModel.seconds`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from sim.costmodel import CPU_CORE_FLOPS, LinearCoefficients, LinearCostModel, parse_transfer_overhead
from workbench.errors import ConfigError
from workbench.hardware.spec import ClusterSpec
from workbench.plan import Task

FEATURE_COLUMNS = ("flop_seconds", "byte_seconds", "edges", "vertices")
COEFFICIENT_NAMES = tuple(f.name for f in fields(LinearCoefficients))


def device_model(device: str, cluster: ClusterSpec) -> str:
    """The cost model's key for a device: its GPU model, or ``"cpu"`` for a host."""
    return "cpu" if device.endswith(".host") else cluster.gpu(device).model


def device_rates(device: str, cluster: ClusterSpec) -> tuple[float, float]:
    """(peak FLOP/s, memory bytes/s) that ``flops`` and ``bytes`` are divided by, as in LinearCostModel."""
    if device.endswith(".host"):
        return CPU_CORE_FLOPS, cluster.machine_of(device).host_memory_bandwidth
    gpu = cluster.gpu(device)
    return gpu.flops, gpu.memory_bandwidth


def feature_matrix(
    features: Sequence[dict[str, float]], peaks: np.ndarray, bandwidths: np.ndarray
) -> np.ndarray:
    """Rows of :data:`FEATURE_COLUMNS` for tasks' feature dicts on devices of these rates."""
    raw = np.array(
        [f.get(k, 0.0) for f in features for k in ("flops", "bytes", "edges", "vertices")], dtype=np.float64
    ).reshape(len(features), 4)
    raw[:, 0] /= peaks
    raw[:, 1] /= bandwidths
    return raw


@dataclass(frozen=True)
class TreeEnsemble:
    """Gradient-boosted regression trees over :data:`FEATURE_COLUMNS`, as scikit-learn fitted them.

    ``prediction = init + learning_rate * sum(tree values)``, in log seconds when
    ``log_target`` (the trees were fitted to log time, so errors are relative). With a ``base``
    (linear coefficients), the trees were fitted to the log of time over the base's prediction
    and correct it: seconds = base's prediction x exp(prediction). Trees alone are constant
    beyond the range they were fitted on (a graph twice the size takes the time of the largest
    fitted one); corrected, the prediction keeps growing with the work as the linear model
    does. Trees are stored flat: tree ``t``'s nodes are ``roots[t]`` onwards; a node with
    ``left == -1`` is a leaf; otherwise go left when ``x[feature] <= threshold``. Child
    indices are relative to the tree's root.
    """

    init: float
    learning_rate: float
    roots: tuple[int, ...]
    feature: tuple[int, ...]
    threshold: tuple[float, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]
    value: tuple[float, ...]
    log_target: bool = True
    base: LinearCoefficients | None = None

    @classmethod
    def from_sklearn(
        cls, model: Any, log_target: bool = True, base: LinearCoefficients | None = None
    ) -> TreeEnsemble:
        """From a fitted ``GradientBoostingRegressor`` (squared-error loss, constant initial guess)."""
        roots, feature, threshold, left, right, value = [], [], [], [], [], []
        for est in model.estimators_[:, 0]:
            t = est.tree_
            roots.append(len(feature))
            feature.extend(int(x) for x in t.feature)
            threshold.extend(float(x) for x in t.threshold)
            left.extend(int(x) for x in t.children_left)
            right.extend(int(x) for x in t.children_right)
            value.extend(float(x) for x in t.value[:, 0, 0])
        init = float(np.asarray(model.init_.constant_).ravel()[0])
        return cls(
            init,
            float(model.learning_rate),
            tuple(roots),
            tuple(feature),
            tuple(threshold),
            tuple(left),
            tuple(right),
            tuple(value),
            log_target,
            base,
        )

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Seconds for rows ``x`` of :data:`FEATURE_COLUMNS`."""
        feature = np.asarray(self.feature, dtype=np.int64)
        threshold = np.asarray(self.threshold, dtype=np.float64)
        left = np.asarray(self.left, dtype=np.int64)
        right = np.asarray(self.right, dtype=np.int64)
        value = np.asarray(self.value, dtype=np.float64)
        rows = np.arange(x.shape[0])
        total = np.zeros(x.shape[0], dtype=np.float64)
        for root in self.roots:
            node = np.full(x.shape[0], root, dtype=np.int64)
            while True:
                inner = left[node] != -1
                if not inner.any():
                    break
                f = np.where(inner, feature[node], 0)
                go_left = x[rows, f] <= threshold[node]
                step = np.where(go_left, left[node], right[node])
                node = np.where(inner, root + step, node)
            total += value[node]
        out = self.init + self.learning_rate * total
        if self.base is not None:
            return linear_seconds(self.base, x) * np.exp(out)
        return np.exp(out) if self.log_target else out

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": "trees",
            **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if k != "base"},
            **({"base": asdict(self.base)} if self.base is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> TreeEnsemble:
        try:
            arrays = {k: tuple(data[k]) for k in ("roots", "feature", "threshold", "left", "right", "value")}
            n = len(arrays["feature"])
            if any(len(arrays[k]) != n for k in ("threshold", "left", "right", "value")):
                raise ValueError("node arrays of different lengths")
            base = data.get("base")
            return cls(
                float(data["init"]),
                float(data["learning_rate"]),
                log_target=bool(data.get("log_target", True)),
                base=LinearCoefficients(**{k: float(v) for k, v in dict(base).items()}) if base else None,
                **arrays,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: not a tree ensemble ({exc})") from None


# A linear prediction of no time (every fitted coefficient 0 on a row without features) is taken as
# this many seconds where trees correct it, so their log ratio stays finite.
BASE_FLOOR = 1e-9


def linear_seconds(c: LinearCoefficients, x: np.ndarray) -> np.ndarray:
    """``c``'s seconds for rows ``x`` of :data:`FEATURE_COLUMNS` (flops and bytes already over the
    device's rates), as :meth:`LinearCoefficients.predict` gives them one task at a time, at least
    :data:`BASE_FLOOR`."""
    seconds = (
        c.intercept
        + c.per_flop * x[:, 0]
        + c.per_byte * x[:, 1]
        + c.per_edge * x[:, 2]
        + c.per_vertex * x[:, 3]
    )
    return np.maximum(seconds, BASE_FLOOR)


Fitted = LinearCoefficients | TreeEnsemble


@dataclass
class PhaseCostModel(LinearCostModel):
    """Coefficients per phase and device model; the inherited ``coefficients`` are the fallback."""

    phases: dict[str, dict[str, Fitted]] = field(default_factory=dict)
    _plain: dict[str, LinearCostModel] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _phase_model(self, phase: str) -> LinearCostModel:
        """A plain LinearCostModel with this phase's fitted linear coefficients over the fallback."""
        model = self._plain.get(phase)
        if model is None:
            linear = {
                k: v for k, v in self.phases.get(phase, {}).items() if isinstance(v, LinearCoefficients)
            }
            model = self._plain[phase] = LinearCostModel(
                {**self.coefficients, **linear}, self.provenance, self.transfer_overhead
            )
        return model

    def _tree(self, phase: str, device: str, cluster: ClusterSpec) -> TreeEnsemble | None:
        entry = self.phases.get(phase)
        if not entry:
            return None
        fitted = entry.get(device_model(device, cluster))
        return fitted if isinstance(fitted, TreeEnsemble) else None

    def seconds(self, task: Task, cluster: ClusterSpec) -> float:
        return float(self.seconds_many([task], cluster)[0])

    def seconds_many(
        self, tasks: Sequence[Task], cluster: ClusterSpec, features: Sequence[dict[str, float]] | None = None
    ) -> np.ndarray:
        n = len(tasks)
        feats = list(features) if features is not None else [t.features for t in tasks]
        out = np.zeros(n, dtype=np.float64)
        by_phase: dict[str, list[int]] = {}
        for i, t in enumerate(tasks):
            by_phase.setdefault(t.phase, []).append(i)
        for phase, index in by_phase.items():
            plain = self._phase_model(phase)
            out[index] = plain.seconds_many([tasks[i] for i in index], cluster, [feats[i] for i in index])
            if not any(isinstance(v, TreeEnsemble) for v in self.phases.get(phase, {}).values()):
                continue
            trees: dict[int, list[int]] = {}
            ensembles: dict[int, TreeEnsemble] = {}
            for i in index:
                tree = self._tree(phase, tasks[i].device or "", cluster)
                if tree is not None and feats[i].get("seconds") is None:
                    trees.setdefault(id(tree), []).append(i)
                    ensembles[id(tree)] = tree
            for key, rows in trees.items():
                rates = np.array([device_rates(tasks[i].device or "", cluster) for i in rows]).reshape(-1, 2)
                x = feature_matrix([feats[i] for i in rows], rates[:, 0], rates[:, 1])
                out[rows] = ensembles[key].predict(x)
        return out

    # ---- files -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "phase",
            "provenance": self.provenance,
            **({"transfer_overhead": dict(self.transfer_overhead)} if self.transfer_overhead else {}),
            "fallback": {k: asdict(v) for k, v in self.coefficients.items()},
            "phases": {
                phase: {
                    model: (
                        {"model": "linear", **asdict(f)} if isinstance(f, LinearCoefficients) else f.to_dict()
                    )
                    for model, f in entry.items()
                }
                for phase, entry in self.phases.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<cost model>") -> PhaseCostModel:
        if data.get("kind") != "phase":
            raise ConfigError(f"{source}: cost_model.kind {data.get('kind')!r}; allowed: phase")
        base = LinearCostModel.from_dict(
            {"coefficients": data.get("fallback", {}), "provenance": data.get("provenance", source)},
            f"{source}: cost_model.fallback",
        )
        phases: dict[str, dict[str, Fitted]] = {}
        for phase, entry in dict(data.get("phases", {})).items():
            for model, raw in dict(entry).items():
                where = f"{source}: cost_model.phases.{phase}.{model}"
                kind = raw.get("model", "linear")
                if kind == "trees":
                    phases.setdefault(phase, {})[model] = TreeEnsemble.from_dict(raw, where)
                elif kind == "linear":
                    coeffs = {k: v for k, v in raw.items() if k != "model"}
                    unknown = set(coeffs) - set(COEFFICIENT_NAMES)
                    if unknown:
                        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
                    phases.setdefault(phase, {})[model] = LinearCoefficients(
                        **{k: float(v) for k, v in coeffs.items()}
                    )
                else:
                    raise ConfigError(f"{where}: model {kind!r}; allowed: linear, trees")
        overhead = parse_transfer_overhead(data.get("transfer_overhead", {}), f"{source}: cost_model")
        return cls(base.coefficients, base.provenance, overhead, phases=phases)
