"""HopGNN's schedule, worked out by hand on the running example (paper 003, two servers), its
route rule on hand-made cells, and the plan's HopGNN task ids: exactly those the schedule names."""

from __future__ import annotations

import numpy as np

from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution import task_ids
from workbench.strategies.execution.base import feature_reads
from workbench.strategies.execution.hopgnn import (
    Carried,
    Cell,
    Hop,
    HopGNNSchedule,
    cell_prefix,
    migrate_task,
    model_route,
    pregather_task,
    pregathered_task,
)
from workbench.strategies.execution.micrographs import Micrographs

from .test_hopgnn import running_example

# The running example's minibatches: worker 0 sampled seeds [3, 6], worker 1 seeds [0, 5];
# server 0 owns 4-7 and server 1 owns 0-3. ``global`` deals each server's roots, in vertex
# order, round-robin from model s: server 0's 5, 6 go to models 0, 1; server 1's 0, 3 to 1, 0.
# Model d is at server (d + t) mod 2 in step t, so:
#   step 0: model 0 on server 0 trains 5, model 1 on server 1 trains 0;
#   step 1: model 0 on server 1 trains 3, model 1 on server 0 trains 6.
# Root rows are (worker, position in its seeds): 5 = (1, 1), 0 = (1, 0), 3 = (0, 0), 6 = (0, 1).
# Input vertices (the running example's docstring): 5 <- {6, 1}, 6 <- {7, 5}, 1 <- {0, 5}: {0, 1, 5, 6, 7};
# 6: {1, 5, 6, 7}; 0: {0, 2, 3, 4}; 3: {0, 2, 3, 4, 5}.


def roots_of(schedule: HopGNNSchedule) -> list[list[list[int]]]:
    return [[sorted(c.micrographs.roots.tolist()) for c in model] for model in schedule.cells]


def test_the_running_examples_schedule_by_hand():
    inputs = running_example()
    schedule = EXECUTION_SCHEMES.create("hopgnn", merge=False).schedule(inputs, 0)
    assert schedule.kept == (0, 1)
    assert roots_of(schedule) == [[[5], [3]], [[0], [6]]]
    assert [[c.server for c in model] for model in schedule.cells] == [[0, 1], [1, 0]]
    assert [[c.rows.tolist() for c in model] for model in schedule.cells] == [
        [[[1, 1]], [[0, 0]]],
        [[[1, 0]], [[0, 1]]],
    ]
    assert [[c.micrographs.input_nodes.tolist() for c in model] for model in schedule.cells] == [
        [[0, 1, 5, 6, 7], [0, 2, 3, 4, 5]],
        [[0, 2, 3, 4], [1, 5, 6, 7]],
    ]
    # Each server's last cell is step 1's; it frees the iteration's pre-gathered rows.
    assert [[c.final for c in model] for model in schedule.cells] == [[False, True], [False, True]]
    # Both models migrate once, after their step-0 cell, with the parameters and the gradients.
    carries = (
        Carried("model", inputs.model.param_bytes()),
        Carried("gradients", inputs.model.gradient_bytes()),
    )
    assert schedule.route == (Hop(0, 0, 1, 0, 1, carries), Hop(1, 1, 0, 0, 1, carries))
    assert schedule.sends(0) == {0: [schedule.route[0]]} and schedule.receives(0) == {1: schedule.route[1]}
    # Pre-gathering: each server's cells' inputs, once (vertex 1 on server 0 is needed by both).
    assert schedule.pregather is not None
    assert [v.tolist() for v in schedule.pregather] == [[0, 1, 5, 6, 7], [0, 2, 3, 4, 5]]
    assert [schedule.model_roots(d) for d in range(2)] == [2, 2]


def test_merging_the_running_example_by_hand():
    inputs = running_example()
    # Both steps hold two roots: the first (step 0) is dropped. "model": each model keeps its own
    # roots, now all in step 1 (model 0 on server 1, model 1 on server 0), so no model moves.
    merged = EXECUTION_SCHEMES.create("hopgnn", merges=1).schedule(inputs, 0)
    assert merged.kept == (1,)
    assert roots_of(merged) == [[[3, 5]], [[0, 6]]]
    assert [model[0].server for model in merged.cells] == [1, 0]
    assert merged.route == ()
    assert [sorted(model[0].micrographs.sources) for model in merged.cells] == [[0, 1], [0, 1]]
    # "home": step 0's root on server s goes to the model there in step 1, so none leaves home:
    # server 0 (model 1) trains 6 and 5, server 1 (model 0) trains 3 and 0.
    home = EXECUTION_SCHEMES.create("hopgnn", merges=1, merge_to="home").schedule(inputs, 0)
    assert home.kept == (1,)
    assert roots_of(home) == [[[0, 3]], [[5, 6]]]
    assert home.route == ()


