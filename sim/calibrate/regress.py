"""Weighted non-negative least squares with scikit-learn, and what a fit's quality is.

Times span orders of magnitude (a 4 KiB copy takes microseconds, a 64 MiB one
milliseconds), so every fit minimises *relative* residuals: each row is weighted by
``1 / time**2``. Coefficients are non-negative (a latency, a time per byte, a cost per
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


def relative_nnls(x: np.ndarray, y: np.ndarray, offset: np.ndarray | None = None) -> Fit:
    """Fit ``y ~ offset + x @ coef`` with ``coef >= 0``, minimising relative residuals."""
    from sklearn.linear_model import LinearRegression  # imported here: gnnwb sim imports this package

    offset = np.zeros_like(y) if offset is None else offset
    w = 1.0 / np.maximum(y, 1e-300) ** 2
    xs, norm = _scaled(x, w)
    model = LinearRegression(fit_intercept=False, positive=True)
    model.fit(xs, y - offset, sample_weight=w)
    coef = model.coef_ / norm
    predicted = offset + x @ coef
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
