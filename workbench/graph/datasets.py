"""Named data sets: presets shaped like the papers' graphs, ad-hoc generator specs, files.

:func:`load_dataset` resolves a name in this order:

1. a **preset** (``products-like``, ...; see :data:`DATASETS`): a synthetic graph shaped like
   a real one, sized down by ``scale`` (a fraction of the real vertex count) and, where
   the real average degree would make a machine-sized graph too heavy, by the preset's
   ``degree_scale`` (a fraction of the real average degree). ``graph.meta["full_size"]``
   records the real graph's size, ``meta["scale"]`` and ``meta["degree_scale"]`` what was kept;
2. an **ad-hoc generator spec**: ``rmat:n=100000,m=2000000``, ``sbm:n=50000,blocks=20,deg=12,p_in=0.8``
   or ``er:n=1000,deg=8`` (keys in :data:`SPEC_KEYS`), or a ``.toml`` file holding the same
   keys plus ``generator = "rmat"`` (see ``examples/datasets/``);
3. a **real graph an installed package ships** (``karate``, ``les-miserables``, ...; see
   :data:`REAL_GRAPHS`);
4. a **path**: a graph saved by :func:`workbench.graph.io.save_graph` (``.npz``), a DGL
   ``save_graphs`` file (``.bin``) or an OGB node-property data set folder.

Generated graphs are cached on disk in ``graphs/`` under :func:`workbench.cache_root.cache_root`
(``$GNNWB_CACHE``, else ``~/.cache/gnnwb``), under a hash of the generator, all its parameters
and the file format version.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.cache_root import cache_root
from workbench.errors import ConfigError, GraphFormatError, UnknownNameError
from workbench.graph import io, specs
from workbench.graph.csr import CSRGraph
from workbench.tomlfile import read_toml
from workbench.validate import existing_file, finite_number, integer, string, table

Progress = Callable[[str], None]


@dataclass(frozen=True)
class FullSize:
    """The real graph a preset imitates, as its source reports it."""

    source: str
    nodes: int
    edges: int  # as the source counts them
    stored_edges: int  # directed edges of the symmetric graph GNN training uses
    feat_dim: int
    classes: int
    train_fraction: float
    val_fraction: float
    test_fraction: float

    @property
    def avg_degree(self) -> float:
        return self.stored_edges / self.nodes


@dataclass(frozen=True)
class Preset:
    """A synthetic stand-in for a real graph."""

    name: str
    full: FullSize
    generator: str  # "rmat" or "sbm"
    default_scale: float
    degree_scale: float
    communities_per_class: int
    p_in: float  # share of edges inside planted communities (about the real graph's edge homophily)
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def size_at(self, scale: float, degree_scale: float | None = None) -> tuple[int, int]:
        """(vertices, stored directed edges) at ``scale``."""
        nodes = max(64, int(round(self.full.nodes * scale)))
        degree = self.full.avg_degree * (self.degree_scale if degree_scale is None else degree_scale)
        edges = int(round(nodes * degree / 2)) * 2
        return nodes, edges


DATASETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="pubmed-like",
            full=FullSize(
                "PubMed (Planetoid)", 19_717, 88_648, 88_648, 500, 3, 60 / 19_717, 500 / 19_717, 1000 / 19_717
            ),
            generator="sbm",
            default_scale=1.0,
            degree_scale=1.0,
            communities_per_class=4,
            p_in=0.80,
            params={"degree_exponent": 2.8, "block_concentration": 4.0},
            description="citation graph, few classes, strong homophily; degree-corrected SBM",
        ),
        Preset(
            name="reddit-like",
            full=FullSize(
                "Reddit (GraphSAGE)",
                232_965,
                114_615_892,
                114_615_892,
                602,
                41,
                153_431 / 232_965,
                23_831 / 232_965,
                55_703 / 232_965,
            ),
            generator="rmat",
            default_scale=0.5,
            degree_scale=0.1,
            communities_per_class=1,
            p_in=0.75,
            params={"a": 0.45, "b": 0.2, "c": 0.2, "connect_isolated": True},
            description="very dense post graph (average degree ~492), communities = subreddits; R-MAT",
        ),
        Preset(
            name="arxiv-like",
            full=FullSize(
                "ogbn-arxiv",
                169_343,
                1_166_243,
                2 * 1_166_243,
                128,
                40,
                90_941 / 169_343,
                29_799 / 169_343,
                48_603 / 169_343,
            ),
            generator="sbm",
            default_scale=1.0,
            degree_scale=1.0,
            communities_per_class=2,
            p_in=0.65,
            params={"degree_exponent": 2.5, "block_concentration": 2.0},
            description="citation graph with 40 subject areas; degree-corrected SBM",
        ),
        Preset(
            name="products-like",
            full=FullSize(
                "ogbn-products",
                2_449_029,
                61_859_140,
                2 * 61_859_140,
                100,
                47,
                196_615 / 2_449_029,
                39_323 / 2_449_029,
                2_213_091 / 2_449_029,
            ),
            generator="rmat",
            default_scale=0.5,
            degree_scale=1 / 3,
            communities_per_class=4,
            p_in=0.80,
            params={"a": 0.45, "b": 0.2, "c": 0.2, "connect_isolated": True},
            description=(
                "co-purchase graph. Default: half the vertices (1,224,514) but a third of the real average "
                "degree (~16.8 instead of ~50.5, ~20.6M stored edges) so it generates in seconds; R-MAT "
                "with planted communities, isolated vertices connected"
            ),
        ),
        Preset(
            name="papers-like",
            full=FullSize(
                "ogbn-papers100M",
                111_059_956,
                1_615_685_872,
                2 * 1_615_685_872,
                128,
                172,
                1_207_179 / 111_059_956,
                125_265 / 111_059_956,
                214_338 / 111_059_956,
            ),
            generator="rmat",
            default_scale=0.005,
            degree_scale=0.5,
            communities_per_class=2,
            p_in=0.60,
            params={"a": 0.45, "b": 0.2, "c": 0.2, "connect_isolated": True},
            description="citation graph sized way down (0.5% of the vertices, half the degree); R-MAT",
        ),
    )
}

# Keys of ad-hoc specs ("rmat:n=...,m=..."), with their defaults (None: required). n: vertices;
# m: stored directed edges (a symmetric graph stores both directions of m/2 edges); deg: m/n;
# communities: planted communities (default 2 per class); p_in: share of edges inside them;
# connect=1: give R-MAT's isolated vertices one edge each; exponent: degree-corrected SBM tail
# exponent; concentration: Dirichlet block sizes.
# Node data (all generators): classes, feat (dims), train/val/test fractions, noise (label noise).
SPEC_KEYS: dict[str, dict[str, Any]] = {
    "rmat": {
        "n": None,
        "m": None,
        "a": 0.57,
        "b": 0.19,
        "c": 0.19,
        "communities": None,
        "p_in": 0.7,
        "connect": 0,
    },
    "sbm": {"n": None, "blocks": None, "deg": None, "p_in": 0.8, "exponent": None, "concentration": None},
    "er": {"n": None, "deg": None},
}
_NODE_DATA_KEYS: dict[str, Any] = {
    "classes": 8,
    "feat": 64,
    "train": 0.6,
    "val": 0.2,
    "test": 0.2,
    "noise": 0.05,
}


def default_cache_dir() -> Path:
    return cache_root() / "graphs"


def load_dataset(
    name: str,
    scale: float | None = None,
    seed: int = 0,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    *,
    degree_scale: float | None = None,
    progress: Progress | None = None,
    seed_name: str = "--graph-seed",
    scale_name: str = "--scale",
) -> CSRGraph:
    """The graph called ``name`` (a preset, an ad-hoc spec, a shipped real graph or a path); see the module doc.

    ``scale`` is a fraction of the real graph's vertex count (presets) or a factor on
    ``n`` and ``m`` (ad-hoc specs); ``None`` takes the preset's default. Defaults:
    products-like keeps half of ogbn-products' vertices (1,224,514) but only a third of
    its average degree (``degree_scale`` 1/3: ~16.8 instead of ~50.5, ~20.6M stored
    edges) so it generates in ~10 s; reddit-like keeps a tenth of Reddit's degree and
    papers-like half of papers100M's, at 0.5% of its vertices. ``meta["degree_scale"]``
    always records what was kept. ``progress`` receives one line per stage.

    ``seed_name`` and ``scale_name`` are what errors call the seed and the scale (the
    command-line options by default; ``[graph] seed`` for a run configuration).
    """
    recipe = resolve(
        name, scale=scale, seed=seed, degree_scale=degree_scale, seed_name=seed_name, scale_name=scale_name
    )
    if recipe is None:
        from workbench.graph import loaders

        _refuse_unknown_generator(name)
        if scale is not None or degree_scale is not None:
            # A stored graph has one size; silently ignoring the factor would mislead.
            raise ConfigError(
                f"{name}: scale applies only to presets and generator specs, not to stored graphs"
            )
        if name in loaders.REAL_GRAPHS:
            return loaders.load_real_graph(name, seed=seed)
        path = Path(name).expanduser()
        if path.exists():
            return loaders.load_graph_file(path)
        if os.sep in name or path.suffix:
            raise GraphFormatError(f"{name}: no such graph file or folder")
        raise UnknownNameError(
            f"unknown data set {name!r}; valid: {', '.join([*DATASETS, *loaders.REAL_GRAPHS])}, "
            "an ad-hoc spec (rmat:n=...,m=... | sbm:n=...,blocks=...,deg=... | er:n=...,deg=...) or a path"
        )
    path = cache_path(recipe, cache_dir) if cache else None
    if path is not None and path.is_file():
        try:
            graph = io.load_graph(path)
            graph.meta["cache_path"] = str(path)
            return graph
        except GraphFormatError:
            _say(progress, f"cache file {path} is unreadable; regenerating")
    if path is not None:  # refused before generating, as memory is (in generate)
        where = recipe.extra_meta.get("spec", recipe.name)
        specs.check_disk(recipe.structure["num_nodes"], stored_edges(recipe), path.parent, where)
    graph = generate(recipe, progress=progress)
    if path is not None:
        _say(progress, f"writing {path}")
        try:
            io.save_graph(graph, path)
            graph.meta["cache_path"] = str(path)
        except OSError as exc:  # a read-only or full cache is not fatal: the graph is in memory
            _say(progress, f"could not write the cache ({exc})")
    return graph


def _refuse_unknown_generator(name: str) -> None:
    """``ba:n=100,m=3`` names a generator that does not exist, not a missing file: say so."""
    kind, sep, body = name.partition(":")
    if sep and "=" in body and os.sep not in kind and not Path(name).expanduser().exists():
        raise UnknownNameError(
            f"{name}: unknown generator {kind!r}; generators: {', '.join(SPEC_KEYS)} "
            "(rmat:n=...,m=... | sbm:n=...,blocks=...,deg=... | er:n=...,deg=...)"
        )


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a generated graph; its hash keys the cache."""

    name: str
    generator: str
    structure: dict[str, Any]
    node_data: dict[str, Any]
    seed: int
    extra_meta: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        payload = {
            "format": io.FORMAT_VERSION,
            "generator": self.generator,
            "structure": self.structure,
            "node_data": self.node_data,
            "seed": self.seed,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def cache_path(recipe: Recipe, cache_dir: str | os.PathLike | None = None) -> Path:
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in recipe.name)[:60]
    return base / f"{safe}-{recipe.key()[:16]}.npz"


