"""Collectives as rings (or, for all-reduce, a binary tree) of point-to-point steps.

``devices`` in the task's order form the ring d0 -> d1 -> ... -> d(n-1) -> d0; ``B``
is the task's ``bytes`` (each device's buffer). Each step moves chunks between ring
neighbours over their routes, all at once, sharing links fairly with each other and
with any other traffic; a step ends when its last chunk arrives, and the next step
starts then (steps are synchronous, as in NCCL's ring).

============== ===================================================================
allreduce      reduce-scatter then all-gather: 2(n-1) steps, each d_i -> d_(i+1) moves B/n
reducescatter  n-1 steps of B/n
allgather      n-1 steps of B/n (B is the gathered buffer, as NCCL counts it)
broadcast      from d0 along the chain d0 -> d1 -> ... -> d(n-1), pipelined in infinitely
               small chunks: one step where every chain edge carries B at once
alltoall       one step where every ordered pair (i, j), i != j, exchanges B/n
============== ===================================================================

A step moves in lockstep: its chunks advance at one common rate, the max-min fair
share of the step as a whole (a flow whose links are all its chunks' links, counted
once per chunk that crosses them). This is how a pipelined ring behaves (the slowest
edge paces every edge) and it makes a step one flow rather than n.

Latency enters once per step: a step first waits the largest route latency among its
chunks (for broadcast, the sum of the chain's latencies: the first byte crosses every
hop), then its chunks drain at their fair rates. So an all-reduce over n GPUs whose
ring edges each get bandwidth ``bw`` and latency ``a`` takes
``2(n-1) * (a + B / (n * bw))``; with ``a = 0`` that is ``2(n-1)/n * B / bw``.

``algorithm="tree"`` (all-reduce only) replaces the ring by a binary tree over the
devices in task order (device i's parent is device (i-1)//2, so the depth is
D = floor(log2 n)), reducing up the tree and broadcasting back down, pipelined in
k = ceil(B / TREE_CHUNK) chunks of B/k: chunk c leaves depth l upwards at step
c + D - l and reaches depth l downwards at step c + D + l - 1, so a chunk's broadcast
starts as soon as the root has reduced it, and the all-reduce takes 2D + k - 1 steps,
each moving B/k over every tree edge then active (in lockstep, as a ring step). Where
every tree edge has its own link of bandwidth ``bw`` and latency ``a``, that is
``(2D + k - 1) * (a + B / (k * bw))``: fewer latency terms than the ring's 2(n-1) for
small messages, about twice the ring's bandwidth term for large ones (every byte
crosses a root-ward edge whole, the ring's only in n-th parts).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.topology import Route, Topology


@dataclass(frozen=True)
class Step:
    links: tuple[int, ...]  # every chunk's directed links, a link once per chunk crossing it
    chunk_bytes: float  # what each chunk carries (all chunks of a step are equal)
    latency: float


ALGORITHMS = ("ring", "tree")
TREE_CHUNK = 1 << 20  # bytes per pipelined chunk of a tree all-reduce (NCCL's tree chunks are of this order)


def collective_steps(
    op: str, devices: list[str], nbytes: int, topo: Topology, where: str, algorithm: str = "ring"
) -> list[Step]:
    if op == "allreduce-tree":  # the plan's way to ask for the tree
        op, algorithm = "allreduce", "tree"
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown collective algorithm {algorithm!r}; valid: {', '.join(ALGORITHMS)}")
    if algorithm == "tree" and op != "allreduce":
        raise ValueError(f"{where}: algorithm 'tree' is an all-reduce; {op!r} runs as a ring")
    n = len(devices)
    if n < 2:
        return []
    if algorithm == "tree":
        return _tree_allreduce(devices, nbytes, topo, where)
    ring = [(devices[i], devices[(i + 1) % n]) for i in range(n)]
    if op in ("allreduce", "reducescatter", "allgather"):
        count = 2 * (n - 1) if op == "allreduce" else n - 1
        step = _step([(topo.route_or_raise(a, b, where), nbytes / n) for a, b in ring])
        return [step] * count
    if op == "broadcast":
        chain = [topo.route_or_raise(a, b, where) for a, b in ring[:-1]]
        step = _step([(r, float(nbytes)) for r in chain])
        return [Step(step.links, step.chunk_bytes, sum(r.latency for r in chain))]
    if op == "alltoall":
        pairs = [(a, b) for a in devices for b in devices if a != b]
        return [_step([(topo.route_or_raise(a, b, where), nbytes / n) for a, b in pairs])]
    raise ValueError(f"unknown collective {op!r}")  # Plan.validate rejects these first


def _step(chunks: list[tuple[Route, float]]) -> Step:
    moving = [(r, b) for r, b in chunks if r.links and b > 0]
    links = tuple(lid for r, _ in moving for lid in r.links)
    chunk_bytes = moving[0][1] if moving else 0.0
    return Step(links, chunk_bytes, max((r.latency for r, _ in chunks), default=0.0))


def _tree_allreduce(devices: list[str], nbytes: int, topo: Topology, where: str) -> list[Step]:
    """Reduce up a binary tree and broadcast down it, pipelined by chunks (module docstring)."""
    n = len(devices)
    depth = [(i + 1).bit_length() - 1 for i in range(n)]  # device i's depth in the tree
    tree_depth = depth[-1]
    chunks = max(1, -(-nbytes // TREE_CHUNK))
    chunk = nbytes / chunks
    up = [topo.route_or_raise(devices[i], devices[(i - 1) // 2], where) for i in range(1, n)]
    down = [topo.route_or_raise(devices[(i - 1) // 2], devices[i], where) for i in range(1, n)]
    steps = []
    for s in range(2 * tree_depth + chunks - 1):
        active = [r for i, r in enumerate(up, 1) if 0 <= s - (tree_depth - depth[i]) < chunks]
        active += [r for i, r in enumerate(down, 1) if 0 <= s - (tree_depth + depth[i] - 1) < chunks]
        steps.append(_step([(r, chunk) for r in active]))
    return steps
