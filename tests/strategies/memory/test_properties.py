"""Memory policies on random small operator graphs (hypothesis): ``dpmm`` against a brute force,
and the order dpmm <= lru <= streaming.

The brute force is written independently of ``dpmm``, from the other way of seeing the
problem. For one execution order, each tensor is used at some steps (written once, read
by several operators); between two consecutive uses it either stays on the GPU (it then
occupies memory at every step in between) or is dropped and loaded again at the later
use (costing its size). A host tensor's first use is always a load. A step fits if its
inputs and outputs plus every tensor kept across it fit in the capacity. Trying every
keep/drop choice for every gap, in every topological order, gives the minimum load
volume. (Dropping a tensor part of the way through a gap and loading it again costs the
same load and holds less memory only where nothing needs it, so it is never better.)
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.registry import MEMORY_POLICIES
from workbench.strategies.memory.base import Operator, OperatorGraph, Tensor


@st.composite
def small_graphs(
    draw: st.DrawFn, max_ops: int = 5, max_tensors: int = 7, min_size: int = 0, chain: bool = False
):
    """A random operator graph and a capacity between its largest operator's inputs plus
    outputs and all its tensors at once. Without ``chain`` it often has several execution
    orders; with it, each operator reads the previous one's first output (one order, as in
    a training step), and the others read older tensors again."""
    n_ops = draw(st.integers(1, max_ops))
    sizes = st.integers(min_size, 4)  # few distinct sizes: equal-sized tensors are common
    tensors: list[Tensor] = []
    available: list[str] = []
    for h in range(draw(st.integers(0, 3))):
        tensors.append(Tensor(f"in{h}", draw(sizes), "features"))
        available.append(f"in{h}")
    operators = []
    for k in range(n_ops):
        room = max_tensors - len(tensors)
        reads = (
            draw(st.lists(st.sampled_from(available), min_size=1, max_size=3, unique=True))
            if available
            else []
        )
        if chain and operators and operators[-1].writes and operators[-1].writes[0] not in reads:
            reads = [operators[-1].writes[0], *reads[:2]]
        writes = []
        for j in range(draw(st.integers(1 if room > 0 else 0, min(2, max(room, 0))))):
            tensors.append(Tensor(f"t{k}.{j}", draw(sizes)))
            writes.append(f"t{k}.{j}")
        operators.append(Operator(f"op{k}", tuple(reads), tuple(writes)))
        available.extend(writes)
    graph = OperatorGraph(tuple(operators), tuple(tensors), "hypothesis")
    low = max(graph.working_set_bytes(k) for k in range(n_ops))
    high = max(low, sum(t.bytes for t in tensors))
    # Mostly tight capacities, where keeping one tensor means dropping another.
    return graph, draw(st.one_of(st.integers(low, min(high, low + 4)), st.integers(low, high)))


@st.composite
def step_graphs(draw: st.DrawFn):
    """A random training step shaped like a GNN's: forward operators ``f{l}`` read the previous
    activation, a weight and maybe the graph ``G``; backward operators ``b{l}``, in reverse,
    read the incoming gradient, what the forward saved and the weight again. Long-lived
    tensors nest around the loss, so tight capacities force choices between equal-sized ones."""
    layers = draw(st.integers(1, 4))
    size = st.integers(1, 4)
    tensors = [Tensor("G", draw(size), "adjacency"), Tensor("x", draw(size), "features")]
    operators = []
    prev = "x"
    for l in range(1, layers + 1):  # noqa: E741
        tensors += [Tensor(f"W{l}", draw(size), "model"), Tensor(f"a{l}", draw(size))]
        reads = [prev, f"W{l}"] + (["G"] if draw(st.booleans()) else [])
        operators.append(Operator(f"f{l}", tuple(reads), (f"a{l}",)))
        prev = f"a{l}"
    tensors.append(Tensor("g", draw(size), "gradients"))
    operators.append(Operator("loss", (prev,), ("g",)))
    grad = "g"
    for l in range(layers, 0, -1):  # noqa: E741
        saved = [f"a{l}"] + ([f"a{l - 1}" if l > 1 else "x"] if draw(st.booleans()) else [])
        reads = [grad, f"W{l}", *saved] + (["G"] if draw(st.booleans()) else [])
        tensors.append(Tensor(f"g{l}", draw(size), "gradients"))
        operators.append(Operator(f"b{l}", tuple(reads), (f"g{l}",), "backward"))
        grad = f"g{l}"
    graph = OperatorGraph(tuple(operators), tuple(tensors), "step")
    low = max(graph.working_set_bytes(k) for k in range(len(operators)))
    high = max(low, sum(t.bytes for t in tensors))
    return graph, draw(st.one_of(st.integers(low, min(high, low + 6)), st.integers(low, high)))


def topological_orders(graph: OperatorGraph) -> list[tuple[int, ...]]:
    """Every order in which each operator runs after the writers of what it reads."""
    writer = {name: k for k, op in enumerate(graph.operators) for name in op.writes}
    needs = [{writer[name] for name in op.reads if name in writer} for op in graph.operators]
    out: list[tuple[int, ...]] = []

    def extend(order: tuple[int, ...]) -> None:
        if len(order) == len(needs):
            out.append(order)
        for k in range(len(needs)):
            if k not in order and needs[k] <= set(order):
                extend((*order, k))

    extend(())
    return out


def brute_force_loads(graph: OperatorGraph, capacity: int) -> int:
    """Minimum load bytes over every execution order and every keep/drop choice per gap."""
    size = {t.name: t.bytes for t in graph.tensors}
    best = None
    for order in topological_orders(graph):
        ops = [graph.operators[k] for k in order]
        uses: dict[str, list[int]] = {}
        for p, op in enumerate(ops):
            for name in (*op.writes, *op.reads):
                uses.setdefault(name, []).append(p)
        fixed = sum(size[name] for name, u in uses.items() if not any(name in op.writes for op in ops))
        working = [sum(size[x] for x in {*op.reads, *op.writes}) for op in ops]
        # Gaps with a step in between; across none, keeping is free and always done.
        gaps = [
            (name, a, b)
            for name, u in uses.items()
            for a, b in zip(sorted(u), sorted(u)[1:], strict=False)
            if b > a + 1
        ]
        # kept[m]: bytes of the gaps in bitmask m; across[p]: the gaps with step p strictly inside.
        kept = [0] * (1 << len(gaps))
        for m in range(1, len(kept)):
            low = (m & -m).bit_length() - 1
            kept[m] = kept[m & (m - 1)] + size[gaps[low][0]]
        across = [sum(1 << j for j, (_, a, b) in enumerate(gaps) if a < p < b) for p in range(len(ops))]
        for choice in range(len(kept)):
            if all(working[p] + kept[choice & across[p]] <= capacity for p in range(len(ops))):
                cost = fixed + kept[-1] - kept[choice]
                best = cost if best is None else min(best, cost)
    assert best is not None  # keeping nothing always fits: capacity >= every working set
    return best


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        small_graphs(max_ops=6, max_tensors=9),
        small_graphs(max_ops=7, max_tensors=10, chain=True),
        step_graphs(),
    )
)
def test_dpmm_equals_brute_force(case: tuple[OperatorGraph, int]) -> None:
    graph, capacity = case
    schedule = MEMORY_POLICIES.create("dpmm").schedule(graph, capacity)
    assert schedule.h2d_bytes == brute_force_loads(graph, capacity)
    assert schedule.exact  # the bound never bound here: the search was complete
    assert schedule.peak_bytes <= capacity


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        small_graphs(max_ops=7, max_tensors=10),
        small_graphs(max_ops=9, max_tensors=12, chain=True),
        step_graphs(),
    )
)
def test_dpmm_never_worse_than_lru_and_lru_never_worse_than_streaming(
    case: tuple[OperatorGraph, int],
) -> None:
    graph, capacity = case
    loads = {
        name: MEMORY_POLICIES.create(name).schedule(graph, capacity).h2d_bytes
        for name in ("dpmm", "lru", "streaming")
    }
    assert loads["dpmm"] <= loads["lru"] <= loads["streaming"]
    # A beam of one cached set per state is a greedy search; LRU's trajectory is kept in it.
    assert MEMORY_POLICIES.create("dpmm", beam=1).schedule(graph, capacity).h2d_bytes <= loads["lru"]


@settings(max_examples=100, deadline=None)
@given(small_graphs(max_ops=6, max_tensors=9))
def test_every_policy_writes_back_each_output_once_and_fits(case: tuple[OperatorGraph, int]) -> None:
    graph, capacity = case
    outputs = sorted(name for op in graph.operators for name in op.writes)
    for name in MEMORY_POLICIES.names():
        schedule = MEMORY_POLICIES.create(name).schedule(graph, capacity)
        assert sorted(n for s in schedule.steps for n in s.write_back) == outputs
        assert schedule.peak_bytes <= capacity
        assert schedule.steps[-1].keep == ()
