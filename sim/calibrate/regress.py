"""Weighted non-negative least squares with scikit-learn, and what a fit's quality is.

Times span orders of magnitude (a 4 KiB copy takes microseconds, a 64 MiB one
milliseconds), so every fit minimises *relative* residuals: each row is weighted by
``1 / time**2``, the time being the fit's own prediction (iteratively reweighted: the
first pass weights by the measured time, the next ones by the previous pass's
prediction). Weighting by the measured time alone biases the fit low when rows are
noisy: a row that happened to run long gets little weight, one that ran short a lot;
with multiplicative noise of log-spread ``s`` the fitted time comes out about
``exp(-2 s**2)`` of the mean (a third low at ``s = 0.45``, which the exchanges of a real
run on a shared machine show). Coefficients are non-negative (a latency, a time per byte, a cost per
edge): ``LinearRegression(positive=True)``. Columns are scaled to unit weighted norm
first and the coefficients scaled back, so a column of edge counts (~1e6) and one of
seconds (~1e-4) are fitted alike.

Columns that are linear combinations of others cannot be fitted apart:
:func:`independent_columns` keeps a full-rank subset, dropping the dependent ones in
the caller's order of preference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RANK_TOLERANCE = 1e-9


@dataclass
class Fit:
    coef: np.ndarray  # one per column
    stderr: np.ndarray  # standard error of each coefficient (from the weighted residuals)
    predicted: np.ndarray
    r2: float  # on the times themselves (unweighted)
    rel_residuals: np.ndarray  # (predicted - observed) / observed

    def spread(self, mask: np.ndarray | None = None) -> dict[str, float]:
        r = self.rel_residuals if mask is None else self.rel_residuals[mask]
        if not len(r):
            return {}
        return {
            "residual_median_abs": float(np.median(np.abs(r))),
            "residual_p95_abs": float(np.quantile(np.abs(r), 0.95)),
            "residual_std": float(np.std(r)),
        }


def _scaled(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    norm = np.sqrt((x * x * w[:, None]).sum(axis=0))
    norm[norm == 0] = 1.0
    return x / norm, norm


def column_rank(x: np.ndarray, w: np.ndarray) -> int:
    if not x.shape[1]:
        return 0
    xs, _ = _scaled(x, w)
    s = np.linalg.svd(xs * np.sqrt(w)[:, None], compute_uv=False)
    return int((s > RANK_TOLERANCE * max(s[0], 1e-300)).sum())


def independent_columns(x: np.ndarray, w: np.ndarray, droppable: list[int]) -> list[int]:
    """Columns to keep: all of them when they are independent; otherwise dependent ones from
    ``droppable`` are dropped, first listed first, until the rest are independent."""
    keep = list(range(x.shape[1]))
    for c in droppable:
        if column_rank(x[:, keep], w) == len(keep):
            break
        trial = [k for k in keep if k != c]
        if column_rank(x[:, trial], w) == column_rank(x[:, keep], w):
            keep = trial
    return keep


REWEIGHTS = 3  # passes after the first, each weighted by the previous pass's prediction


def relative_nnls(x: np.ndarray, y: np.ndarray, offset: np.ndarray | None = None) -> Fit:
    """Fit ``y ~ offset + x @ coef`` with ``coef >= 0``, minimising residuals relative to the
    fitted time (see the module docstring)."""
    from sklearn.linear_model import LinearRegression  # imported here: gnnwb sim imports this package

    offset = np.zeros_like(y) if offset is None else offset
    scale = np.maximum(y, 1e-300)
    for _ in range(1 + REWEIGHTS):
        w = 1.0 / scale**2
        xs, norm = _scaled(x, w)
        model = LinearRegression(fit_intercept=False, positive=True)
        model.fit(xs, y - offset, sample_weight=w)
        coef = model.coef_ / norm
        predicted = offset + x @ coef
        # A row the fit gives no time keeps its measured one as its scale.
        scale = np.where(predicted > 0, predicted, np.maximum(y, 1e-300))
    resid = predicted - y
    n, p = x.shape
    dof = max(n - p, 1)
    sigma2 = float((w * resid * resid).sum()) / dof
    xtwx = (xs * w[:, None]).T @ xs
    stderr = np.sqrt(np.clip(np.diag(np.linalg.pinv(xtwx)) * sigma2, 0, None)) / norm
    return Fit(coef, stderr, predicted, r_squared(y, predicted), resid / y)


def r_squared(y: np.ndarray, predicted: np.ndarray) -> float:
    """R^2 of the times; NaN when they do not vary (nothing for a model to explain)."""
    ss_tot = float(((y - y.mean()) ** 2).sum())
    if not len(y) or ss_tot <= (1e-9 * float(np.abs(y).mean())) ** 2 * len(y):
        return float("nan")
    return 1.0 - float(((y - predicted) ** 2).sum()) / ss_tot
