"""Numba kernels shared by the samplers: per-row draws and per-batch relabelling.

Why kernels: a products-sized minibatch with fanouts [15, 10, 5] samples about half a
million edges; a Python or per-row numpy loop spends microseconds per row, DGL's C++
sampler tens of nanoseconds per edge. These loops run at DGL's speed.

Randomness: samplers take an explicit ``numpy.random.Generator``; a kernel call takes
one 64-bit ``seed`` drawn from it. Row ``r`` of a call draws its ``i``-th uniform number
as ``splitmix64(seed + r * C + i)`` (a counter-based generator), so the result does not
depend on how rows are spread over threads, and a fixed generator state gives
bit-identical samples.

All kernels are compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange
from numba.core import cgutils, types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_ROW_STRIDE = np.uint64(0xD1B54A32D192ED03)
_TWO_POW_53_INV = 1.0 / 9007199254740992.0


@njit(inline="always")
def _uniform(seed: np.uint64, row: int, draw: int) -> float:
    """The ``draw``-th uniform number in [0, 1) of row ``row`` (splitmix64 finalizer)."""
    z = seed + np.uint64(row) * _ROW_STRIDE + np.uint64(draw + 1) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * _TWO_POW_53_INV


@njit(inline="always")
def _drawn(out: np.ndarray, o: int, c: int, t: int) -> bool:
    """Whether ``t`` is among the row's first ``c`` draws ``out[o:o+c]``."""
    for q in range(c):
        if out[o + q] == t:
            return True
    return False


@njit(inline="always")
def _distinct_by_scan(
    seed: np.uint64, i: int, d: int, need: int, out: np.ndarray, o: int, c: int, draw: int
) -> None:
    """Fill ``out[o+c:o+need]`` with distinct positions ``floor(u * d)`` of row ``i``, a repeat
    (found by scanning the row's earlier draws) drawn again; ``draw`` is the index of the row's
    next uniform number (the draws the caller has used already)."""
    while c < need:
        t = int(_uniform(seed, i, draw) * d)
        draw += 1
        if t >= d:
            t = d - 1
        if not _drawn(out, o, c, t):
            out[o + c] = t
            c += 1


_AHEAD = 8  # rows between a row's prefetch and its gather


@intrinsic
def _prefetch(typingctx, arr, idx):  # type: ignore[no-untyped-def]
    """Ask for the cache line of ``arr[idx]`` (LLVM's prefetch: read, high locality); no load, no fault."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8"
        )
        builder.call(
            fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)]
        )
        return context.get_dummy_value()

    return sig, codegen


def draw_seed(rng: np.random.Generator) -> np.uint64:
    """One kernel seed from the caller's generator."""
    return np.uint64(rng.integers(0, 2**63, dtype=np.int64))


def stream_from(seed: np.uint64, row: int) -> np.uint64:
    """The seed whose row ``r`` draws what row ``row + r`` of ``seed`` draws (:func:`_uniform` adds
    ``row * _ROW_STRIDE`` to the seed, modulo 2**64): rows sampled apart from the stack they
    belong to keep their numbers."""
    return np.uint64((int(seed) + row * int(_ROW_STRIDE)) % 2**64)


def num_threads() -> int:
    return int(numba.get_num_threads())


# ---- node-wise uniform sampling (neighbor, full, bulk-matrix's fused GraphSAGE) ----------------


@njit(parallel=True, cache=True)
def uniform_row_counts(row_begin: np.ndarray, row_end: np.ndarray, fanout: int) -> np.ndarray:
    """Edges each row keeps: all of them when ``fanout < 0`` or the row has at most ``fanout``."""
    m = row_begin.shape[0]
    counts = np.empty(m, dtype=np.int64)
    for i in prange(m):
        d = row_end[i] - row_begin[i]
        counts[i] = d if (fanout < 0 or d <= fanout) else fanout
    return counts