def _cells(counts: list[int], n: int) -> tuple[Cell, ...]:
    """Model 0's cells in time steps 0, 1, ... with ``counts`` roots each."""
    empty = np.zeros(0, dtype=np.int64)
    return tuple(
        Cell(
            0,
            t % n,
            t,
            t,
            np.zeros((k, 2), dtype=np.int64),
            Micrographs(np.arange(k), [], empty, None, []),
            False,
        )
        for t, k in enumerate(counts)
    )


def test_a_model_skips_its_empty_cells_and_stays_after_its_last():
    carries = (Carried("model", 8), Carried("gradients", 8))
    # Three servers: roots at steps 0 and 2, none at 1: one hop, 0 -> 2, leaving after step 0.
    assert model_route(_cells([2, 0, 1], 3), 0, carries) == [Hop(0, 0, 2, 0, 2, carries)]
    # Nothing before step 1: it leaves at the iteration's start; nothing after: it stays on 1.
    assert model_route(_cells([0, 3, 0], 3), 0, carries) == [Hop(0, 0, 1, -1, 1, carries)]
    assert model_route(_cells([1, 1, 1], 3), 0, carries) == [
        Hop(0, 0, 1, 0, 1, carries),
        Hop(0, 1, 2, 1, 2, carries),
    ]
    assert model_route(_cells([0, 0, 0], 3), 0, carries) == []


def named_by_the_schedule(inputs, schedule: HopGNNSchedule, pregather: bool) -> set[str]:
    """Every HopGNN-specific task id the schedule implies, through the one namer."""
    it, names = schedule.iteration, set()
    for hop in schedule.route:
        names |= {migrate_task(it, hop.src, hop.model, part.what) for part in hop.carries}
    for model in schedule.cells:
        for cell in (c for c in model if c.num_roots):
            prefix = cell_prefix(it, cell.server, cell.step)
            layers = range(inputs.model.num_layers)
            names |= {task_ids.forward_task(prefix, k) for k in layers}
            names |= {task_ids.backward_task(prefix, k) for k in layers}
            reads = feature_reads(inputs, cell.server, cell.micrographs.input_nodes)
            near = [r for r in reads if not (pregather and r.kind == "remote")]
            names |= {task_ids.read_task(prefix, r.kind, r.source) for r in near}
            if pregather and len(near) < len(reads):
                names.add(pregathered_task(prefix))
    if pregather:
        for s, vertices in enumerate(schedule.pregather or ()):
            reads = feature_reads(inputs, s, vertices)
            names |= {pregather_task(it, s, r.source) for r in reads if r.kind == "remote"}
    return names


def test_the_plans_hopgnn_task_ids_are_those_the_schedule_names():
    inputs = running_example()
    for params in ({"merge": False, "pregather": False}, {"merge": False}, {"merges": 1}):
        scheme = EXECUTION_SCHEMES.create("hopgnn", **params)
        plan = scheme.build(inputs)
        common = {task_ids.allreduce_task(0)}
        common |= {task_ids.sample_task(task_ids.worker_prefix(0, w)) for w in range(2)}
        common |= {task_ids.update_task(0, w) for w in range(2)}
        own = {t.id for t in plan.tasks} - common
        assert own == named_by_the_schedule(inputs, scheme.schedule(inputs, 0), scheme.pregather), params
        assert any(".migrate." in name for name in own) == ("merges" not in params)


def test_a_schedule_is_computed_once_per_epoch_and_dies_with_it():
    import dataclasses
    import gc

    from workbench.strategies.execution.hopgnn import _SCHEDULES

    inputs = running_example()
    first = EXECUTION_SCHEMES.create("hopgnn", merge=False).schedule(inputs, 0)
    # Another point of a sweep on the same epoch (another scheme object, no cache): the same schedule.
    again = EXECUTION_SCHEMES.create("hopgnn", merge=False)
    assert again.schedule(dataclasses.replace(inputs, placement=None), 0) is first
    assert EXECUTION_SCHEMES.create("hopgnn", merges=1).schedule(inputs, 0) is not first
    anchor = id(inputs.epoch[0][0])
    assert anchor in _SCHEDULES.entries
    del inputs
    gc.collect()
    assert anchor not in _SCHEDULES.entries
