"""An epoch of sampled minibatches: each worker's seed batches, the sampling, and its disk cache.

Seeds follow DGL's distributed training by default: worker ``w`` trains on the training
vertices its partition part owns, shuffled with the run's seed and cut into batches of
``batch_size`` (``[training] seeds = "global"`` deals one global shuffle instead). Every worker takes part in every iteration, so an epoch has as many
iterations as the worker with the fewest training vertices has batches (its last
batch may be short); ``iterations`` caps that for quick runs.

Sampling an epoch of a large graph takes seconds to minutes, and a sweep over
placements, hardware or schemes needs the same minibatches each time, so epochs are
cached on disk (``$GNNWB_CACHE/samples``, else ``~/.cache/gnnwb/samples``) under a
hash of what determines them: the graph (name, size and a fingerprint of its
structure), the sampler's name and parameters, every seed batch (which encodes the
partition, the batch size and the seed) and the sampling seed. A cache file that is
unreadable is sampled again, never trusted. Files are :mod:`workbench.mapped_arrays`: a
loaded epoch's arrays are views of the file's pages, not copies.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workbench.cache_root import cache_root
from workbench.errors import ConfigError
from workbench.graph.csr import CSRGraph
from workbench.mapped_arrays import read_mapped_arrays, write_mapped_arrays
from workbench.strategies.sampling.base import Block, Minibatch, Sampler
from workbench.strategies.sampling.bulk_matrix import BulkMatrixSampler, LayerStream

CACHE_VERSION = 2  # bump when the file layout or the sampling order changes (2: mapped arrays, not npz)
# Minibatches handed to a sampler at once: a multiple of bulk samplers' bulk size, and the
# progress bar's step. Fixed, so the same seed always draws the same samples.
SAMPLE_CHUNK = 64
# The epoch this process sampled or loaded last, by cache path: a sweep in one process (a
# benchmark, a study's worker process) reuses it without reading the file again. One
# epoch only, to bound memory; minibatches are never modified by the schemes.
_LAST: list[object] = [None, None]


SEED_LAYOUTS = ("partition", "global")


def worker_seed_batches(
    graph: CSRGraph,
    owner: np.ndarray,
    num_workers: int,
    batch_size: int,
    seed: int,
    iterations: int | None = None,
    layout: str = "partition",
) -> list[list[np.ndarray]]:
    """``batches[i][w]``: worker ``w``'s sorted seed vertices in iteration ``i``.

    ``layout``: ``partition`` (DistDGL: each worker draws from the training vertices its
    part owns) or ``global`` (one shuffle of all training vertices dealt to the workers in
    turn, as single-machine DGL and HopGNN's model-centric baseline do: a minibatch's
    roots live anywhere).
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    if layout not in SEED_LAYOUTS:
        raise ConfigError(f"seed layout {layout!r}; allowed: {', '.join(SEED_LAYOUTS)}")
    train = graph.train_nids()
    rng = np.random.default_rng([seed, 1])
    if layout == "global":
        order = rng.permutation(train)
        per_worker = [order[w::num_workers] for w in range(num_workers)]
    else:
        per_worker = [rng.permutation(train[owner[train] == w]) for w in range(num_workers)]
    fewest = min(p.shape[0] for p in per_worker)
    if fewest == 0:
        empty = [w for w, p in enumerate(per_worker) if p.shape[0] == 0]
        raise ConfigError(
            f"worker {empty[0]} owns no training vertex of {graph.name!r} "
            f"({train.shape[0]} training vertices over {num_workers} workers): use fewer workers "
            "or a partitioner that balances training vertices"
        )
    count = -(-fewest // batch_size)
    if iterations is not None:
        count = min(count, iterations)
    return [[np.sort(p[i * batch_size : (i + 1) * batch_size]) for p in per_worker] for i in range(count)]


def sample_epoch(
    graph: CSRGraph,
    samplers: Sequence[Sampler],
    batches: list[list[np.ndarray]],
    seed: int,
    *,
    describe: dict[str, Any] | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = False,
) -> list[list[Minibatch]]:
    """Each worker's minibatches (``samplers[w]`` on ``batches[i][w]``), from the cache when there.

    ``describe`` names the samplers for the cache key (name and parameters); without it
    nothing is cached. Worker ``w`` samples its epoch ``SAMPLE_CHUNK`` minibatches at a
    time (bulk samplers bulk within them) from its own generator, seeded with ``[seed, w]``.
    """
    path = None
    if describe is not None:
        path = _cache_path(graph, describe, batches, seed, cache_dir)
        if _LAST[0] == path and path.is_file():
            return _LAST[1]  # type: ignore[return-value]
    # Let go of the last epoch before making another: while it is kept, its bulk outputs are in
    # use and the new epoch's are faulted in afresh (products-like: 1.2 GB, 3-5 s more sampling).
    _LAST[:] = [None, None]
    if path is not None:
        cached = _load(path, len(batches), len(samplers))
        if cached is not None:
            _LAST[:] = [path, cached]
            return cached
    lazy = StreamedEpoch(graph, samplers, batches, seed, progress=progress)
    if lazy.too_large():
        return lazy  # neither kept whole nor cached: see StreamedEpoch
    epoch = list(lazy)
    if path is not None:
        _save(path, epoch)
        _LAST[:] = [path, epoch]
    return epoch


def _samples_in_bulk(sampler: Sampler) -> bool:
    """Whether ``sampler`` draws several minibatches at once (its draws then depend on the chunks)."""
    return type(sampler).sample_many is not Sampler.sample_many


# An epoch is kept whole when its minibatches take at most this share of the available memory
# (estimated from its first iteration): papers100M on 128 GPUs (1,179 minibatches of 1,024
# seeds, fanouts 15/10/5, ~13 MiB each) would take 15 GB.
EPOCH_MEMORY_SHARE = 0.25
# Iterations a streamed epoch keeps sampled: the one being planned and the one before it.
STREAM_KEEP = 2


class StreamedEpoch(Sequence[list[Minibatch]]):
    """An epoch sampled iteration by iteration as a plan asks for it, keeping the last few.

    Worker ``w`` draws from its own generator seeded ``[seed, w]``, its minibatches in order,
    ``SAMPLE_CHUNK`` at a time (a bulk sampler bulks within a chunk, so its draws depend on the
    chunks): asked in order, it yields the minibatches :func:`sample_epoch` would keep whole.
    A sampler that samples one minibatch at a time is asked one iteration at a time. A bulk
    sampler is asked for a worker's whole chunk, from the generator's state at the chunk's
    start (recorded on the way), for the window of ``window`` iterations kept from it
    (:meth:`~workbench.strategies.sampling.base.Sampler.sample_window`: bulk-matrix GraphSAGE
    skips the work the window does not depend on); a window that ends inside a chunk visits
    that chunk again for the next (the same numbers). An iteration asked for again after it
    was dropped is sampled again. Used whole (``list(epoch)``) for an epoch that fits; left
    streaming, and not cached on disk, for one that :meth:`too_large` says does not.
    """

    def __init__(
        self,
        graph: CSRGraph,
        samplers: Sequence[Sampler],
        batches: list[list[np.ndarray]],
        seed: int,
        *,
        progress: bool = False,
    ) -> None:
        self.graph = graph
        self.samplers = list(samplers)
        self.batches = batches
        self.seed = seed
        self.width = len(self.samplers)  # minibatches per iteration
        self.bulk = any(_samples_in_bulk(s) for s in self.samplers)
        self.window = len(batches)  # iterations a bulk sampler's pass keeps (set by too_large)
        self._progress = progress
        # Per worker, per iteration drawn so far, its blocks' destination counts: a later window
        # passes them to the sampler instead of having it draw the earlier batches of its pass again.
        self._sizes: list[dict[int, tuple[int, ...]]] = [{} for _ in range(self.width)]
        self._restart()

    def _restart(self) -> None:
        self._rngs = [np.random.default_rng([self.seed, w]) for w in range(self.width)]
        # Per worker, its generator's state at the start of each chunk reached so far.
        self._chunk_states: list[dict[int, Any]] = [{0: r.bit_generator.state} for r in self._rngs]
        self._next = 0
        self._kept: dict[int, list[Minibatch]] = {}
        self._bar = _progress(self.width * len(self.batches), "sampling", self._progress)

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> list[Minibatch]:  # type: ignore[override]
        if not isinstance(i, (int, np.integer)):
            raise TypeError("a streamed epoch is indexed by iteration")
        i = int(i) + (len(self) if i < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(f"iteration {i} of an epoch of {len(self)}")
        if i in self._kept:
            return self._kept[i]
        if self.bulk:
            self._sample_window(i)
            return self._kept[i]
        if i < self._next:
            self._restart()
        while self._next <= i:
            j = self._next
            row = self.batches[j]
            self._kept.pop(j - STREAM_KEEP + 1, None)  # before sampling: never STREAM_KEEP + 1 alive
            self._kept[j] = [
                sampler.sample(self.graph, row[w], self._rngs[w]) for w, sampler in enumerate(self.samplers)
            ]
            self._bar(self.width, done=j == len(self) - 1)
            self._next += 1
        return self._kept[i]

    def _sample_window(self, i: int, budget: float | None = None) -> None:
        """Keep iterations ``i .. i + window - 1`` (and the one before ``i`` if kept), bulk samplers.

        With a ``budget`` (bytes), the window shrinks to iteration ``i`` alone as soon as what it
        keeps would take more (the workers after that sample iteration ``i`` alone).
        """
        end = min(len(self), i + self.window)
        self._kept = {j: mbs for j, mbs in self._kept.items() if j == i - 1}
        rows: dict[int, list[Minibatch]] = {j: [] for j in range(i, end)}
        kept_bytes = 0
        for w, sampler in enumerate(self.samplers):
            mine = [row[w] for row in self.batches]
            states = self._chunk_states[w]
            start = max(
                c for c in states if c <= i // SAMPLE_CHUNK * SAMPLE_CHUNK
            )  # the last chunk start known
            rng = np.random.default_rng(0)
            rng.bit_generator.state = states[start]
            # bulk_matrix_streams replays these draws (same generators, same chunks): change both together.
            sizes = self._sizes[w]
            while start < end:
                chunk = mine[start : start + SAMPLE_CHUNK]
                keep = range(max(start, i) - start, min(start + SAMPLE_CHUNK, end) - start)
                earlier = range(start, start + keep.start)
                known = [sizes[j] for j in earlier] if all(j in sizes for j in earlier) else None
                drawn = sampler.sample_window(self.graph, chunk, rng, keep, known)
                states[start + SAMPLE_CHUNK] = rng.bit_generator.state
                whole = len(keep) == len(chunk)
                for j, mb in zip(range(start + keep.start, start + keep.stop), drawn, strict=True):
                    sizes[j] = tuple(b.num_dst for b in mb.blocks)
                    rows[j].append(mb if whole else _owning(mb))
                    if budget is not None:
                        kept_bytes += _minibatch_bytes(mb)
                start += SAMPLE_CHUNK
            # Over budget, judged by what the workers so far keep scaled to all of them: the whole
            # chunks drawn before the check fires are drawn again later, so it fires at the first
            # worker whose projection is over (papers-like on 128 GPUs: after worker 0, not worker 45).
            if budget is not None and kept_bytes * self.width > budget * (w + 1) and end > i + 1:
                end = i + 1  # from here on only iteration i is kept
                rows = {i: [_owning(mb) for mb in rows[i]]}
            self._bar(end - i)
        self._kept.update(rows)
        self._bar(0, done=end == len(self))

    def too_large(self) -> bool:
        """Whether the whole epoch would take more than ``EPOCH_MEMORY_SHARE`` of the available
        memory: judged by its first iteration's arrays, or, for a bulk sampler, by what the first
        pass over the chunks draws (kept whole when it fits, as views of the chunks' buffers,
        which the pass before left in the output pool; else the sampler keeps as many iterations
        per window as fit that share, at least one, and the first pass, once what it keeps scaled to
        every worker is over that share, samples only iteration 0 of the remaining workers)."""
        from workbench.graph.specs import available_memory

        if not len(self):
            return False
        available = available_memory()
        budget = None if available is None else EPOCH_MEMORY_SHARE * available
        if not self.bulk:
            first = sum(_minibatch_bytes(mb) for mb in self[0])
            return budget is not None and first * len(self) > budget
        self.window = len(self)
        self._sample_window(0, budget)
        if len(self._kept) == len(self):
            return False
        first = sum(_minibatch_bytes(mb) for mb in self._kept[0])
        self.window = max(1, int(budget // max(first, 1)) - 1)  # type: ignore[operator]
        return True


def _owning(mb: Minibatch) -> Minibatch:
    """``mb`` with arrays of its own: a bulk sampler's minibatches are views of buffers shared by
    its whole chunk, which one kept minibatch would otherwise keep alive."""
    blocks = [
        Block(
            b.src_nodes.copy(), b.dst_nodes.copy(), b.edge_src.copy(), b.edge_dst.copy(),
            None if b.edge_weight is None else b.edge_weight.copy(),
        )
        for b in mb.blocks
    ]  # fmt: skip
    return Minibatch(mb.seeds.copy(), blocks)


def _minibatch_bytes(mb: Minibatch) -> int:
    arrays = [mb.seeds] + [a for b in mb.blocks for a in (b.src_nodes, b.dst_nodes, b.edge_src, b.edge_dst)]
    arrays += [b.edge_weight for b in mb.blocks if b.edge_weight is not None]
    return sum(int(a.nbytes) for a in arrays)


def bulk_matrix_streams(
    samplers: Sequence[Sampler], epoch: list[list[Minibatch]], seed: int
) -> list[list[tuple[LayerStream, ...]]]:
    """``streams[i][w][l]``: the random stream of block ``l`` of ``epoch[i][w]`` as :func:`sample_epoch`
    drew it with ``bulk-matrix`` GraphSAGE samplers (the same generator per worker, the same chunks),
    so a sampler elsewhere (a distributed one) can draw the same rows with the same numbers."""
    if not all(isinstance(s, BulkMatrixSampler) and s.algorithm == "graphsage" for s in samplers):
        raise ConfigError("random streams per row are known for the bulk-matrix sampler's GraphSAGE only")
    per_worker: list[list[tuple[LayerStream, ...]]] = []
    for w, sampler in enumerate(samplers):
        assert isinstance(sampler, BulkMatrixSampler)
        rng = np.random.default_rng([seed, w])
        mine = [row[w] for row in epoch]
        out: list[tuple[LayerStream, ...]] = []
        for start in range(0, len(mine), SAMPLE_CHUNK):
            out.extend(sampler.graphsage_streams(mine[start : start + SAMPLE_CHUNK], rng))
        per_worker.append(out)
    return [[per_worker[w][i] for w in range(len(samplers))] for i in range(len(epoch))]


def default_cache_dir() -> Path:
    return cache_root() / "samples"


def graph_fingerprint(graph: CSRGraph) -> str:
    """Name, size and a hash of the structure (the row offsets, and every 97th column id)."""
    h = hashlib.sha256()
    h.update(f"{graph.name}|{graph.num_nodes}|{graph.num_edges}".encode())
    h.update(np.ascontiguousarray(graph.indptr).tobytes())
    h.update(np.ascontiguousarray(graph.indices[::97]).tobytes())
    return h.hexdigest()[:24]


def _cache_path(
    graph: CSRGraph,
    describe: dict[str, Any],
    batches: list[list[np.ndarray]],
    seed: int,
    cache_dir: str | os.PathLike | None,
) -> Path:
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {"v": CACHE_VERSION, "graph": graph_fingerprint(graph), "sampler": describe, "seed": seed},
            sort_keys=True,
            default=str,
        ).encode()
    )
    for row in batches:
        for seeds in row:
            h.update(np.int64(seeds.shape[0]).tobytes())
            h.update(np.ascontiguousarray(seeds, dtype=np.int64).tobytes())
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / f"{h.hexdigest()[:32]}.epoch"


_PARTS = ("src_nodes", "dst_nodes", "edge_src", "edge_dst")


def _save(path: Path, epoch: list[list[Minibatch]]) -> None:
    """One array per field, concatenated over every block of every minibatch, with lengths."""
    flat = [mb for row in epoch for mb in row]
    blocks = [b for mb in flat for b in mb.blocks]
    # The concatenated fields as lists of parts, which the writer streams: building them whole first
    # copied 1.2 GB on products-like into freshly faulted pages, longer than sampling the epoch.
    arrays: dict[str, np.ndarray | list[np.ndarray]] = {
        "shape": np.array([len(epoch), len(epoch[0]) if epoch else 0], dtype=np.int64),
        "layers": np.array([len(mb.blocks) for mb in flat], dtype=np.int64),
        "seeds": [mb.seeds for mb in flat] if flat else np.zeros(0, np.int64),
        "seed_lengths": np.array([mb.seeds.shape[0] for mb in flat], dtype=np.int64),
        "weighted": np.array([b.edge_weight is not None for b in blocks], dtype=bool),
    }
    for part in _PARTS:
        arrays[part] = [getattr(b, part) for b in blocks] if blocks else np.zeros(0, np.int64)
        arrays[part + "_lengths"] = np.array([getattr(b, part).shape[0] for b in blocks], dtype=np.int64)
    weights = [b.edge_weight for b in blocks if b.edge_weight is not None]
    arrays["edge_weight"] = weights if weights else np.zeros(0, np.float32)
    try:
        write_mapped_arrays(path, arrays)
    except OSError as exc:  # a read-only or full cache is not fatal: the epoch is in memory
        print(
            f"sample cache: could not write {path} ({exc.strerror}); continuing without it", file=sys.stderr
        )


def _load(path: Path, iterations: int, workers: int) -> list[list[Minibatch]] | None:
    if not path.is_file():
        return None
    try:
        arrays = read_mapped_arrays(path)  # views of the file's pages: nothing copied
        if arrays["shape"].tolist() != [iterations, workers]:
            return None
        split = {part: np.split(arrays[part], np.cumsum(arrays[part + "_lengths"])[:-1]) for part in _PARTS}
        weights = iter(np.split(arrays["edge_weight"], np.cumsum(split_lengths(arrays))[:-1]))
        seeds = np.split(arrays["seeds"], np.cumsum(arrays["seed_lengths"])[:-1])
        minibatches, k = [], 0
        for m, layers in enumerate(arrays["layers"].tolist()):
            blocks = []
            for _ in range(layers):
                weight = next(weights) if arrays["weighted"][k] else None
                blocks.append(Block(*(split[part][k] for part in _PARTS), edge_weight=weight))
                k += 1
            minibatches.append(Minibatch(seeds[m], blocks))
    except (OSError, KeyError, ValueError, StopIteration):
        print(f"sample cache: {path} is unreadable; sampling again", file=sys.stderr)
        return None
    return [minibatches[i * workers : (i + 1) * workers] for i in range(iterations)]


def split_lengths(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Edge counts of the weighted blocks, in order (their weights are stored back to back)."""
    return arrays["edge_src_lengths"][arrays["weighted"]]


def _progress(total: int, what: str, show: bool) -> Callable[..., None]:
    """A tqdm bar on stderr when ``show``; else nothing."""
    if not show:
        return lambda n, done=False: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=what, unit="minibatch", file=sys.stderr, leave=False)

    def step(n: int, done: bool = False) -> None:
        bar.update(n)
        if done:
            bar.close()

    return step
