"""Iteration plans for the quick demo: data-parallel minibatch training (DGL style).

This is the demo's own small plan builder, written against the shared vocabulary
(samplers' minibatches, a per-GPU feature cache, a model spec). The execution-scheme
issue replaces it with the registered model-centric scheme.

Per iteration and worker (one worker per GPU):

1. ``sample``: CPU work on the worker's host, cost features from the sampled edges;
   the next iteration's sampling only waits for this one's (samplers run ahead).
2. ``gather``: input vertices cached on the worker's GPU cost nothing to move; the
   others are copied from host memory (``h2d``; ``gather_remote`` when their home is
   another machine's host, crossing the network).
3. ``forward`` then ``backward`` compute per layer, features from the model spec.
4. ``allreduce`` of the gradients among all GPUs, after every worker's backward.
"""

from __future__ import annotations

import numpy as np

from workbench.hardware.spec import ClusterSpec
from workbench.model import BACKWARD_FLOP_RATIO, ModelSpec
from workbench.plan import Plan
from workbench.strategies.sampling.base import Minibatch


def data_parallel_plan(
    batches: list[list[Minibatch]],
    cluster: ClusterSpec,
    model: ModelSpec,
    feat_bytes: int,
    cached: list[np.ndarray] | None = None,
    host_of_vertex: np.ndarray | None = None,
    name: str = "data-parallel",
) -> Plan:
    """``batches[i][w]`` is worker ``w``'s minibatch of iteration ``i``.

    ``cached[w]`` is a boolean mask of vertices whose features GPU ``w`` holds;
    ``host_of_vertex[v]`` the machine index whose host memory holds ``v`` (all local when None).
    """
    gpus = cluster.gpu_nodes()
    workers = len(batches[0])
    if workers > len(gpus):
        raise ValueError(f"{workers} workers but the cluster has {len(gpus)} GPUs")
    machine_index = {m.name: i for i, m in enumerate(cluster.machines)}
    plan = Plan(name, meta={"hardware": cluster.name, "model": model.name, "workers": workers})
    for w in range(workers):
        plan.keep("model", gpus[w], 3 * model.param_bytes())  # weights, gradients, optimizer state
        if cached is not None:
            plan.keep("feature-cache", gpus[w], int(cached[w].sum()) * feat_bytes)
    for it, per_worker in enumerate(batches):
        finals = []
        for w, mb in enumerate(per_worker):
            gpu = gpus[w]
            my_machine = machine_index[gpu.split(".")[0]]
            host = cluster.machines[my_machine].host_node
            sampled_edges = sum(b.num_edges for b in mb.blocks)
            sample_id = f"i{it}.w{w}.sample"
            prev = [f"i{it - 1}.w{w}.sample"] if it else []
            plan.compute(
                sample_id,
                host,
                "sample",
                prev,
                worker=w,
                iteration=it,
                items=sampled_edges,
                features={"edges": float(sampled_edges), "vertices": float(mb.input_nodes.shape[0])},
            )
            inputs = mb.input_nodes
            miss = inputs if cached is None else inputs[~cached[w][inputs]]
            gathers = []
            owner_machine = (
                np.full(miss.shape[0], my_machine) if host_of_vertex is None else host_of_vertex[miss]
            )
            for src_machine in np.unique(owner_machine):
                n = int((owner_machine == src_machine).sum())
                remote = int(src_machine) != my_machine
                tid = f"i{it}.w{w}.gather.m{int(src_machine)}"
                plan.transfer(
                    tid,
                    cluster.machines[int(src_machine)].host_node,
                    gpu,
                    n * feat_bytes,
                    "gather_remote" if remote else "h2d",
                    [sample_id],
                    worker=w,
                    iteration=it,
                    items=n,
                    carries="features",
                )
                gathers.append(tid)
            last = gathers or [sample_id]
            sizes = [(b.num_src, b.num_dst, b.num_edges) for b in mb.blocks]
            costs = model.layer_costs(sizes)
            for layer, feats in enumerate(costs):
                tid = f"i{it}.w{w}.fwd{layer}"
                prior = last + ([f"i{it - 1}.allreduce"] if it and layer == 0 else [])
                act = model.layers[layer].activation_bytes(sizes[layer][1])
                plan.compute(
                    tid,
                    gpu,
                    "forward",
                    prior,
                    worker=w,
                    iteration=it,
                    items=sizes[layer][2],
                    features=feats,
                    memory=act,
                )
                last = [tid]
            for layer in reversed(range(len(costs))):
                tid = f"i{it}.w{w}.bwd{layer}"
                feats = dict(costs[layer])
                feats["flops"] *= BACKWARD_FLOP_RATIO
                feats["bytes"] *= BACKWARD_FLOP_RATIO
                plan.compute(
                    tid, gpu, "backward", last, worker=w, iteration=it, items=sizes[layer][2], features=feats
                )
                last = [tid]
            finals.extend(last)
        plan.collective(
            f"i{it}.allreduce",
            "allreduce",
            gpus[:workers],
            model.param_bytes(),
            "allreduce",
            finals,
            iteration=it,
        )
    return plan
