"""``gnnwb calibrate --published``: the figures file, its errors, and a fit whose answer is known."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from sim.calibrate import load_profile
from sim.calibrate.published import load_published
from sim.calibrate.published_fit import (
    Evaluator,
    fit_published,
    prepare_settings,
    published_profile,
    start_values,
)
from workbench.cli.main import main
from workbench.errors import ConfigError

# A tiny setting: 2 servers of HopGNN's cluster, an SBM graph of 2,000 vertices, 2 iterations.
SETTING = """
[testbed]
hardware = "hopgnn-4xa100-10gbe"
machines = 2

[settings.tiny]
graph = { name = "sbm:n=2000,blocks=8,deg=8,feat=32" }
model = { name = "sage", hidden = 16, num_layers = 2 }
training = { batch_size = 64, iterations = 2, seeds = "global" }
sampling = { name = "neighbor", fanouts = [5, 5] }
execution = { name = "model-centric" }

[settings.bigger]
base = "tiny"
training = { batch_size = 128 }
"""
FIT = """
[fit]
parameters = ["transfer_overhead.gather_remote", "cost.sample.cpu.per_edge"]
start = { "transfer_overhead.gather_remote" = 5e-4 }
"""
FIGURE = """
[[figures]]
setting = "tiny"
quantity = "epoch_s"
value = 0.01
source = "Fig. 1"
"""


def write(tmp_path, text: str, name: str = "figures.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(tmp_path, text: str, *needles: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_published(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


# ---- the file and its errors -----------------------------------------------------------------


def test_a_file_reads_with_named_settings_ranges_and_roles(tmp_path):
    text = (
        SETTING
        + FIT
        + FIGURE
        + """
[[figures]]
id = "share"
setting = "bigger"
quantity = "share"
phases = ["gather_remote"]
value = [0.4, 0.9]
source = "section 3"

[[figures]]
setting = "bigger"
baseline = "tiny"
quantity = "speedup"
value = 2.0
headline = true
source = "Fig. 2"