@njit(parallel=True, cache=True)
def floyd_sample_rows(
    row_begin: np.ndarray,
    row_end: np.ndarray,
    cols: np.ndarray,
    offsets: np.ndarray,
    fanout: int,
    seed: np.uint64,
) -> np.ndarray:
    """Uniform ``fanout``-subsets of each row without replacement (Floyd's algorithm).

    Rows with at most ``fanout`` entries (or ``fanout < 0``) keep all of them, as DGL
    does. Floyd's algorithm makes exactly ``fanout`` draws per row and yields every
    subset with equal probability, so each entry's inclusion probability is
    ``min(1, fanout / degree)``.
    """
    m = row_begin.shape[0]
    out = np.empty(offsets[m], dtype=np.int64)
    for i in prange(m):
        b = row_begin[i]
        d = row_end[i] - b
        o = offsets[i]
        if fanout < 0 or d <= fanout:
            for j in range(d):
                out[o + j] = cols[b + j]
            continue
        # Positions first (Floyd needs "is t chosen"), converted to column ids after.
        c = 0
        for j in range(d - fanout, d):
            t = int(_uniform(seed, i, c) * (j + 1))
            if t > j:  # guard against rounding at the top of [0, 1)
                t = j
            taken = False
            for q in range(c):
                if out[o + q] == t:
                    taken = True
                    break
            out[o + c] = j if taken else t
            c += 1
        for q in range(fanout):
            out[o + q] = cols[b + out[o + q]]
    return out


@njit(parallel=True, cache=True)
def indexed_row_counts(row_of: np.ndarray, indptr: np.ndarray, values: np.ndarray, fanout: int) -> np.ndarray:
    """Draws per stacked row ``i`` (entries ``indptr[row_of[i]]:indptr[row_of[i] + 1]``): ``min(fanout, positive)``."""
    m = row_of.shape[0]
    counts = np.empty(m, dtype=np.int64)
    for i in prange(m):
        r = row_of[i]
        if values.shape[0] == 0:
            positive = indptr[r + 1] - indptr[r]
        else:
            positive = 0
            for e in range(indptr[r], indptr[r + 1]):
                if values[e] > 0:
                    positive += 1
        counts[i] = positive if (fanout < 0 or positive <= fanout) else fanout
    return counts


@njit(parallel=True, cache=True)
def row_extents(
    row_of: np.ndarray, indptr: np.ndarray, fanout: int, begin: np.ndarray, deg: np.ndarray
) -> np.ndarray:
    """Per stacked row ``i`` (row ``row_of[i]`` of ``indptr``): its start and length into ``begin``/``deg``; draws returned.

    One pass of independent gathers (the CPU overlaps their cache misses); the draw
    loops after it then read ``begin``/``deg`` in order instead of missing on
    ``indptr`` once per row between long stretches of arithmetic.
    """
    m = row_of.shape[0]
    counts = np.empty(m, dtype=np.int64)
    for i in prange(m):
        r = row_of[i]
        b = indptr[r]
        d = indptr[r + 1] - b
        begin[i] = b
        deg[i] = d
        counts[i] = d if (fanout < 0 or d <= fanout) else fanout
    return counts


# ---- inverse transform sampling (bulk-matrix, locality-aware, LADIES, FastGCN) --------------------


@njit(cache=True)
def _its_row(
    i: int,
    b: int,
    d: int,
    cols: np.ndarray,
    values: np.ndarray,
    col_weight: np.ndarray,
    need: int,
    seed: np.uint64,
    out: np.ndarray,
    o: int,
) -> None:
    """ITS of ``need`` distinct entries of one row into ``out[o:o+need]`` (column ids); see :func:`its_sample_rows`."""
    if need == 0:
        return
    draw = 0
    if values.shape[0] == 0 and col_weight.shape[0] == 0:
        if need == d:
            for j in range(d):
                out[o + j] = cols[b + j]
            return
        _distinct_by_scan(seed, i, d, need, out, o, 0, draw)
        for q in range(need):
            out[o + q] = cols[b + out[o + q]]
        return
    weight = np.empty(d, dtype=np.float64)
    positive = 0
    for j in range(d):
        w = values[b + j] if values.shape[0] else col_weight[cols[b + j]]
        weight[j] = w if w > 0 else 0.0
        if w > 0:
            positive += 1
    if need == positive:
        c = 0
        for j in range(d):
            if weight[j] > 0:
                out[o + c] = cols[b + j]
                c += 1
        return
    prefix = np.empty(d, dtype=np.float64)
    c = 0
    while c < need:
        total = 0.0
        for j in range(d):
            total += weight[j]
            prefix[j] = total
        want = need - c
        for _ in range(want):
            u = _uniform(seed, i, draw) * total
            draw += 1
            # First position whose prefix exceeds u: an entry of positive weight.
            t = np.searchsorted(prefix, u, side="right")
            if t >= d:
                t = d - 1
                while weight[t] == 0.0:
                    t -= 1
            if not _drawn(out, o, c, t):
                out[o + c] = t
                c += 1
        for q in range(c):
            weight[out[o + q]] = 0.0
    for q in range(need):
        out[o + q] = cols[b + out[o + q]]


