"""The placement study's element ablation: its points change one element each, its table reads them."""

from __future__ import annotations

import pandas as pd

from studies import study_placement as sp


def _elements(full: bool) -> dict[tuple[str, str, str], dict]:
    out = {}
    for p in sp.points(full):
        if p.label["part"] == "elements":
            out[(p.label["element"], p.label["interconnect"], p.label["variant"])] = p.config
    return out


def test_each_element_changes_one_thing() -> None:
    for full in (False, True):
        el = _elements(full)
        grid = {
            (p.label["interconnect"], p.label["placement"]): p.config
            for p in sp.points(full)
            if p.label["part"] == "grid" and p.label["gpus"] == 8
        }
        fill = el[("random's cache fill", "NVSwitch", "baseline")]
        assert fill["placement"] == {"name": "partitioned", "fill": "random"}
        assert {**fill, "placement": {"name": "partitioned"}} == grid[("NVSwitch", "random")]
        cache = el[("cache size", "NVLink bridge", "scheme")]
        assert cache["cache"] == {"capacity": "20%"}
        assert {**cache, "cache": {"capacity": sp.CACHE}} == grid[("NVLink bridge", "song-jiang")]
        assert el[("alpha", "NVSwitch", "scheme")]["placement"] == {"name": "song-jiang", "alpha": 0.3}
        assert el[("LAS factor", "NVSwitch", "scheme")]["sampling"]["factor"] == sp.LAS_MAXIMUM
        assert el[("graph size", "NVSwitch", "baseline")]["graph"] == {"name": "products-like", "scale": 1.0}


def _row(part: str, ms: float, **label) -> dict:
    # loading_ms = 1e3 * busy / (workers * iterations): busy = ms * 8 * 4 / 1e3 with 8 workers, 4 iterations.
    busy = ms * 32 / 1e3
    return {
        "part": part,
        "workers": 8,
        "iterations": 4,
        "gather_local_busy_s": 0.0,
        "d2d_busy_s": busy / 2,
        "h2d_busy_s": busy / 2,
        "gather_remote_busy_s": 0.0,
        **label,
    }


def test_element_table_by_hand() -> None:
    rows = [
        _row("grid", 4.0, interconnect="NVSwitch", gpus=8, placement="random"),
        _row("grid", 2.0, interconnect="NVSwitch", gpus=8, placement="song-jiang"),
        _row("las", 1.0, factor=4.0),
        _row("elements", 6.0, element="cache size", interconnect="NVSwitch", variant="baseline"),
        _row("elements", 2.0, element="cache size", interconnect="NVSwitch", variant="scheme"),
        _row("elements", 4.0, element="LAS factor", interconnect="NVSwitch", variant="baseline"),
        _row("elements", 0.5, element="LAS factor", interconnect="NVSwitch", variant="scheme"),
    ]
    table = sp.element_table(pd.DataFrame(rows)).set_index("element changed to the paper's")
    cache = table.loc[f"{sp.ELEMENT_CHANGE['cache size']}; 8 GPUs, NVSwitch"]
    assert (cache["figure before"], cache["figure after"]) == (2.0, 3.0)
    las = table.loc[f"{sp.ELEMENT_CHANGE['LAS factor']}; 8 GPUs, NVSwitch"]
    assert (las["figure before"], las["figure after"]) == (4.0, 8.0)
    metric = table.loc[f"{sp.ELEMENT_CHANGE['loading metric']}; 8 GPUs, NVSwitch"]
    assert (metric["figure before"], metric["figure after"]) == (2.0, 2.0)
