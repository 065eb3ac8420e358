"""What the worker processes' forkserver imports once (:mod:`realrun.processes`).

Everything a worker imports before its first task: PyTorch and torch.distributed, the
worker loop and every real scheme, and DGL where it loads (a worker that trains with
DGL's layers imports it anyway; where it does not load, the workers use the plain-PyTorch
layers and the error is theirs to report, not the server's). Nothing here starts a
thread, opens a device or joins a group: the forks must inherit a quiet process.
"""

from __future__ import annotations

import torch._dynamo  # noqa: F401 - an optimizer's constructor imports it: 2-3 s, once per worker otherwise

import realrun.worker  # noqa: F401 - torch, torch.distributed and the worker loop
from realrun.schemes import REAL_EXECUTORS
from workbench.dgl_loader import DGLUnavailableError, load_dgl

REAL_EXECUTORS.names()  # imports every scheme's module, as a worker's first lookup would
try:
    load_dgl()
except DGLUnavailableError:
    pass
