"""The advisor's candidates: counted by hand from the restrictions, and bad names refused."""

from __future__ import annotations

import pytest

from studies.advisor.space import Base, Candidate, Restrictions, candidates
from workbench.config import config_from_dict
from workbench.errors import ConfigError


def test_candidates_are_the_per_scheme_products() -> None:
    cands = candidates(
        Restrictions(
            schemes=("model-centric", "roc-fullgraph", "neugraph-stream"),
            partitioners=("random", "metis", "equal-edge", "chunk2d"),
            placements=("none", "degree"),
            capacities=("5%",),
            batch_sizes=(256,),
        )
    )
    # model-centric: 3 partitioners (chunk2d is NeuGraph's grid) x (no cache, degree 5%) = 6;
    # roc-fullgraph: metis, equal-edge x 4 memory policies = 8; neugraph-stream: chunk2d = 1.
    assert len(cands) == 15
    assert sum(c.scheme == "model-centric" for c in cands) == 6
    assert {c.memory for c in cands if c.scheme == "roc-fullgraph"} == {
        "resident",
        "dpmm",
        "lru",
        "streaming",
    }
    assert [c for c in cands if c.scheme == "neugraph-stream"] == [
        Candidate("neugraph-stream", "chunk2d", "-")
    ]
    assert len(set(cands)) == len(cands)


def test_a_scheme_that_places_features_itself_is_searched_without_a_cache() -> None:
    cands = candidates(
        Restrictions(schemes=("bulk-pipeline",), partitioners=("random", "metis"), batch_sizes=(256,))
    )
    assert [(c.partition, c.placement) for c in cands] == [("random", "none"), ("metis", "none")]


@pytest.mark.parametrize(
    ("restriction", "message"),
    [
        (Restrictions(schemes=("model-centric", "nope")), "--schemes: unknown 'nope'; allowed: "),
        (
            Restrictions(partitioners=("roc",)),
            "--partitioners: 'roc' is not searched: learns its split online",
        ),
        (Restrictions(placements=("fifo",)), "--placements: 'fifo' is not searched: a dynamic cache"),
        (Restrictions(memory_policies=("lifo",)), "--memory-policies: unknown 'lifo'"),
        (Restrictions(schemes=("neugraph-stream",), partitioners=("random",)), "leave no candidate"),
    ],
)
def test_bad_restrictions_are_one_line(restriction: Restrictions, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as info:
        candidates(restriction)
    assert "\n" not in str(info.value)


def test_every_candidate_is_a_valid_run_configuration() -> None:
    base = Base(graph="rmat:n=500,m=4000,feat=8", hardware="hopgnn-4xa100-10gbe", workers=2)
    for c in candidates(Restrictions(batch_sizes=(64,))):
        cfg = config_from_dict(base.config(c, iterations=4), c.label)
        assert cfg.strategy("execution").name == c.scheme
        assert cfg.training.workers == 2