@njit(parallel=True, cache=True)
def its_sample_rows(
    row_begin: np.ndarray,
    row_end: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    col_weight: np.ndarray,
    offsets: np.ndarray,
    seed: np.uint64,
) -> np.ndarray:
    """Inverse transform sampling of ``offsets[i+1] - offsets[i]`` distinct entries per row.

    Row ``i`` of the probability matrix is ``cols[row_begin[i]:row_end[i]]`` with
    probabilities proportional to ``values`` (per entry), or to ``col_weight[col]``
    (per column), or uniform when both are empty. Paper 004, section 4.1.2: a prefix
    sum per row, one uniform number per missing sample, a binary search of each number
    in the prefix sum, and repeats until the row has its distinct samples.

    * Weighted rows repeat in rounds: the entries already drawn get probability zero
      and the prefix sum is rebuilt, so a heavy entry cannot stall the row (numpy's
      ``choice(replace=False, p=...)`` works the same way).
    * Uniform rows (an unweighted graph's row-normalized ``P = Q A``) have the prefix
      sum ``(j + 1) / d``, so the binary search for ``u`` is ``floor(u * d)`` exactly;
      a repeated entry is simply drawn again (the expected number of draws is at most
      ``d (H_d - H_{d-k})``, under 40 for the worst case d = 16, k = 15).

    Either way the distinct entries arrive in successive-sampling order (each new one
    proportional to the probability among those not yet drawn), which for uniform rows
    is a uniform random subset: the same distribution as :func:`floyd_sample_rows`.
    Rows whose positive entries number at most their sample count keep all of those.
    """
    m = row_begin.shape[0]
    out = np.empty(offsets[m], dtype=np.int64)
    for i in prange(m):
        b = row_begin[i]
        _its_row(
            i, b, row_end[i] - b, cols, values, col_weight, offsets[i + 1] - offsets[i], seed, out, offsets[i]
        )
    return out


# ---- relabelling: global ids -> per-block local indices -------------------------------------------


@njit(cache=True)
def _relabel_one(
    dst: np.ndarray,
    counts: np.ndarray,
    picked: np.ndarray,
    mapping: np.ndarray,
    src_out: np.ndarray,
    edge_src_out: np.ndarray,
    edge_dst_out: np.ndarray,
) -> int:
    """Local ids for one block: destinations first, new sources in order of first appearance.

    ``mapping`` (one int per graph vertex, all -1) is restored to -1 before returning,
    so one array serves every block: no hash table, no sort.
    """
    nd = dst.shape[0]
    for i in range(nd):
        mapping[dst[i]] = i
        src_out[i] = dst[i]
    ns = nd
    e = 0
    for i in range(nd):
        for _ in range(counts[i]):
            u = picked[e]
            local = mapping[u]
            if local < 0:
                local = ns
                mapping[u] = ns
                src_out[ns] = u
                ns += 1
            edge_src_out[e] = local
            edge_dst_out[e] = i
            e += 1
    for j in range(ns):
        mapping[src_out[j]] = -1
    return ns


@intrinsic
def _popcount(typingctx, x):  # type: ignore[no-untyped-def]
    """Set bits of a uint64 (LLVM's ctpop: one instruction where the CPU has it)."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64]), "llvm.ctpop.i64")
        return builder.call(fn, [args[0]])

    return sig, codegen


def word_scratch_size(num_nodes: int) -> int:
    """Words of :func:`_relabel_words`' scratch for a graph of ``num_nodes`` vertices.

    Six parts of one word per 64 vertices (``seen``, ``isdst``, ``first``, ``dfirst``,
    ``touched``, ``dtouched``) and a spare word for each touched list, which takes one
    unconditional write past its last kept entry.
    """
    return 6 * ((num_nodes + 63) // 64) + 2


@njit(inline="always")
def _word_views(scratch: np.ndarray):  # type: ignore[no-untyped-def]
    """(seen, isdst, first, dfirst, touched, dtouched) in a :func:`word_scratch_size` array."""
    nw = (scratch.shape[0] - 2) // 6
    return (
        scratch[:nw],
        scratch[nw : 2 * nw],
        scratch[2 * nw : 3 * nw],
        scratch[3 * nw : 4 * nw],
        scratch[4 * nw : 5 * nw + 1],
        scratch[5 * nw + 1 :],
    )


@njit(inline="always")
def _below(x: np.uint64, u: int) -> int:
    """Set bits of word ``x`` below vertex ``u``'s bit."""
    return _popcount(x & ((np.uint64(1) << np.uint64(u & 63)) - np.uint64(1)))