[[figures]]
setting = "tiny"
quantity = "bytes"
phases = ["gather_remote"]
value = 35e9
use = false
reason = "the graph is scaled"
source = "section 3"
"""
    )
    pub = load_published(write(tmp_path, text))
    assert [f.id for f in pub.fitted()] == ["figures[0]", "share"]
    assert [f.id for f in pub.held_out()] == ["figures[2]"]
    assert [f.id for f in pub.unused()] == ["figures[3]"]
    # A base setting's tables are merged key by key: 'bigger' keeps tiny's iterations and seeds.
    assert pub.settings["bigger"]["training"] == {"batch_size": 128, "iterations": 2, "seeds": "global"}
    assert pub.settings["tiny"]["hardware"] == {"name": "hopgnn-4xa100-10gbe", "machines": 2}
    share = pub.figures[1]
    assert share.target == pytest.approx(math.sqrt(0.4 * 0.9))  # a range's geometric midpoint
    assert share.tolerance == pytest.approx(0.5 * math.log(0.9 / 0.4))  # its half-width in log
    assert pub.figures[0].tolerance == pytest.approx(math.log(1.1))  # one value: 10% reading error


@pytest.mark.parametrize(
    ("figure", "needles"),
    [
        ('setting = "tiny"\nquantity = "epoch_s"\nvalue = 1.0', ("figures[0]", "missing source")),
        (
            'setting = "tiny"\nquantity = "wall"\nvalue = 1.0\nsource = "x"',
            ("figures[0]", "unknown quantity 'wall'"),
        ),
        (
            'setting = "tiny"\nquantity = "epoch_s"\nvalue = -1.0\nsource = "x"',
            ("figures[0].value", "positive"),
        ),
        ('setting = "tiny"\nquantity = "epoch_s"\nvalue = nan\nsource = "x"', ("figures[0].value", "finite")),
        ('setting = "tiny"\nquantity = "epoch_s"\nvalue = inf\nsource = "x"', ("figures[0].value", "finite")),
        (
            'setting = "tiny"\nquantity = "epoch_s"\nvalue = [2.0, 1.0]\nsource = "x"',
            ("figures[0].value", "low above"),
        ),
        (
            'setting = "nope"\nquantity = "epoch_s"\nvalue = 1.0\nsource = "x"',
            ("figures[0].setting", "no setting 'nope'"),
        ),
        (
            'setting = "broken"\nquantity = "epoch_s"\nvalue = 1.0\nsource = "x"',
            ("figures[0].setting", "cannot build"),
        ),
        ('setting = "tiny"\nquantity = "share"\nvalue = 0.5\nsource = "x"', ("figures[0]", "needs phases")),
        (
            'setting = "tiny"\nquantity = "speedup"\nvalue = 2.0\nsource = "x"',
            ("figures[0].baseline", "missing"),
        ),
        (
            'setting = "tiny"\nquantity = "epoch_s"\nvalue = 1.0\nsource = "x"\nuse = false',
            ("figures[0]", "reason"),
        ),
    ],
)
def test_a_bad_figure_is_one_line_naming_it(tmp_path, figure, needles):
    broken = '\n[settings.broken]\nbase = "tiny"\nexecution = { name = "no-such-scheme" }\n'
    refused(tmp_path, SETTING + broken + FIT + "\n[[figures]]\n" + figure + "\n", *needles)


def test_an_unknown_parameter_is_refused_naming_it(tmp_path):
    text = SETTING + FIGURE + '\n[fit]\nparameters = ["cost.sample.cpu.per_banana"]\n'
    refused(tmp_path, text, "fit.parameters[0]", "per_banana", "forms")
    text = SETTING + FIGURE + '\n[fit]\nparameters = ["link.warp-drive.bandwidth"]\n'
    pub = load_published(write(tmp_path, text))  # a link kind is known once the clusters are
    with pytest.raises(ConfigError, match=r"fit.parameters\[0\]: no link of kind 'warp-drive'"):
        start_values(pub, {})


def test_a_file_with_nothing_to_fit_is_refused(tmp_path):
    headline = FIGURE.replace('source = "Fig. 1"', 'source = "Fig. 1"\nheadline = true')
    refused(tmp_path, SETTING + FIT + headline, "no non-headline figure to fit")
    refused(tmp_path, SETTING + FIGURE, "parameters is empty")


def test_the_command_line_says_one_line(tmp_path, capsys):
    path = write(tmp_path, SETTING + FIT + FIGURE.replace('source = "Fig. 1"\n', ""))
    code = main(["calibrate", "--published", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "figures[0]: missing source" in err and "\n" not in err
    assert main(["calibrate", "--published", str(path), str(path)]) == 2
    assert "no traces as well" in capsys.readouterr().err


# ---- the fit ------------------------------------------------------------------------------

TRUE = {"transfer_overhead.gather_remote": 2e-3, "cost.sample.cpu.per_edge": 4e-7}


def synthetic(tmp_path, extra: str = "") -> str:
    """Figures of the tiny settings simulated with :data:`TRUE`, as a figures file's text."""
    skeleton = SETTING + FIT + FIGURE + FIGURE.replace('"tiny"', '"bigger"')
    pub = load_published(write(tmp_path, skeleton, "skeleton.toml"))
    settings = prepare_settings(pub)
    start = start_values(pub, settings)
    evaluator = Evaluator(pub, settings, start)
    metrics = evaluator.metrics(np.array([math.log(TRUE[p.name] / start[p.name]) for p in pub.parameters]))
    tiny, bigger = metrics["tiny"], metrics["bigger"]
    busy = sum(tiny.busy.values())
    figures = [
        ("tiny", "epoch_s", "", tiny.epoch_s),
        ("tiny", "share", 'phases = ["gather_remote"]', tiny.busy["gather_remote"] / busy),
        ("tiny", "share", 'phases = ["sample"]', tiny.busy["sample"] / busy),
        ("bigger", "iteration_s", "", bigger.epoch_s / bigger.iterations),
    ]
    text = SETTING + FIT
    for setting, quantity, phases, value in figures:
        text += f'\n[[figures]]\nsetting = "{setting}"\nquantity = "{quantity}"\n{phases}\nvalue = {value!r}\nsource = "synthetic"\n'
    return text + extra


def test_a_fit_recovers_known_parameters(tmp_path):
    """The start is 4x (overhead) and 4x (per edge) off the truth. The simulation is deterministic,
    so the figures are matched exactly at the truth; what limits recovery is the optimizer's
    stopping rule (xtol 1e-8 on log parameters) and the 5% finite-difference steps on a schedule that
    is piecewise linear in the parameters: 1% is well above both and far below the 4x start error."""
    pub = load_published(write(tmp_path, synthetic(tmp_path)))
    result = fit_published(pub)
    for name, value in TRUE.items():
        assert result.values[name] == pytest.approx(value, rel=0.01), name
    assert result.cost < 1e-4
    profile = published_profile(result)
    path = profile.write(tmp_path / "profile.toml")
    loaded = load_profile(path)  # what gnnwb sim --hardware reads
    assert loaded.cost_model.transfer_overhead["gather_remote"] == pytest.approx(
        TRUE["transfer_overhead.gather_remote"], rel=0.01
    )
    data = tomllib.loads(path.read_text())
    assert data["provenance"]["figures_sha256"] == pub.sha256
    assert data["provenance"]["fitted"] == ["figures[0]", "figures[1]", "figures[2]", "figures[3]"]


