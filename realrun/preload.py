"""What the worker processes' forkserver imports once (:mod:`realrun.processes`).

Everything a worker imports before its first task: PyTorch and torch.distributed, the
worker loop and every real scheme, and DGL where it loads (a worker that trains with
DGL's layers imports it anyway; where it does not load, the workers use the plain-PyTorch
layers and the error is theirs to report, not the server's). Nothing here starts a
thread, opens a device or joins a group: the forks must inherit a quiet process.
"""

from __future__ import annotations

import torch  # noqa: F401
import torch._dynamo  # noqa: F401 - an optimizer's constructor imports it: 2-3 s, once per worker otherwise
import torch.distributed  # noqa: F401
import torch.optim  # noqa: F401

import realrun.schemes  # noqa: F401
import realrun.worker  # noqa: F401
from workbench.dgl_loader import DGLUnavailableError, load_dgl

try:
    load_dgl()
except DGLUnavailableError:
    pass
