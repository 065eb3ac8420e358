"""Samplers: seed vertices to per-layer blocks with real vertex ids (one file per sampler).

Registered names (``SAMPLERS``): full, neighbor, ladies, fastgcn, locality-aware,
bulk-matrix. The interface and the block conventions are in :mod:`.base`; the
distributed bulk-sampling plans of paper 004 are built by
:func:`.bulk_matrix_plan.bulk_sampling_plan`. Helpers shared by the sampler files
(argument checks, numba kernels) live in the private ``_common`` and ``_kernels``.
"""

from workbench.strategies.sampling.base import Block, Minibatch, Sampler, check_block_invariants, check_seeds

__all__ = ["Block", "Minibatch", "Sampler", "check_block_invariants", "check_seeds"]
