"""``model-centric``: DGL-style data-parallel minibatch training (the baseline of papers 002 and 003).

Every worker holds a full copy of the model. Per iteration, each worker:

1. samples its minibatch from its partition's training vertices on its host's CPU
   (``sample``; ``prefetch`` minibatches are sampled, and their features gathered, while
   one trains: DGL's data loader keeps one in flight);
2. gathers the input features to its GPU: from its own GPU cache (``gather_local``), a
   peer GPU's cache over NVLink/NVSwitch when the placement distributes
   (``d2d``), its machine's host memory (``h2d``), or another machine's host memory
   over the network (``gather_remote``): the *features move to the model*, which is
   what HopGNN (paper 003, section 3) calls model-centric;
3. runs forward and backward layer by layer;
4. all-reduces the gradients with every other worker, then steps the optimizer.

Iteration ``i + 1``'s forward waits for iteration ``i``'s optimizer step; its sampling
and feature copies may overlap iteration ``i``'s compute (``prefetch`` >= 1).
"""

from __future__ import annotations

from workbench.plan import Plan
from workbench.registry import EXECUTION_SCHEMES
from workbench.strategies.execution.base import (
    FEATURE_SERVICE_HELP,
    PREFETCH_HELP,
    Exchange,
    ExecutionScheme,
    Prefetch,
    SchemeInputs,
    add_feature_reads,
    add_forward_backward,
    add_gradient_sync,
    add_resident_state,
    add_sampling,
    add_service_reads,
    block_sizes,
    check_prefetch,
)


@EXECUTION_SCHEMES.register("model-centric")
class ModelCentricScheme(ExecutionScheme):
    """DGL-style data parallel: features move to each worker's model copy, gradients all-reduced."""

    HELP = {
        "prefetch": PREFETCH_HELP,
        "overlap_reads": "a minibatch's feature reads from different sources run at once (DGL's KV store); "
        "false: in stages, as the real feature store runs them",
        "feature_service": FEATURE_SERVICE_HELP,
    }

    def __init__(self, prefetch: int = 1, overlap_reads: bool = True, feature_service: bool = False) -> None:
        self.prefetch = check_prefetch(prefetch, "model-centric")
        self.overlap_reads = overlap_reads
        self.feature_service = feature_service

    def build(self, inputs: SchemeInputs) -> Plan:
        # The service is named in the meta only when on, so other plans stay as they were.
        service = {"feature_service": True} if self.feature_service else {}
        plan = self.empty_plan(inputs, prefetch=self.prefetch, overlap_reads=self.overlap_reads, **service)
        add_resident_state(plan, inputs)
        ahead = Prefetch(self.prefetch)
        steps: list[str] = []
        for it, minibatches in enumerate(inputs.epoch):
            finals = []
            exchange = Exchange()
            for w, mb in enumerate(minibatches):
                prefix = f"i{it}.w{w}"
                sample = add_sampling(plan, inputs, w, it, mb, prefix, ahead)
                if self.feature_service:
                    reads, gathered = add_service_reads(plan, inputs, w, it, mb.input_nodes, [sample], prefix)
                else:
                    reads, gathered = add_feature_reads(
                        plan, inputs, w, it, mb.input_nodes, [sample], prefix, self.overlap_reads, exchange
                    )
                ready = reads or [sample]
                if steps:
                    ready = [*ready, steps[w]]
                sizes = block_sizes(mb)
                finals.append(add_forward_backward(plan, inputs, w, it, sizes, ready, prefix, frees=gathered))
            exchange.couple()
            steps = add_gradient_sync(plan, inputs, it, finals)
            ahead.record(steps)
            inputs.planned(it)
        return plan