def test_headline_figures_never_enter_the_fit(tmp_path):
    """A headline (and a held-out) figure that no parameter could meet changes nothing in the fit,
    and is reported with its error afterwards."""
    absurd = """
[[figures]]
id = "headline"
setting = "tiny"
quantity = "epoch_s"
value = 1000.0
headline = true
source = "Fig. 9"

[[figures]]
id = "held"
setting = "bigger"
baseline = "tiny"
quantity = "speedup"
value = 50.0
held_out = true
source = "Fig. 10"
"""
    plain = fit_published(load_published(write(tmp_path, synthetic(tmp_path), "plain.toml")))
    pub = load_published(write(tmp_path, synthetic(tmp_path, absurd), "with.toml"))
    settings = prepare_settings(pub)
    evaluator = Evaluator(pub, settings, start_values(pub, settings))
    assert evaluator.residuals(np.zeros(2)).shape == (4,)  # the 4 fitted figures only
    with_headline = fit_published(pub)
    assert with_headline.values == plain.values
    rows = {r["id"]: r for r in with_headline.rows}
    assert rows["headline"]["role"] == "headline" and rows["headline"]["ratio"] < 0.01
    assert rows["held"]["role"] == "held out" and rows["held"]["workbench"] < 50


def test_joined_parameters_share_one_value(tmp_path):
    """'+' joins phases or link kinds under one value: a scale of 2 doubles both phases' coefficients
    (the default GPU's 5 us intercept becomes 10 us), a bandwidth scale both kinds' links."""
    from sim.calibrate.published_fit import cluster_for, cost_model_for
    from workbench.hardware import load_hardware

    text = (
        SETTING
        + FIGURE
        + '\n[fit]\nparameters = ["cost.forward+backward.default.scale", "link.pcie+network.bandwidth"]\n'
    )
    pub = load_published(write(tmp_path, text))
    costs = cost_model_for(
        pub, {"cost.forward+backward.default.scale": 2.0, "link.pcie+network.bandwidth": 1.0}
    )
    for phase in ("forward", "backward"):
        assert costs.phases[phase]["default"].intercept == pytest.approx(10e-6)
        assert costs.phases[phase]["default"].per_flop == pytest.approx(4.0)
    cluster = load_hardware("hopgnn-4xa100-10gbe", machines=2)
    start = {"cost.forward+backward.default.scale": 1.0, "link.pcie+network.bandwidth": 1.25e9}
    faster = cluster_for(cluster, pub, {**start, "link.pcie+network.bandwidth": 2.5e9}, start)
    for old, new in zip(cluster.links, faster.links, strict=True):
        assert new.bandwidth == pytest.approx(old.bandwidth * (2 if old.kind in ("pcie", "network") else 1))
    refused(
        tmp_path,
        SETTING + FIGURE + '\n[fit]\nparameters = ["cost.forward+nope.default.scale"]\n',
        "fit.parameters[0]",
    )


# ---- the papers' files and their committed profiles ----------------------------------------

PUBLISHED = Path(__file__).resolve().parents[2] / "studies" / "published"


@pytest.mark.parametrize("path", sorted(PUBLISHED.glob("*.toml")), ids=lambda p: p.stem)
def test_each_papers_file_reads_and_names_its_sources(path):
    pub = load_published(path, require_fit=False)
    assert pub.figures and all(f.source.strip() for f in pub.figures)
    assert all(f.reason.strip() for f in pub.unused())


@pytest.mark.parametrize("path", sorted((PUBLISHED / "profiles").glob("*.toml")), ids=lambda p: p.stem)
def test_committed_profiles_load_and_match_their_figures_file(path):
    """A committed profile was fitted to the figures file as it is now (refit after editing one:
    gnnwb calibrate --published studies/published/NAME.toml -o studies/published/profiles/NAME.profile.toml)."""
    loaded = load_profile(path)
    provenance = tomllib.loads(path.read_text())["provenance"]
    figures = PUBLISHED / Path(provenance["figures_file"]).name
    assert provenance["figures_sha256"] == load_published(figures).sha256
    assert loaded.cluster.name == load_published(figures).hardware
