"""Hardware specs: presets, TOML round trip, units and validation."""

from __future__ import annotations

import tomllib

import pytest

from workbench.errors import ConfigError, UnknownNameError
from workbench.hardware import PRESETS, cluster_from_dict, load_cluster_toml, load_hardware
from workbench.hardware.units import parse_bandwidth, parse_latency, parse_rate, parse_size


@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_round_trips_through_toml(name: str) -> None:
    spec = load_hardware(name)
    again = cluster_from_dict(tomllib.loads(spec.to_toml()))
    assert again.to_dict() == spec.to_dict()
    assert again.num_gpus == spec.num_gpus > 0


def test_presets_have_the_papers_shapes() -> None:
    assert load_hardware("neugraph-8xp100-pcie").num_gpus == 8
    roc = load_hardware("roc-4x4p100-nvlink-ib")
    assert len(roc.machines) == 4 and roc.num_gpus == 16
    assert sum(link.kind == "nvlink" for link in roc.links) == 4 * 6
    hop = load_hardware("hopgnn-4xa100-10gbe")
    assert [len(m.gpus) for m in hop.machines] == [1, 1, 1, 1]
    assert hop.gpu("m2.gpu0").memory_bytes == 40 * 2**30
    net = [link for link in hop.links if link.kind == "network"]
    assert all(link.bandwidth == pytest.approx(10e9 / 8) for link in net)
    bridge = load_hardware("v100x8-nvlink-bridge")
    assert sum(link.kind == "nvlink" for link in bridge.links) == 4
    nvs = load_hardware("v100x8-nvswitch")
    assert sum(link.kind == "nvswitch" for link in nvs.links) == 8


def test_units() -> None:
    assert parse_bandwidth("12 GB/s", "x") == 12e9
    assert parse_bandwidth("100 Gbit/s", "x") == pytest.approx(12.5e9)
    assert parse_bandwidth("10 Gb/s", "x") == pytest.approx(1.25e9)
    assert parse_bandwidth("1 GiB/s", "x") == 2**30
    assert parse_latency("5 us", "x") == pytest.approx(5e-6)
    assert parse_latency("1.5 ms", "x") == pytest.approx(1.5e-3)
    assert parse_size("16 GiB", "x") == 16 * 2**30
    assert parse_size("40 GB", "x") == 40e9
    assert parse_rate("9.3 TFLOP/s", "x") == pytest.approx(9.3e12)
    with pytest.raises(ConfigError, match="links.0.bandwidth"):
        parse_bandwidth("12 parsecs", "links.0.bandwidth")


def _base() -> dict:
    return tomllib.loads(load_hardware("h100-1x").to_toml())


def test_negative_bandwidth_names_the_link(tmp_path) -> None:
    data = _base()
    data["links"][1]["bandwidth"] = -5
    with pytest.raises(ConfigError, match=r"links\[1\].*bandwidth must be positive"):
        cluster_from_dict(data, "bad.toml")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("host_memory_bandwidth", "-50 GB/s", "host_memory_bandwidth must be positive"),
        ("cpu_cores", 0, "cpu_cores must be at least 1"),
    ],
)
def test_impossible_machine_values_are_named(field: str, value: object, message: str) -> None:
    data = _base()
    data["machines"][0][field] = value
    with pytest.raises(ConfigError, match=f"machines.m0.{message}"):
        cluster_from_dict(data, "bad.toml")


def test_missing_field_is_named(tmp_path) -> None:
    data = _base()
    del data["machines"][0]["host_memory"]
    with pytest.raises(ConfigError, match=r"machines\[0\]: missing field 'host_memory'"):
        cluster_from_dict(data, "bad.toml")


def test_unknown_endpoint_and_kind() -> None:
    data = _base()
    data["links"][0]["b"] = "m9.gpu0"
    with pytest.raises(ConfigError, match="unknown endpoint 'm9.gpu0'"):
        cluster_from_dict(data)
    data = _base()
    data["links"][0]["kind"] = "carrier-pigeon"
    with pytest.raises(ConfigError, match="kind 'carrier-pigeon'"):
        cluster_from_dict(data)


def test_toml_files(tmp_path) -> None:
    p = tmp_path / "c.toml"
    p.write_text(load_hardware("hopgnn-4xa100-10gbe").to_toml())
    assert load_cluster_toml(p).num_gpus == 4
    assert load_hardware(str(p)).name == "hopgnn-4xa100-10gbe"
    (tmp_path / "broken.toml").write_text("name = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_cluster_toml(tmp_path / "broken.toml")
    with pytest.raises(UnknownNameError, match="valid: neugraph"):
        load_hardware("no-such-cluster")


def test_gpu_lookup_error_lists_gpus() -> None:
    with pytest.raises(ConfigError, match="no GPU 'm0.gpu7'"):
        load_hardware("h100-1x").gpu("m0.gpu7")
