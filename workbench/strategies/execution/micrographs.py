"""Micrographs and how roots are dealt to models and time steps, shared by ``hopgnn`` and
``naive-feature-centric`` (paper 003), and what a real run needs of them.

A **micrograph** (section 4) is one root's sampled L-hop computation tree. It is cut
out of the minibatch blocks the spine already sampled (DGL's block conventions, see
:mod:`workbench.strategies.sampling.base`): starting from the root among the last
block's destinations, each block keeps the edges into the vertices kept so far, and
the next block down keeps those vertices (a destination is its own source) and the
sources of the kept edges. Cutting instead of sampling again keeps the same random
draws, so a plan's byte counts come from exactly the sampled sets.

**Whose minibatch a root belongs to** (``minibatches``). Paper 003 assigns every model
a random minibatch of the whole graph's training vertices, so a model's roots live on
every server (section 5.1: "root vertices are randomly sampled from the global graph").
The spine samples as DGL's distributed data loader does: worker ``w``'s seeds are its
own partition's training vertices, so every root of ``epoch[i][w]`` is already home on
``w``. Two readings:

* ``global`` (the default): ``epoch[i][s]`` is server ``s``'s vertex group after
  HopGNN's redistribution, sampled at home (its steps 1 and 2). The roots of each home
  group, in vertex order, are dealt round-robin to the models (root ``k`` of server
  ``s``'s group to model ``(k + s) mod N``), so each model's minibatch holds about
  ``1/N`` of every server's roots, as a globally random minibatch does; dealing instead
  of drawing keeps the plan free of randomness and the cells balanced.
* ``as-sampled``: model ``d`` trains exactly ``epoch[i][d]`` (the running example of
  section 5.1, where minibatch {6, 3} mixes servers). With the spine's per-partition
  seeds every root is home, so micrograph training has nothing to migrate for and
  equals model-centric training.

A model's micrographs on one server in one time step (a **cell**) train together: one
gather of their deduplicated input features, one forward and backward over the union of
their trees. Roots are kept as rows ``(worker, position)``: position in the seeds of
``epoch[i][worker]``, whose blocks hold the root's tree. A cell that holds roots of two
workers' minibatches (merging, or ``global`` roots of another server) adds the sizes of
the two trees (they were sampled apart, so a vertex in both is computed twice) and
reads each input vertex once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from workbench.errors import ConfigError
from workbench.strategies.execution import _kernels
from workbench.strategies.execution.base import SchemeInputs
from workbench.strategies.sampling.base import Block, Minibatch

MINIBATCHES = ("global", "as-sampled")
MINIBATCHES_HELP = (
    "whose minibatch a root belongs to: 'global' deals each server's sampled roots round-robin "
    "to the models (paper 003's globally random minibatches), 'as-sampled' keeps model d on worker "
    "d's minibatch (with per-partition seeds every root is then already home)"
)


def check_minibatches(value: str, scheme: str) -> str:
    if value not in MINIBATCHES:
        raise ConfigError(
            f"execution strategy {scheme!r}: minibatches {value!r}; allowed: {', '.join(MINIBATCHES)}"
        )
    return value


@dataclass(frozen=True)
class Micrographs:
    """The union of some roots' computation trees: what one cell (or a naive subgraph) trains.

    ``sizes[l]``: ``(num_src, num_dst, num_edges)`` of layer ``l``, input layer first.
    ``input_nodes``: the distinct vertices whose input features layer 0 reads, sorted.
    ``input_edge_src``: the source vertex of every layer-0 edge (repeats kept), when asked for.
    ``sources``: the workers whose minibatches hold the trees (whose sampling they wait for).
    """

    roots: np.ndarray
    sizes: list[tuple[int, int, int]]
    input_nodes: np.ndarray
    input_edge_src: np.ndarray | None
    sources: list[int]

    @property
    def num_roots(self) -> int:
        return int(self.roots.shape[0])


def distinct(values: np.ndarray, bound: int | None = None) -> np.ndarray:
    """The distinct values, sorted.

    With ``bound`` (every value lies in ``[0, bound)``) and at least one value per 64 of it, they
    are marked as bits and read back in order (:func:`_kernels.distinct_ids`, linear in
    ``bound / 64``: 0.4 ms for 100,000 ids under 1.2M against 5.6 ms for a sort); otherwise a
    sort and a compare (faster here than ``np.unique``'s hashing).
    """
    if bound is not None and values.shape[0] * 64 >= bound:
        return _kernels.distinct_ids(values, bound)
    out = np.sort(values)
    if out.shape[0] > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def _sorted_distinct(ids: np.ndarray) -> np.ndarray:
    """:func:`distinct` of vertex ids, bounded by the largest of them."""
    return distinct(ids, int(ids.max()) + 1) if ids.shape[0] else ids


@dataclass(frozen=True)
class Tree:
    """Some roots' computation trees in one minibatch: per-layer ``(num_src, num_dst, num_edges)``
    input layer first, the layer-0 source ids (distinct, in block order) and, when asked for, the
    source id of every layer-0 edge (repeats kept). ``layer_positions[l]``, when asked for: the
    positions in ``blocks[l].src_nodes`` the tree keeps (sorted; its destinations of layer ``l``
    are those of ``layer_positions[l + 1]``, or the roots for the last layer)."""

    sizes: list[tuple[int, int, int]]
    input_ids: np.ndarray
    edge_sources: np.ndarray | None
    layer_positions: tuple[np.ndarray, ...] | None = None


def cut_trees(
    mb: Minibatch, groups: list[np.ndarray], edge_sources: bool = False, layer_positions: bool = False
) -> list[Tree]:
    """The trees of each group of roots (positions in ``mb.seeds``), cut out of ``mb``'s blocks: the
    one micrograph cut, which plans count and real runs build their blocks from (:func:`cell_blocks`).

    Each block keeps the edges into the destinations kept so far, and the block below keeps
    those destinations (a destination is its own source, at the same position:
    ``blocks[l].src_nodes`` starts with ``blocks[l].dst_nodes``) and the kept edges' sources.
    Every group is a bit of one mask per vertex, so all groups are cut in one pass per layer.
    """
    blocks = mb.blocks
    out: list[Tree] = []
    for first in range(0, len(groups), _kernels.LABELS):
        chunk = groups[first : first + _kernels.LABELS]
        labels = len(chunk)
        mask = np.zeros(blocks[-1].num_dst, dtype=np.int64)
        for bit, positions in enumerate(chunk):
            mask[np.asarray(positions, dtype=np.int64)] |= np.int64(1) << bit
        sizes = np.zeros((len(blocks), labels, 3), dtype=np.int64)
        layer_masks: list[np.ndarray] = [mask] * len(blocks)
        dst_mask, dst_counts = mask, _kernels.label_counts(mask, labels)
        for layer in range(len(blocks) - 1, -1, -1):
            block = blocks[layer]
            offsets, order = block.dst_grouping()
            src_mask, edges = _kernels.spread_labels(
                dst_mask, offsets, order, block.edge_src, block.num_src, labels
            )
            if layer:
                src_counts = _kernels.label_counts(src_mask, labels)
            else:  # the input layer's sources themselves, counted on the way
                members, starts = _kernels.label_members(src_mask, labels)
                src_counts = np.diff(starts)
            sizes[layer, :, 0], sizes[layer, :, 1], sizes[layer, :, 2] = src_counts, dst_counts, edges
            layer_masks[layer] = src_mask
            if layer:  # blocks[l].src_nodes == blocks[l - 1].dst_nodes
                dst_mask, dst_counts = src_mask, src_counts
        for bit in range(labels):
            ids = blocks[0].src_nodes[members[starts[bit] : starts[bit + 1]]]
            sources = None
            if edge_sources:
                kept = np.flatnonzero(dst_mask & (np.int64(1) << bit))
                sources = blocks[0].src_nodes[blocks[0].edge_src[edges_into(blocks[0], kept)]]
            positions = None
            if layer_positions:
                positions = tuple(np.flatnonzero(m & (np.int64(1) << bit)) for m in layer_masks)
            tree_sizes = [tuple(int(x) for x in row) for row in sizes[:, bit]]
            out.append(Tree(tree_sizes, ids, sources, positions))  # type: ignore[arg-type]
    return out


def cut_subtree(
    mb: Minibatch, positions: np.ndarray, edge_sources: bool = False
) -> tuple[list[tuple[int, int, int]], np.ndarray, np.ndarray | None]:
    """The trees of the roots ``mb.seeds[positions]`` (:func:`cut_trees` of one group): per-layer
    sizes, layer-0 source ids and, when ``edge_sources``, the source id of every layer-0 edge."""
    (tree,) = cut_trees(mb, [positions], edge_sources)
    return tree.sizes, tree.input_ids, tree.edge_sources


def edges_into(block: Block, kept: np.ndarray) -> np.ndarray:
    """Indices of the block's edges into the destinations at positions ``kept`` (sorted), in edge order.

    Only the kept destinations' edges are visited (through :meth:`Block.dst_grouping`).
    """
    offsets, order = block.dst_grouping()
    edges = _kernels.edges_into(offsets, order, np.asarray(kept, dtype=np.int64))
    return edges if not order.shape[0] else np.sort(edges)


@dataclass(frozen=True, eq=False)
class BlockEdges:
    """One layer of a cell's micrographs: its edges as positions in the layer's sources and
    destinations (destinations first among the sources, DGL's convention) and its edge weights."""

    edge_src: np.ndarray
    edge_dst: np.ndarray
    num_src: int
    num_dst: int
    edge_weight: np.ndarray | None


@dataclass(frozen=True, eq=False)
class CellBlocks:
    """A cell's micrographs as blocks to train on: the union of its roots' trees (input layer first)."""

    blocks: list[BlockEdges]
    input_nodes: np.ndarray  # the distinct vertices whose features layer 0 reads, sorted
    input_index: np.ndarray  # per source of blocks[0], its row in input_nodes
    roots: np.ndarray  # the roots' vertex ids, in the order of blocks[-1]'s destinations


def cell_blocks(row: list[Minibatch], rows: np.ndarray) -> CellBlocks:
    """The blocks of the micrographs of ``rows`` (``(worker, position)`` of roots in ``row[worker]``'s
    seeds), each tree as :func:`cut_trees` cuts it (the cut plans count).

    Several minibatches' trees sit side by side: a layer's sources are its destinations (of
    every tree, in order) followed by each tree's new sources, so each root's computation is
    that of its full minibatch (a vertex in two trees is computed twice, as plans count it).
    """
    parts = distinct(rows[:, 0]).tolist()
    kept = {w: distinct(rows[rows[:, 0] == w, 1]) for w in parts}
    trees = {w: _tree_positions(row[w], kept[w]) for w in parts}
    # The current layer's destinations, as (tree, position in that tree's block) pairs in order.
    part = np.concatenate([np.full(kept[w].shape[0], w, dtype=np.int64) for w in parts])
    pos = np.concatenate([kept[w] for w in parts])
    roots = np.concatenate([row[w].blocks[-1].dst_nodes[kept[w]] for w in parts])
    layers: list[BlockEdges] = []
    for layer in reversed(range(len(row[parts[0]].blocks))):
        block, part, pos = _cell_layer(row, layer, trees, part, pos)
        layers.append(block)
    layers.reverse()
    ids = np.empty(part.shape[0], dtype=np.int64)
    for w in parts:
        ids[part == w] = row[w].blocks[0].src_nodes[pos[part == w]]
    input_nodes = distinct(ids)
    return CellBlocks(layers, input_nodes, np.searchsorted(input_nodes, ids), roots)


def _tree_positions(mb: Minibatch, positions: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per layer, the positions the trees of roots ``mb.seeds[positions]`` keep (:func:`cut_trees`)."""
    (tree,) = cut_trees(mb, [positions], layer_positions=True)
    assert tree.layer_positions is not None
    return tree.layer_positions


def _cell_layer(
    row: list[Minibatch],
    layer: int,
    trees: dict[int, tuple[np.ndarray, ...]],
    part: np.ndarray,
    pos: np.ndarray,
) -> tuple[BlockEdges, np.ndarray, np.ndarray]:
    """Layer ``layer`` of a cell whose destinations are ``(part, pos)``: its edges, and its
    sources as the next layer down's destinations (the destinations, then each tree's new ones)."""
    edge_src, edge_dst, weights, new_part, new_pos = [], [], [], [], []
    num_src = part.shape[0]
    for w, positions in trees.items():
        block = row[w].blocks[layer]
        mine = np.flatnonzero(part == w)
        kept = pos[mine]
        edges = edges_into(block, np.sort(kept))
        fresh = positions[layer][~np.isin(positions[layer], kept)]
        # Block position -> position in the cell's layer (a destination is its own source).
        local = np.full(block.num_src, -1, dtype=np.int64)
        local[kept] = mine
        local[fresh] = num_src + np.arange(fresh.shape[0], dtype=np.int64)
        num_src += fresh.shape[0]
        edge_src.append(local[block.edge_src[edges]])
        edge_dst.append(local[block.edge_dst[edges]])
        if block.edge_weight is not None:
            weights.append(np.asarray(block.edge_weight, dtype=np.float32)[edges])
        new_part.append(np.full(fresh.shape[0], w, dtype=np.int64))
        new_pos.append(fresh)
    weight = np.concatenate(weights) if weights else None
    edges_of_layer = BlockEdges(
        np.concatenate(edge_src), np.concatenate(edge_dst), int(num_src), int(part.shape[0]), weight
    )
    return edges_of_layer, np.concatenate([part, *new_part]), np.concatenate([pos, *new_pos])


def micrographs(row: list[Minibatch], roots: np.ndarray, edge_sources: bool = False) -> Micrographs:
    """The micrographs of ``roots`` (rows ``(worker, position)``) cut from iteration row ``row``;
    ``input_edge_src`` only when ``edge_sources`` (else None: most schemes need only sizes)."""
    return micrographs_of(row, [roots], edge_sources)[0]


def micrographs_of(
    row: list[Minibatch], cells: list[np.ndarray], edge_sources: bool = False
) -> list[Micrographs]:
    """:func:`micrographs` of each of ``cells`` (root rows ``(worker, position)``), each minibatch's
    trees cut together."""
    layers = len(row[0].blocks)
    empty = np.zeros(0, dtype=np.int64)
    # Per worker, the cells with roots in its minibatch and those roots' positions.
    wanted: dict[int, list[tuple[int, np.ndarray]]] = {}
    for c, roots in enumerate(cells):
        for w in distinct(roots[:, 0]).tolist():
            wanted.setdefault(w, []).append((c, roots[roots[:, 0] == w, 1]))
    parts: list[list[tuple[int, Tree, np.ndarray]]] = [[] for _ in cells]
    for w, asks in sorted(wanted.items()):
        trees = cut_trees(row[w], [positions for _, positions in asks], edge_sources)
        for (c, positions), tree in zip(asks, trees, strict=True):
            parts[c].append((w, tree, row[w].seeds[positions]))
    out = []
    for c in range(len(cells)):
        sizes = np.zeros((layers, 3), dtype=np.int64)
        for _, tree, _ in parts[c]:
            sizes += np.array(tree.sizes, dtype=np.int64)
        inputs = [tree.input_ids for _, tree, _ in parts[c]]
        out.append(
            Micrographs(
                roots=np.concatenate([ids for _, _, ids in parts[c]]) if parts[c] else empty,
                sizes=[(int(a), int(b), int(n)) for a, b, n in sizes],
                # Sorted, the reads' lookups of where each vertex lives go through memory in order
                # (3x faster); marked in a flag array up to the largest id rather than sorted (576
                # sorts of 100k-300k ids were half of HopGNN's first plan on products-like).
                input_nodes=_sorted_distinct(np.concatenate(inputs) if len(inputs) > 1 else inputs[0])
                if inputs
                else empty,
                input_edge_src=(
                    np.concatenate([t.edge_sources for _, t, _ in parts[c]] or [empty])  # type: ignore[misc]
                    if edge_sources
                    else None
                ),
                sources=[w for w, _, _ in parts[c]],
            )
        )
    return out


def model_roots(inputs: SchemeInputs, row: list[Minibatch], minibatches: str) -> list[list[np.ndarray]]:
    """``roots[d][s]``: the roots model ``d`` trains whose home server (owner) is ``s``, as
    ``(worker, position)`` rows in vertex order (see the module docstring for ``minibatches``)."""
    n = inputs.num_workers
    owner = inputs.partition.owner
    table: list[list[np.ndarray]] = [[np.zeros((0, 2), dtype=np.int64)] * n for _ in range(n)]
    rows, ids = [], []
    for w, mb in enumerate(row):
        k = mb.seeds.shape[0]
        rows.append(np.stack([np.full(k, w, dtype=np.int64), np.arange(k, dtype=np.int64)], axis=1))
        ids.append(np.asarray(mb.seeds, dtype=np.int64))
    every = np.concatenate(rows)
    vertex = np.concatenate(ids)
    order = np.argsort(vertex, kind="stable")
    every, vertex = every[order], vertex[order]
    home = owner[vertex]
    for s in range(n):
        mine = every[home == s]
        if minibatches == "as-sampled":
            model = mine[:, 0]
        else:
            model = (np.arange(mine.shape[0]) + s) % n
        for d in range(n):
            table[d][s] = mine[model == d]
    return table


MERGE_TO = ("model", "home")
MERGE_TO_HELP = (
    "where merging puts a dropped time step's roots: 'model' spreads them over the same model's other "
    "steps (on other servers); 'home' gives them to the models that visit their home server in the kept "
    "steps, so roots never leave home (paper 003's artifact, dgl_jpgnn_trans_lessjp.py)"
)


def merge_time_steps(
    cells: list[list[np.ndarray]], merges: int, to: str = "model"
) -> tuple[list[int], list[list[np.ndarray]]]:
    """Micrograph merging (paper 003 section 5.3), ``merges`` times.

    ``cells[d][t]``: what model ``d`` trains in time step ``t`` (rows, one per root). Each
    merge finds the time step with the fewest roots over all models (the paper's
    ``ts_min``, approximated by root counts because the micrographs do not exist yet when
    it decides; the first such step on a tie) and spreads each model's roots of that step
    as evenly as possible over the same model's remaining steps, in step order, then drops
    the step. Returns the kept time steps (original numbers: model ``d`` is still at server
    ``(d + t) mod N`` in step ``t``) and the cells of each kept step. A model's roots in an
    iteration never change, only when and where it trains them.

    ``to = "home"`` is the artifact's rule instead: the dropped step's roots on server ``s``
    go to the cells the kept steps run on ``s`` (other models'), each topped up in step
    order to ``total // kept + 1`` roots as the artifact does, so no root trains away from
    home; which model trains a root changes, which the summed gradients do not see.
    """
    if to not in MERGE_TO:
        raise ConfigError(f"micrograph merging: to={to!r}; allowed: {', '.join(MERGE_TO)}")
    steps = list(range(len(cells[0]) if cells else 0))
    if merges < 0 or (steps and merges > len(steps) - 1):
        raise ConfigError(
            f"micrograph merging: merges={merges} with {len(steps)} time steps; "
            f"allowed 0..{max(len(steps) - 1, 0)} (N - 1 merges leave one step: subgraph training)"
        )
    cells = [list(model) for model in cells]
    for _ in range(merges):
        load = [sum(model[j].shape[0] for model in cells) for j in range(len(steps))]
        j = int(np.argmin(load))
        others = [k for k in range(len(steps)) if k != j]
        if to == "home":
            _merge_home(cells, steps, j, others)
        else:
            for model in cells:
                for k, part in zip(others, np.array_split(model[j], len(others)), strict=True):
                    model[k] = np.concatenate([model[k], part])
        for model in cells:
            del model[j]
        del steps[j]
    return steps, cells


def _merge_home(cells: list[list[np.ndarray]], steps: list[int], j: int, others: list[int]) -> None:
    """Deal step ``j``'s roots on each server to the kept steps' cells on that server (in step
    order, each topped up to the server's ``total // kept + 1``), leaving ``cells[.][j]`` as is."""
    n = len(cells)
    for d in range(n):
        server = (d + steps[j]) % n
        kept = [((server - steps[k]) % n, k) for k in others]  # (model, step index) on this server
        total = cells[d][j].shape[0] + sum(cells[m][k].shape[0] for m, k in kept)
        fill = total // len(kept) + 1
        rest = cells[d][j]
        for m, k in kept:
            take = max(0, min(fill - cells[m][k].shape[0], rest.shape[0]))
            cells[m][k] = np.concatenate([cells[m][k], rest[:take]])
            rest = rest[take:]


def adaptive_merge_count(epoch_time: Callable[[int], float], max_merges: int) -> int:
    """Paper 003's examination period (section 5.3): how many merges to keep.

    HopGNN trains its first epoch unmerged, then merges one more time step per epoch and
    stops as soon as an epoch is not faster than the one before, keeping the previous
    count for the rest of training. A plan is one epoch, so the search runs outside the
    scheme: ``epoch_time(m)`` is the epoch time with ``m`` merges (simulated or measured),
    called for ``m = 0, 1, ...`` until it stops improving or ``max_merges`` (``N - 1``)
    is reached. Returns the chosen count, to be given as the scheme's ``merges``.
    """
    best, best_time = 0, epoch_time(0)
    for m in range(1, max_merges + 1):
        t = epoch_time(m)
        if not t < best_time:
            break
        best, best_time = m, t
    return best