@njit(inline="always")
def _words_open(
    dst: np.ndarray, counts: np.ndarray, scratch: np.ndarray, perm: np.ndarray, src_out: np.ndarray,
    edge_dst_out: np.ndarray,
) -> tuple[int, int]:  # fmt: skip
    """Start of :func:`_relabel_words`: the destinations' bit set and ids, ``edge_dst``.

    A destination ``v``'s local id is ``perm[dfirst[v >> 6] + (bits of isdst below v)]``,
    all in cache. Returns (edge count, destination words touched).
    """
    seen, isdst, first, dfirst, touched, dtouched = _word_views(scratch)
    nd = dst.shape[0]
    ndt = 0
    for i in range(nd):
        v = dst[i]
        w = v >> 6
        x = isdst[w]
        dtouched[ndt] = w
        ndt += x == 0
        isdst[w] = x | (np.uint64(1) << np.uint64(v & 63))
        src_out[i] = v
    run = 0
    for j in range(ndt):
        w = dtouched[j]
        dfirst[w] = run
        run += _popcount(isdst[w])
    for i in range(nd):
        v = dst[i]
        w = v >> 6
        perm[np.int64(dfirst[w]) + _below(isdst[w], v)] = i
    ne = 0
    for i in range(nd):
        for _ in range(counts[i]):
            edge_dst_out[ne] = i
            ne += 1
    return ne, ndt


@njit(inline="always")
def _words_mark(
    u: int, e: int, seen: np.ndarray, isdst: np.ndarray, dfirst: np.ndarray, perm: np.ndarray,
    touched: np.ndarray, nt: int, edge_src_out: np.ndarray,
) -> int:  # fmt: skip
    """Drawn vertex ``u`` of edge ``e``: a destination's local id (negative-marked) or its bit in ``seen``."""
    w = u >> 6
    bit = np.uint64(1) << np.uint64(u & 63)
    x = isdst[w]
    if x & bit:
        edge_src_out[e] = -1 - perm[np.int64(dfirst[w]) + _below(x, u)]  # final id, marked negative
        return nt
    edge_src_out[e] = u
    x = seen[w]
    touched[nt] = w  # kept only when the word was empty (no branch to mispredict)
    seen[w] = x | bit
    return nt + (x == 0)


@njit(inline="always")
def _words_close(
    nd: int, scratch: np.ndarray, nt: int, ndt: int, ne: int, src_out: np.ndarray, edge_src_out: np.ndarray
) -> int:
    """End of :func:`_relabel_words`: number the touched words, local ids, restore the scratch."""
    seen, isdst, first, dfirst, touched, dtouched = _word_views(scratch)
    one = np.uint64(1)
    ns = nd
    for j in range(nt):
        w = touched[j]
        x = seen[w]
        first[w] = ns
        base = w << 6
        while x:
            src_out[ns] = base + trailing_zeros(x)
            ns += 1
            x &= x - one
    for e in range(ne):
        u = edge_src_out[e]
        v = u if u >= 0 else 0
        w = v >> 6
        rank = np.int64(first[w]) + _below(seen[w], v)
        edge_src_out[e] = rank if u >= 0 else -1 - u
    for j in range(nt):
        seen[touched[j]] = 0
    for j in range(ndt):
        isdst[dtouched[j]] = 0
    return ns


