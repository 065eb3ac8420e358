"""GPU memory over simulated time: resident tensors, allocate/free, landing buffers, workspaces.

Every case runs on one machine whose GPUs have 16 GiB; byte counts are in GiB so the
sums are easy to follow. Kernels take the ``seconds`` their features state.
"""

from __future__ import annotations

import pytest

from sim import simulate
from workbench.errors import InfeasiblePlanError, PlanError
from workbench.hardware.spec import ClusterSpec, GPUSpec, LinkSpec, MachineSpec
from workbench.plan import Plan

GiB = 2**30


@pytest.fixture(scope="module")
def box() -> ClusterSpec:
    """m0: two 16 GiB GPUs, each on its own 16 GiB/s PCIe link to the root complex, no latency."""
    g = GPUSpec("TestGPU", 16 * GiB, 10e12, 500e9)
    m = MachineSpec("m0", (g, g), 64 * GiB)
    links = (
        LinkSpec("m0.host", "m0.rc", 64 * GiB, 0.0, "host"),
        LinkSpec("m0.rc", "m0.gpu0", 16 * GiB, 0.0, "pcie"),
        LinkSpec("m0.rc", "m0.gpu1", 16 * GiB, 0.0, "pcie"),
    )
    return ClusterSpec("box", (m,), links, {"m0.rc": "root-complex"})


def kernel(p: Plan, tid: str, seconds: float, deps=(), device: str = "m0.gpu0", **kw):
    return p.compute(tid, device, "forward", deps, features={"seconds": seconds}, **kw)


def test_two_tasks_that_overflow_together_are_infeasible_and_fine_in_sequence(box):
    # warm (0.5 s) runs first. Then, both ready at 0.5 s: the kernel a holds a 10 GiB workspace
    # for 1 s, and the copy b lands 10 GiB from host (its buffer, 10 GiB at 16 GiB/s = 0.625 s).
    # They run at once (compute stream and copy engine are different engines): at t = 0.5 s
    # gpu0 holds 20 GiB of 16: 4 GiB over. The old check (resident + the largest single
    # task's memory) said 10 GiB and accepted it.
    p = Plan("together")
    kernel(p, "warm", 0.5)
    kernel(p, "a", 1.0, ["warm"], memory=10 * GiB)
    p.transfer("b", "m0.host", "m0.gpu0", 10 * GiB, "h2d", ["warm"])
    with pytest.raises(InfeasiblePlanError) as err:
        simulate(p, box)
    assert str(err.value) == (
        "plan 'together' does not fit: m0.gpu0 holds 20 GiB of 16 GiB (4 GiB over) at t=0.5 s; "
        "live then: buffer of transfer 'b' 10 GiB, workspace of task 'a' 10 GiB"
    )
    # In sequence (b after a): a's workspace is gone when b's buffer lands; the peak is 10 GiB.
    p.tasks[2].deps = ["a"]
    assert simulate(p, box).memory["m0.gpu0"] == 10 * GiB


def test_the_message_names_the_first_moment_over_and_the_peak(box):
    # a (gpu0, 0-2 s) holds a 10 GiB workspace. t1 (gpu1, 0-1 s) releases b: 8 GiB lands on
    # gpu0 from 1 s (10 + 8 = 18 GiB: over, the first moment) to 1.5 s (8 GiB at 16 GiB/s),
    # and stays until its reader c ends. t12 (gpu1, 1-1.2 s) releases d, 1 GiB into gpu0, which
    # waits for gpu0's one inbound engine until b is through: it lands at 1.5 s, making
    # 10 + 8 + 1 = 19 GiB, the peak. c (2-3 s, after a and b) holds 8 + 3 = 11 GiB.
    p = Plan("peaks")
    kernel(p, "a", 2.0, memory=10 * GiB)
    kernel(p, "t1", 1.0, device="m0.gpu1")
    p.transfer("b", "m0.host", "m0.gpu0", 8 * GiB, "h2d", ["t1"])
    kernel(p, "t12", 0.2, ["t1"], device="m0.gpu1")
    p.transfer("d", "m0.host", "m0.gpu0", 1 * GiB, "h2d", ["t12"])
    kernel(p, "c", 1.0, ["a", "b"], allocate={"out": 3 * GiB})
    with pytest.raises(InfeasiblePlanError, match="peaks") as err:
        simulate(p, box)
    msg = str(err.value)
    assert "m0.gpu0 holds 19 GiB of 16 GiB (3 GiB over) at t=1.5 s, first over at t=1 s;" in msg
    assert (
        "live then: workspace of task 'a' 10 GiB, buffer of transfer 'b' 8 GiB, buffer of transfer 'd' 1 GiB"
        in msg
    )


def test_named_tensors_live_from_allocation_to_free(box):
    # fwd allocates h (6 GiB) at 0 and runs 1 s; bwd (1-2 s) allocates g (6 GiB) and frees h
    # at its end; opt (2-3 s) frees g. Peak: h + g = 12 GiB during bwd. A 5 GiB resident
    # cache on top makes 17 GiB: over, at t=1 s, with h and g named.
    p = Plan("named")
    kernel(p, "fwd", 1.0, allocate={"h": 6 * GiB})
    kernel(p, "bwd", 1.0, ["fwd"], allocate={"g": 6 * GiB}, free=["h"])
    kernel(p, "opt", 1.0, ["bwd"], free=["g"])
    assert simulate(p, box).memory["m0.gpu0"] == 12 * GiB
    p.keep("cache", "m0.gpu0", 5 * GiB)
    with pytest.raises(InfeasiblePlanError, match=r"17 GiB of 16 GiB \(1 GiB over\) at t=1 s; live then: "):
        simulate(p, box)