def resolve(
    name: str,
    scale: float | None = None,
    seed: int = 0,
    degree_scale: float | None = None,
    *,
    seed_name: str = "seed",
    scale_name: str = "scale",
) -> Recipe | None:
    """The recipe of a preset or ad-hoc spec; ``None`` when ``name`` is neither.

    The seed must be a non-negative int64 (numpy seeds take no negative number) and
    scales finite and positive; errors call them ``seed_name`` and ``scale_name``.
    """
    string(name, "graph name", nonempty=True)
    if scale is not None:
        finite_number(scale, scale_name, positive=True)
    if degree_scale is not None:
        finite_number(degree_scale, "degree_scale", positive=True)
    integer(seed, seed_name, minimum=0)
    if name in DATASETS:
        return _preset_recipe(DATASETS[name], scale, seed, degree_scale)
    kind, sep, _ = name.partition(":")
    if sep and kind in SPEC_KEYS:
        return _spec_recipe(name, scale, seed)
    if name.endswith(".toml"):
        path = existing_file(Path(name).expanduser(), "graph description file")
        return _toml_recipe(path, scale, seed)
    return None


def _preset_recipe(preset: Preset, scale: float | None, seed: int, degree_scale: float | None) -> Recipe:
    scale = preset.default_scale if scale is None else scale
    kept_degree = preset.degree_scale if degree_scale is None else degree_scale
    wanted_nodes = preset.full.nodes * scale
    wanted_edges = wanted_nodes * preset.full.avg_degree * kept_degree
    if wanted_nodes > specs.MAX_NODES or wanted_edges > specs.INT64_MAX:
        raise ConfigError(
            f"{preset.name} at scale {scale:g} (degree scale {kept_degree:g}) is {wanted_nodes:.3g} vertices "
            f"and {wanted_edges:.3g} edges; at most {specs.MAX_NODES} vertices are possible"
        )
    nodes, edges = preset.size_at(scale, kept_degree)
    full = preset.full
    communities = min(full.classes * preset.communities_per_class, max(1, nodes // 16))
    if preset.generator == "rmat":
        structure = {
            "num_nodes": nodes,
            "num_edges": edges,
            "num_communities": communities,
            "p_in": preset.p_in,
        }
    else:
        structure = {
            "num_nodes": nodes,
            "num_blocks": communities,
            "avg_degree": edges / nodes,
            "p_in_fraction": preset.p_in,
        }
    structure.update(preset.params)
    node_data = {
        "num_classes": full.classes,
        "feat_dim": full.feat_dim,
        "train_fraction": full.train_fraction,
        "val_fraction": full.val_fraction,
        "test_fraction": full.test_fraction,
        "label_noise": 0.05,
    }
    extra = {
        "preset": preset.name,
        "full_size": asdict(full),
        "scale": scale,
        "degree_scale": kept_degree,
        "description": preset.description,
    }
    return Recipe(preset.name, preset.generator, structure, node_data, seed, extra)


def _spec_recipe(spec: str, scale: float | None, seed: int) -> Recipe:
    kind, _, body = spec.partition(":")
    allowed = {**SPEC_KEYS[kind], **_NODE_DATA_KEYS}
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or key not in allowed:
            raise ConfigError(
                f"{spec}: unknown or malformed entry {item!r}; keys for {kind}: {', '.join(allowed)}"
            )
        if key in values:  # which one was meant is anybody's guess
            raise ConfigError(f"{spec}: {key} is given twice")
        number = specs.parse_number(raw)
        if number is None:
            raise ConfigError(f"{spec}: {key}={raw.strip()!r} is not a number")
        values[key], spelled[key] = number, raw
    return _generator_recipe(spec, kind, values, scale, seed, spelled=spelled)


def _toml_recipe(path: Path, scale: float | None, seed: int) -> Recipe:
    """A generator graph described by a TOML file: ``generator = "rmat"`` plus the spec keys.

    See ``examples/datasets/*.toml``. ``seed`` in the file overrides the caller's.
    """
    document = read_toml(path, "graph recipe")
    values = dict(table(document.get("graph", document), f"{path}: [graph]"))
    kind = values.pop("generator", None)
    if not isinstance(kind, str) or kind not in SPEC_KEYS:
        raise ConfigError(f"{path}: generator must be one of {', '.join(SPEC_KEYS)}, got {kind!r}")
    string(values.pop("description", ""), f"{path}: description")
    if "seed" in values:
        seed = integer(values.pop("seed"), f"{path}: seed", minimum=0)
    allowed = {**SPEC_KEYS[kind], **_NODE_DATA_KEYS}
    for key in values:
        if key not in allowed:
            raise ConfigError(f"{path}: unknown key {key!r}; keys for {kind}: {', '.join(allowed)}")
    return _generator_recipe(path.stem, kind, values, scale, seed, where=str(path))


def _generator_recipe(
    name: str,
    kind: str,
    values: dict[str, Any],
    scale: float | None,
    seed: int,
    where: str | None = None,
    spelled: dict[str, str] | None = None,
) -> Recipe:
    """The recipe of generator ``kind`` with ``values``: each value checked by its rule
    (:data:`workbench.graph.specs.RULES`), then the sizes at ``scale``, before anything is built.
    ``spelled``: the values' text in a spec, shown in errors as the user wrote them."""
    where = where or name
    spelled = spelled or {}
    checked = {key: specs.check_param(key, value, where, spelled.get(key)) for key, value in values.items()}
    params = {**SPEC_KEYS[kind], **_NODE_DATA_KEYS, **checked}
    missing = [
        k for k, v in params.items() if v is None and k not in ("communities", "exponent", "concentration")
    ]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    _check_node_data(params, where)
    factor = 1.0 if scale is None else scale
    n = specs.scaled_nodes(params["n"], factor, where)
    classes = params["classes"]
    if kind == "rmat":
        structure = _rmat_structure(params, n, factor, where)
    elif kind == "sbm":
        structure = _sbm_structure(params, n, where)
    else:
        if params["deg"] > n - 1:
            raise ConfigError(
                f"{where}: deg must be at most n-1 = {n - 1} (a vertex has n-1 possible neighbors), "
                f"got {params['deg']}"
            )
        structure = {"num_nodes": n, "avg_degree": float(params["deg"])}
    node_data = {
        "num_classes": classes,
        "feat_dim": params["feat"],
        "train_fraction": params["train"],
        "val_fraction": params["val"],
        "test_fraction": params["test"],
        "label_noise": params["noise"],
    }
    return Recipe(name, kind, structure, node_data, seed, {"spec": where, "scale": factor, "params": params})


def _check_node_data(params: dict[str, Any], where: str) -> None:
    split = params["train"] + params["val"] + params["test"]
    if split > 1.0 + 1e-9:
        raise ConfigError(
            f"{where}: train + val + test must be at most 1, got "
            f"{params['train']} + {params['val']} + {params['test']} = {split:g}"
        )


def _rmat_structure(params: dict[str, Any], n: int, factor: float, where: str) -> dict[str, Any]:
    a, b, c = params["a"], params["b"], params["c"]
    if a + b + c >= 1:
        raise ConfigError(f"{where}: a + b + c must be below 1 (d = 1 - a - b - c > 0), got {a + b + c:g}")
    m = specs.scaled_edges(params["m"], factor, where)
    specs.check_density(n, m, where)
    communities = params["communities"]
    if communities is None:
        communities = min(params["classes"] * 2, n)  # the default follows the classes, within n
    elif communities > n:
        raise ConfigError(f"{where}: communities={communities} is more than the {n} vertices")
    return {
        "num_nodes": n,
        "num_edges": m,
        "a": a,
        "b": b,
        "c": c,
        "num_communities": communities,
        "p_in": params["p_in"],
        "connect_isolated": bool(params["connect"]),
    }


def _sbm_structure(params: dict[str, Any], n: int, where: str) -> dict[str, Any]:
    if params["blocks"] > n:
        raise ConfigError(f"{where}: blocks={params['blocks']} is more than the {n} vertices")
    specs.check_density(n, n * float(params["deg"]), where)
    return {
        "num_nodes": n,
        "num_blocks": params["blocks"],
        "avg_degree": float(params["deg"]),
        "p_in_fraction": params["p_in"],
        "degree_exponent": params["exponent"],
        "block_concentration": params["concentration"],
    }


def stored_edges(recipe: Recipe) -> int:
    """The stored (directed) edges ``recipe`` asks for (ER's duplicates are dropped after)."""
    s = recipe.structure
    if recipe.generator == "rmat":
        return int(s["num_edges"])
    return int(round(s["num_nodes"] * s["avg_degree"]))


def generate(recipe: Recipe, progress: Progress | None = None) -> CSRGraph:
    """Build the graph a recipe describes (no cache)."""
    from workbench.graph import generators
    from workbench.graph._edge_kernels import same_community_edges
    from workbench.graph.signal import attach_node_data

    s = recipe.structure
    where = recipe.extra_meta.get("spec", recipe.name)
    specs.check_memory(s["num_nodes"], stored_edges(recipe), where, recipe.generator)
    _say(progress, f"generating {recipe.generator} structure: {s['num_nodes']:,} vertices")
    if recipe.generator == "rmat":
        graph = generators.rmat(seed=recipe.seed, name=recipe.name, **s)
    elif recipe.generator == "sbm":
        graph = generators.sbm(seed=recipe.seed, name=recipe.name, **s)
    elif recipe.generator == "er":
        graph = generators.erdos_renyi(s["num_nodes"], s["avg_degree"], recipe.seed, name=recipe.name)
    else:  # pragma: no cover - recipes come from resolve()
        raise ConfigError(f"unknown generator {recipe.generator!r}")
    _say(progress, "attaching labels, splits and feature parameters")
    nd = dict(recipe.node_data)
    attach_node_data(
        graph,
        nd.pop("num_classes"),
        nd.pop("feat_dim"),
        recipe.seed,
        **nd,
    )
    if graph.communities is not None and graph.num_edges:
        same = same_community_edges(graph.indptr, graph.indices, graph.communities)
        graph.meta["intra_community_share"] = same / graph.num_edges
    graph.meta.update(recipe.extra_meta)
    graph.meta["recipe_key"] = recipe.key()
    return graph


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)