@njit(cache=True)
def _relabel_words(
    dst: np.ndarray,
    counts: np.ndarray,
    picked: np.ndarray,
    scratch: np.ndarray,
    src_out: np.ndarray,
    edge_src_out: np.ndarray,
    edge_dst_out: np.ndarray,
) -> int:
    """:func:`_relabel_one` through vertex bit sets that stay in cache (``picked`` may be ``edge_src_out``).

    The steps of :func:`uniform_its_relabel_batches`' relabelling in one serial call
    (the reference its tests compare with :func:`relabel_block`).

    Destinations come first (local ids ``0..nd-1``): their bits in ``isdst`` and, per
    word, the rank of its first one in a small permutation to their positions. Each
    other drawn vertex sets its bit in ``seen`` (one bit per graph vertex: 150 KB on
    products-like, where a vertex-indexed map of ids is 5 MB and misses the cache). The
    words of ``seen`` that got bits are then numbered in order of first touch, a
    vertex's local id being its word's first id plus the bits below it in the word.
    Sources are thus grouped by word of 64 vertex ids (not in order of first
    appearance); each appears once and the destinations stay first. ``scratch``
    (:func:`word_scratch_size` words; ``seen`` and ``isdst`` all zero) is restored
    before returning.
    """
    seen, isdst, first, dfirst, touched, dtouched = _word_views(scratch)
    perm = np.empty(dst.shape[0], dtype=np.int64)
    ne, ndt = _words_open(dst, counts, scratch, perm, src_out, edge_dst_out)
    nt = 0
    for e in range(ne):
        nt = _words_mark(picked[e], e, seen, isdst, dfirst, perm, touched, nt, edge_src_out)
    return _words_close(dst.shape[0], scratch, nt, ndt, ne, src_out, edge_src_out)