def test_swap_out_and_swap_in_are_transfers_and_reuse_is_staying_live(box):
    # A memory policy's vocabulary: f1 makes act (10 GiB); out copies it to host (10 GiB at
    # 16 GiB/s: 0.625 s), allocating act.host there and freeing act on the GPU; f2 then
    # needs 10 GiB of its own (fits: act is gone); back copies act home again and frees the
    # host copy; b1 reads it. Without the swap, act and f2's 10 GiB would need 20 GiB.
    p = Plan("swap")
    kernel(p, "f1", 1.0, allocate={"act": 10 * GiB})
    p.transfer(
        "out", "m0.gpu0", "m0.host", 10 * GiB, "swap", ["f1"], allocate={"act.host": 10 * GiB}, free=["act"]
    )
    kernel(p, "f2", 1.0, ["out"], allocate={"tmp": 10 * GiB})
    kernel(p, "f3", 0.5, ["f2"], free=["tmp"])
    p.transfer(
        "back", "m0.host", "m0.gpu0", 10 * GiB, "swap", ["f3"], allocate={"act": 10 * GiB}, free=["act.host"]
    )
    kernel(p, "b1", 1.0, ["back"], free=["act"])
    r = simulate(p, box)
    assert r.memory == {"m0.gpu0": 10 * GiB, "m0.host": 10 * GiB}
    assert r.makespan == pytest.approx(1.0 + 0.625 + 1.0 + 0.5 + 0.625 + 1.0)
    # Keeping act live instead (no swap) is the same plan without out/back: 20 GiB, infeasible.
    q = Plan("reuse")
    kernel(q, "f1", 1.0, allocate={"act": 10 * GiB})
    kernel(q, "f2", 1.0, ["f1"], allocate={"tmp": 10 * GiB})
    with pytest.raises(InfeasiblePlanError, match="20 GiB of 16 GiB"):
        simulate(q, box)


def test_a_landing_buffer_lives_until_its_last_reader_ends(box):
    # load lands 8 GiB (0.5 s); r1 (0.5-1.5 s) and r2 (1.5-2.5 s, same stream) read it, so it
    # lives until 2.5 s. r3 (2.5-3.5 s, after r1 and r2) makes 8 GiB: with the buffer freed at
    # 2.5 s, the peak is 8 GiB; were it kept, 16 + 8 would not fit.
    p = Plan("buffer")
    p.transfer("load", "m0.host", "m0.gpu0", 8 * GiB, "h2d")
    kernel(p, "r1", 1.0, ["load"])
    kernel(p, "r2", 1.0, ["load"])
    kernel(p, "r3", 1.0, ["r1", "r2"], allocate={"x": 8 * GiB})
    kernel(p, "r3b", 0.1, ["r3"], allocate={"y": 8 * GiB})  # 16 GiB: exactly full, fits
    r = simulate(p, box)
    assert r.memory["m0.gpu0"] == 16 * GiB
    assert r.makespan == pytest.approx(3.6)


def test_freeing_a_tensor_that_is_not_live_is_a_plan_error(box):
    # make allocates x on gpu0 after a 1 s kernel; drop, on gpu1 and not after make, would
    # free it at 0.1 s: a race the plan must not have, refused before anything runs.
    p = Plan("race")
    kernel(p, "busy", 1.0)
    kernel(p, "make", 1.0, ["busy"], allocate={"x": GiB})
    kernel(p, "drop", 0.1, device="m0.gpu1", free=["x"])
    with pytest.raises(
        PlanError, match=r"task 'drop': frees tensor 'x', allocated by task 'make', but does not"
    ):
        simulate(p, box)
    q = Plan("twice")
    kernel(q, "a", 1.0, allocate={"x": GiB})
    kernel(q, "b", 1.0, device="m0.gpu1", allocate={"x": GiB})
    with pytest.raises(PlanError, match=r"task 'b' allocates tensor 'x' at t=0 s while it is still live"):
        simulate(q, box)


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda p: kernel(p, "a", 1.0, free=["ghost"]),
            "task 'a': frees tensor 'ghost', which no task allocates",
        ),
        (
            lambda p: (p.keep("w", "m0.gpu0", 1), kernel(p, "a", 1.0, free=["w"])),
            "task 'a': frees resident tensor 'w'",
        ),
        (
            lambda p: (p.keep("w", "m0.gpu0", 1), kernel(p, "a", 1.0, allocate={"w": 1})),
            "task 'a': allocates 'w', the name of a resident tensor",
        ),
        (
            lambda p: p.collective(
                "c", "allreduce", ["m0.gpu0", "m0.gpu1"], 8, "allreduce", allocate={"x": 8}
            ),
            "task 'c': a collective allocates nothing",
        ),
        (
            lambda p: kernel(p, "a", 1.0, allocate={"x": -1}),
            r"task 'a': allocate\['x'\] must be a non-negative",
        ),
        (lambda p: kernel(p, "a", 1.0, free=["x", "x"]), "task 'a': free names a tensor twice"),
    ],
)
def test_bad_tensor_vocabulary_is_named(box, build, message):
    p = Plan("bad")
    build(p)
    with pytest.raises(PlanError, match=message):
        simulate(p, box)


def test_a_collectives_workspace_counts_on_each_of_its_devices(box):
    # A 12 GiB cache on gpu1 and an all-reduce with 5 GiB of staging on both GPUs: gpu1 holds 17.
    p = Plan("staging")
    p.keep("cache", "m0.gpu1", 12 * GiB)
    p.collective("ar", "allreduce", ["m0.gpu0", "m0.gpu1"], GiB, "allreduce", memory=5 * GiB)
    with pytest.raises(
        InfeasiblePlanError, match=r"m0.gpu1 holds 17 GiB of 16 GiB .* workspace of task 'ar' 5 GiB"
    ):
        simulate(p, box)
