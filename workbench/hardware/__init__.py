"""Cluster descriptions: typed specs, TOML files and the papers' presets."""

from workbench.hardware.presets import PRESETS, load_hardware
from workbench.hardware.spec import (
    ClusterSpec,
    GPUSpec,
    LinkSpec,
    MachineSpec,
    cluster_from_dict,
    load_cluster_toml,
)

__all__ = [
    "PRESETS",
    "ClusterSpec",
    "GPUSpec",
    "LinkSpec",
    "MachineSpec",
    "cluster_from_dict",
    "load_cluster_toml",
    "load_hardware",
]