@njit(cache=True)
def relabel_block(
    dst: np.ndarray, counts: np.ndarray, picked: np.ndarray, mapping: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One block: (src_nodes, edge_src, edge_dst); ``picked`` lists each row's sources in row order."""
    src = np.empty(dst.shape[0] + picked.shape[0], dtype=np.int64)
    edge_src = np.empty(picked.shape[0], dtype=np.int64)
    edge_dst = np.empty(picked.shape[0], dtype=np.int64)
    ns = _relabel_one(dst, counts, picked, mapping, src, edge_src, edge_dst)
    return src[:ns].copy(), edge_src, edge_dst


@njit(parallel=True, cache=True)
def relabel_words_batches(
    row_ptr: np.ndarray,
    dst: np.ndarray,
    counts: np.ndarray,
    offsets: np.ndarray,
    picked: np.ndarray,
    words: np.ndarray,
    edge_src: np.ndarray,
    edge_dst: np.ndarray,
    src: np.ndarray,
    num_src: np.ndarray,
) -> None:
    """Step 3 of many blocks whose draws ``picked`` (global ids, row by row) were made elsewhere.

    Batch ``b`` owns stacked rows ``row_ptr[b]:row_ptr[b+1]`` and edge slots
    ``offsets[row_ptr[b]]:offsets[row_ptr[b+1]]``; local ids by :func:`_relabel_words`,
    so the blocks are those :func:`uniform_its_relabel_batches` builds from the same
    draws (the torch back end draws on its device, then relabels here). Layout of the
    outputs as in :func:`its_relabel_batches`; ``words``: one scratch row per thread,
    batches split into one contiguous chunk per row.
    """
    nb = row_ptr.shape[0] - 1
    chunks = words.shape[0]
    for c in prange(chunks):
        for bt in range((nb * c) // chunks, (nb * (c + 1)) // chunks):
            r0 = row_ptr[bt]
            r1 = row_ptr[bt + 1]
            e0 = offsets[r0]
            e1 = offsets[r1]
            s0 = r0 + e0
            num_src[bt] = _relabel_words(
                dst[r0:r1],
                counts[r0:r1],
                picked[e0:e1],
                words[c],
                src[s0 : s0 + (r1 - r0) + (e1 - e0)],
                edge_src[e0:e1],
                edge_dst[e0:e1],
            )


@njit(parallel=True, cache=True)
def its_relabel_batches(
    row_ptr: np.ndarray,
    dst: np.ndarray,
    row_of: np.ndarray,
    indptr: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    counts: np.ndarray,
    offsets: np.ndarray,
    seed: np.uint64,
    edge_src: np.ndarray,
    edge_dst: np.ndarray,
    src: np.ndarray,
    num_src: np.ndarray,
    mappings: np.ndarray,
) -> None:
    """Bulk GraphSAGE steps 2 and 3, per batch: ITS of each of its rows, then local ids.

    Stacked row ``i`` of ``P`` is ``cols[indptr[row_of[i]]:indptr[row_of[i] + 1]]``
    (``row_of = dst`` and ``indptr = A.indptr`` read the rows of ``A`` in place;
    ``row_of = arange`` and ``P.indptr`` read a materialized ``P``), with
    probabilities ``values`` (empty: uniform). Batch ``b`` owns stacked rows
    ``row_ptr[b]:row_ptr[b+1]`` and edge slots
    ``offsets[row_ptr[b]]:offsets[row_ptr[b+1]]``; its draws are written there as
    global ids and relabelled in place while still in cache (extraction: dropping the
    empty columns of the batch's rows). Its sources go to ``src`` from
    ``row_ptr[b] + offsets[row_ptr[b]]`` on, ``num_src[b]`` of them. Row ``i`` draws
    from the same random stream as in :func:`its_sample_rows`. Batches are split into
    one contiguous chunk per row of ``mappings`` (one scratch array per thread).
    """
    nb = row_ptr.shape[0] - 1
    chunks = mappings.shape[0]
    no_weight = np.empty(0, dtype=np.float64)
    for c in prange(chunks):
        for bt in range((nb * c) // chunks, (nb * (c + 1)) // chunks):
            r0 = row_ptr[bt]
            r1 = row_ptr[bt + 1]
            e0 = offsets[r0]
            e1 = offsets[r1]
            out = edge_src[e0:e1]
            for i in range(r0, r1):
                r = row_of[i]
                bgn = indptr[r]
                _its_row(
                    i,
                    bgn,
                    indptr[r + 1] - bgn,
                    cols,
                    values,
                    no_weight,
                    counts[i],
                    seed,
                    out,
                    offsets[i] - e0,
                )
            s0 = r0 + e0
            num_src[bt] = _relabel_one(
                dst[r0:r1],
                counts[r0:r1],
                out,
                mappings[c],
                src[s0 : s0 + (r1 - r0) + (e1 - e0)],
                out,
                edge_dst[e0:e1],
            )


@njit(inline="always")
def _uniform_positions(
    i: int, d: int, need: int, seed: np.uint64, out: np.ndarray, o: int, bits: np.ndarray
) -> None:
    """ITS of ``need`` distinct positions of a uniform row of ``d`` entries into ``out[o:o+need]``.

    The draws of the uniform branch of :func:`_its_row` (``floor(u * d)``, a repeat
    drawn again), with the "already drawn?" test on a bit set instead of a scan of the
    row's earlier draws: one 64-bit mask when ``d <= 64``, else ``bits`` (all zero on
    entry and on return) while ``d`` fits in it. When ``d <= 64`` and fewer than
    ``need`` entries are left out, the draws pick those instead (same distribution:
    the complement of a uniform subset is uniform).
    """
    if need == d:
        for j in range(d):
            out[o + j] = j
        return
    draw = 0
    c = 0
    one = np.uint64(1)
    if d <= 64:
        # Draw the entries to keep, or, when fewer, the entries to leave out: the complement
        # of a uniform (d - need)-subset is a uniform need-subset (d = 16, need = 15: one
        # draw instead of 38 on average).
        drop = d - need < need
        want = d - need if drop else need
        mask = np.uint64(0)
        while c < want:
            t = int(_uniform(seed, i, draw) * d)
            draw += 1
            if t >= d:
                t = d - 1
            bit = one << np.uint64(t)
            if not (mask & bit):
                mask |= bit
                if not drop:
                    out[o + c] = t
                c += 1
        if drop:
            c = 0
            for j in range(d):
                if not (mask & (one << np.uint64(j))):
                    out[o + c] = j
                    c += 1
        return
    if d <= bits.shape[0] * 64:
        while c < need:
            t = int(_uniform(seed, i, draw) * d)
            draw += 1
            if t >= d:
                t = d - 1
            w = t >> 6
            bit = one << np.uint64(t & 63)
            if not (bits[w] & bit):
                bits[w] |= bit
                out[o + c] = t
                c += 1
        for q in range(need):
            bits[out[o + q] >> 6] = 0
        return
    _distinct_by_scan(seed, i, d, need, out, o, c, draw)


@njit(parallel=True, cache=True)
def uniform_its_relabel_batches(
    row_ptr: np.ndarray,
    dst: np.ndarray,
    begin: np.ndarray,
    deg: np.ndarray,
    cols: np.ndarray,
    counts: np.ndarray,
    offsets: np.ndarray,
    seed: np.uint64,
    edge_src: np.ndarray,
    edge_dst: np.ndarray,
    src: np.ndarray,
    num_src: np.ndarray,
    words: np.ndarray,
) -> None:
    """:func:`its_relabel_batches` for uniform rows (the fused back end), in three passes per batch.

    Stacked row ``i`` is ``cols[begin[i]:begin[i] + deg[i]]`` (from :func:`row_extents`).
    Per batch: (2a) ITS positions of every row (arithmetic only: ``floor(u * d)``,
    repeats drawn again, from the random stream of :func:`its_sample_rows`; see
    :func:`_uniform_positions`), (2b) one gather of the drawn column ids, each row's
    cache lines prefetched a few rows ahead, each id marked in the relabelling's bit
    sets as it arrives, (3) local ids (:func:`_relabel_words`, in the same steps;
    ``words``: one scratch row per thread, batches split into one contiguous chunk per row).
    Layout of the outputs as in :func:`its_relabel_batches`.
    """
    nb = row_ptr.shape[0] - 1
    chunks = words.shape[0]
    for c in prange(chunks):
        bits = np.zeros(64, dtype=np.uint64)
        scratch = words[c]
        seen, isdst, first, dfirst, touched, dtouched = _word_views(scratch)
        lo = (nb * c) // chunks
        hi = (nb * (c + 1)) // chunks
        most = 0
        for bt in range(lo, hi):
            most = max(most, row_ptr[bt + 1] - row_ptr[bt])
        perm = np.empty(most, dtype=np.int64)
        for bt in range(lo, hi):
            r0 = row_ptr[bt]
            r1 = row_ptr[bt + 1]
            e0 = offsets[r0]
            e1 = offsets[r1]
            out = edge_src[e0:e1]
            for i in range(r0, r1):
                _uniform_positions(i, deg[i], counts[i], seed, edge_src, offsets[i], bits)
            s0 = r0 + e0
            src_b = src[s0 : s0 + (r1 - r0) + (e1 - e0)]
            ne, ndt = _words_open(dst[r0:r1], counts[r0:r1], scratch, perm, src_b, edge_dst[e0:e1])
            # Gather the drawn column ids (their cache lines requested _AHEAD rows early) and mark them.
            nt = 0
            for i in range(r0, r1):
                j = i + _AHEAD
                if j < r1:
                    bj = begin[j]
                    for e in range(offsets[j], offsets[j + 1]):
                        _prefetch(cols, bj + edge_src[e])
                b = begin[i]
                for e in range(offsets[i], offsets[i + 1]):
                    nt = _words_mark(
                        cols[b + edge_src[e]], e - e0, seen, isdst, dfirst, perm, touched, nt, out
                    )
            num_src[bt] = _words_close(r1 - r0, scratch, nt, ndt, ne, src_b, out)


@njit(parallel=True, cache=True)
def uniform_positions_rows(
    deg: np.ndarray,
    counts: np.ndarray,
    offsets: np.ndarray,
    seeds: np.ndarray,
    stream_rows: np.ndarray,
    out: np.ndarray,
    chunks: int,
) -> None:
    """Step 2 for uniform rows whose random streams are given per row: row ``i`` (``deg[i]`` entries)
    draws ``counts[i]`` distinct positions into ``out[offsets[i]:offsets[i + 1]]`` exactly as
    :func:`uniform_its_relabel_batches` draws stacked row ``stream_rows[i]`` with seed ``seeds[i]``.

    A distributed sampler holds some rows of several bulk chunks at once (each chunk its own
    seed, each row its place in its chunk), so seed and row come per row here; the draws are
    :func:`_uniform_positions`', so the positions equal the one-process sampler's.
    """
    m = deg.shape[0]
    for c in prange(chunks):
        bits = np.zeros(64, dtype=np.uint64)
        for i in range((m * c) // chunks, (m * (c + 1)) // chunks):
            _uniform_positions(stream_rows[i], deg[i], counts[i], seeds[i], out, offsets[i], bits)
