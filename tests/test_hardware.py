"""Hardware specs: presets, TOML round trip, units and validation."""

from __future__ import annotations

import tomllib

import pytest

from workbench.errors import ConfigError, UnknownNameError
from workbench.hardware import (
    PRESETS,
    ClusterSpec,
    GPUSpec,
    MachineSpec,
    cluster_from_dict,
    load_cluster_toml,
    load_hardware,
)
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


# ---- copy engines and GPUDirect RDMA ---------------------------------------------
def _two_gpus() -> dict:
    return tomllib.loads(load_hardware("v100x8-nvswitch").to_toml())


@pytest.mark.parametrize(
    ("value", "shown"), [(-1, "-1"), (2.5, "2.5"), ("2", "'2'"), (True, "True"), (65, "65")]
)
def test_impossible_copy_engines_get_one_line(value: object, shown: str) -> None:
    data = _two_gpus()
    data["machines"][0]["gpus"][1]["copy_engines"] = value
    with pytest.raises(ConfigError) as err:
        cluster_from_dict(data, "hardware.toml")
    assert str(err.value) == (
        f"hardware.toml: machines[0].gpus[1].copy_engines must be an integer from 0 to 64, got {shown}"
    )


@pytest.mark.parametrize("value", [0, 1, 3, 64])
def test_possible_copy_engines_are_kept(value: int) -> None:
    data = _two_gpus()
    data["machines"][0]["gpus"][1]["copy_engines"] = value
    spec = cluster_from_dict(data, "hardware.toml")
    assert spec.gpu("m0.gpu1").copy_engines == value and spec.gpu("m0.gpu0").copy_engines == 2


def test_copy_engines_are_checked_on_a_cluster_built_in_code() -> None:
    gpu = GPUSpec("NegativeEngines", 2**30, 1e12, 1e11, copy_engines=-1)
    with pytest.raises(ConfigError, match=r"m0\.gpu0\.copy_engines must be an integer from 0 to 64, got -1$"):
        ClusterSpec("c", (MachineSpec("m0", (gpu,), 2**30),), ())


@pytest.mark.parametrize(("value", "shown"), [("yes", "'yes'"), (1, "1"), (0, "0"), ("true", "'true'")])
def test_gpudirect_rdma_must_be_a_boolean(value: object, shown: str) -> None:
    data = _base()
    data["machines"][0]["gpudirect_rdma"] = value
    with pytest.raises(ConfigError) as err:
        cluster_from_dict(data, "hardware.toml")
    assert str(err.value) == f"hardware.toml: machines[0].gpudirect_rdma must be true or false, got {shown}"


def test_gpudirect_rdma_is_checked_on_a_cluster_built_in_code() -> None:
    m = MachineSpec("m0", (), 2**30, gpudirect_rdma="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="machines.m0.gpudirect_rdma must be true or false, got 'yes'"):
        ClusterSpec("c", (m,), ())


@pytest.mark.parametrize(
    ("table", "key"),
    [("machine", "gpudirect"), ("gpu", "copy_engine"), ("link", "bandwith"), ("switch", "type")],
)
def test_misspelt_keys_are_errors(table: str, key: str) -> None:
    data = _two_gpus()
    target = {
        "machine": data["machines"][0],
        "gpu": data["machines"][0]["gpus"][0],
        "link": data["links"][0],
        "switch": data["switches"][0],
    }[table]
    target[key] = 1
    with pytest.raises(ConfigError, match=f"unknown field\\(s\\) {key}; allowed: "):
        cluster_from_dict(data, "hardware.toml")


GOOD = """
name = "two-boxes"
description = "one machine with GPUDirect RDMA and 3 copy engines, one without"

[[machines]]
name = "a"
host_memory = "64 GiB"
cpu_cores = 8
gpudirect_rdma = true
gpus = [{ model = "X", memory = "16 GiB", flops = "10 TFLOP/s", memory_bandwidth = "500 GB/s", copy_engines = 3 }]

[[machines]]
name = "b"
host_memory = "64 GiB"
gpus = [{ model = "X", memory = "16 GiB", flops = "10 TFLOP/s", memory_bandwidth = "500 GB/s", copy_engines = 1 }]

[[switches]]
name = "net"
kind = "network"

[[links]]
a = "a.gpu0"
b = "net"
bandwidth = "12.5 GB/s"
latency = "1 us"
kind = "network"

[[links]]
a = "b.host"
b = "net"
bandwidth = "12.5 GB/s"
latency = "1 us"
kind = "network"
"""


def test_good_file_round_trips_with_engines_and_gpudirect(tmp_path) -> None:
    (tmp_path / "good.toml").write_text(GOOD)
    spec = load_cluster_toml(tmp_path / "good.toml")
    assert [m.gpudirect_rdma for m in spec.machines] == [True, False]  # b leaves it out: false
    assert [spec.gpu(g).copy_engines for g in spec.gpu_nodes()] == [3, 1]
    text = spec.to_toml()
    assert "gpudirect_rdma = true" in text and "gpudirect_rdma = false" in text
    again = cluster_from_dict(tomllib.loads(text), "again.toml")
    assert again == spec and again.to_toml() == text
    shown = spec.describe()
    assert "a: 1 x X (16 GiB, 10 TFLOP/s, 3 copy engines); host 64 GiB, 8 cores; GPUDirect RDMA" in shown
    assert "b: 1 x X (16 GiB, 10 TFLOP/s, 1 copy engine); host 64 GiB, 16 cores; no GPUDirect RDMA" in shown


def test_presets_have_gpudirect_where_the_real_systems_do() -> None:
    expected = {
        "roc-4x4p100-nvlink-ib": True,  # Mellanox EDR InfiniBand
        "perlmutter-4xa100-slingshot": True,  # HPE Slingshot-11
        "dgx-a100-16x8-fattree": True,  # InfiniBand HDR, as in DGX A100 SuperPOD
        "dgx-h100-32x8-rail": True,  # InfiniBand NDR, as in DGX H100 SuperPOD
        "hopgnn-4xa100-10gbe": False,  # commodity 10 Gb/s Ethernet
        "neugraph-8xp100-pcie": False,  # single machines: no NIC
        "v100x8-nvlink-bridge": False,
        "v100x8-nvswitch": False,
        "h100-1x": False,
        "h200-1x": False,
    }
    assert set(expected) == set(PRESETS)
    for name, flag in expected.items():
        assert {m.gpudirect_rdma for m in load_hardware(name).machines} == {flag}, name


def test_presets_of_identical_machines_scale_to_a_machine_count() -> None:
    from workbench.errors import ConfigError
    from workbench.hardware import load_hardware

    six = load_hardware("hopgnn-4xa100-10gbe", machines=6)
    assert six.num_gpus == 6 and len(six.machines) == 6
    assert load_hardware("roc-4x4p100-nvlink-ib", machines=2).num_gpus == 8
    with pytest.raises(ConfigError, match="'h100-1x' has a fixed number of machines; machines applies to: "):
        load_hardware("h100-1x", machines=2)
    with pytest.raises(ConfigError, match="machines must be a positive integer, got 0"):
        load_hardware("hopgnn-4xa100-10gbe", machines=0)


# ---- issue 23: every bad hardware value gets one line naming the file and the field ----
def _write(tmp_path, text: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


H100_TOML = load_hardware("h100-1x").to_toml()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'memory = "80 GiB"',
            "memory = nan",
            r"machines\[0\]\.gpus\[0\]\.memory: a size must be a finite number, got nan",
        ),
        (
            'memory = "80 GiB"',
            'memory = "1e400 GiB"',
            r"gpus\[0\]\.memory: a size must be a finite number, got '1e400 GiB'",
        ),
        (
            'memory = "80 GiB"',
            "memory = 9223372036854775807.0",
            r"gpus\[0\]\.memory: size .* beyond what an int64 holds",
        ),
        (
            'memory = "80 GiB"',
            'memory = "9300 PB"',
            r"gpus\[0\]\.memory: size '9300 PB' is beyond what an int64 holds",
        ),
        (
            'memory = "80 GiB"',
            "memory = 1.5",
            r"gpus\[0\]\.memory: a size must be a whole number of bytes, got 1.5",
        ),
        ("cpu_cores = 16", 'cpu_cores = "four"', r"machines\[0\]\.cpu_cores must be an integer, got 'four'"),
        ("cpu_cores = 16", "cpu_cores = 2.5", r"machines\[0\]\.cpu_cores must be an integer, got 2.5"),
        ("cpu_cores = 16", "cpu_cores = true", r"machines\[0\]\.cpu_cores must be an integer, got True"),
        (
            "copy_engines = 2",
            "copy_engines = 1.5",
            r"gpus\[0\]\.copy_engines must be an integer from 0 to 64, got 1.5",
        ),
        (
            'latency = "0 us"',
            "latency = nan",
            r"links\[0\]\.latency: a latency must be a finite number, got nan",
        ),
        (
            'latency = "0 us"',
            "latency = -inf",
            r"links\[0\]\.latency: a latency must be a finite number, got -inf",
        ),
        (
            'flops = "67 TFLOP/s"',
            "flops = nan",
            r"gpus\[0\]\.flops: a compute rate must be a finite number, got nan",
        ),
        (
            'flops = "67 TFLOP/s"',
            'flops = "1e300 PFLOP/s"',
            r"gpus\[0\]\.flops: a compute rate must be a finite",
        ),
        (
            'memory_bandwidth = "3350 GB/s"',
            "memory_bandwidth = nan",
            r"memory_bandwidth: a bandwidth must be a finite",
        ),
        (
            'memory_bandwidth = "3350 GB/s"',
            "memory_bandwidth = inf",
            r"memory_bandwidth: a bandwidth must be a finite",
        ),
        (
            'bandwidth = "48 GB/s"',
            "bandwidth = true",
            r"links\[1\]\.bandwidth: a bandwidth must be a number or a string with a unit, got True",
        ),
        (
            'bandwidth = "48 GB/s"',
            "bandwidth = [48]",
            r"links\[1\]\.bandwidth: a bandwidth must be a number or a string",
        ),
        (
            'host_memory = "128 GiB"',
            "host_memory = {x = 1}",
            r"machines\[0\]\.host_memory: a size must be a number or a string",
        ),
        ('name = "m0"', "name = 0", r"machines\[0\]\.name must be a string, got 0"),
        ('model = "H100"', "model = 100", r"gpus\[0\]\.model must be a string, got 100"),
        ('kind = "pcie"', "kind = 3", r"links\[1\]\.kind must be a string, got 3"),
        ('bandwidth = "48 GB/s"', 'bandwidth = "0 GB/s"', r"links\[1\].*bandwidth must be positive"),
        ('name = "h100-1x"', "name = []", r"bad.toml: name must be a string, got \[\]"),
    ],
)
def test_bad_hardware_values_get_one_line_naming_file_and_field(
    tmp_path, old: str, new: str, message: str
) -> None:
    assert old in H100_TOML
    path = _write(tmp_path, H100_TOML.replace(old, new, 1))
    with pytest.raises(ConfigError, match=message) as err:
        load_cluster_toml(path)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(machines=5), r"bad.toml: machines must be a list, got 5"),
        (lambda d: d.update(links={"a": 1}), r"bad.toml: links must be a list"),
        (lambda d: d.update(switches="m0.rc"), r"bad.toml: switches must be a list"),
        (lambda d: d["machines"].__setitem__(0, "m0"), r"bad.toml: machines\[0\] must be a table, got 'm0'"),
        (lambda d: d["machines"][0].update(gpus=[1]), r"machines\[0\]\.gpus\[0\] must be a table, got 1"),
        (lambda d: d["machines"][0].update(gpus={"model": "x"}), r"machines\[0\]\.gpus must be a list"),
        (lambda d: d["links"].__setitem__(0, [1, 2]), r"links\[0\] must be a table"),
        (lambda d: d["switches"].__setitem__(0, None), r"switches\[0\] must be a table"),
        (lambda d: d["switches"][0].update(kind=5), r"switches\[0\]\.kind must be a string, got 5"),
        (lambda d: d.update(description=1), r"bad.toml: description must be a string, got 1"),
    ],
)
def test_wrongly_shaped_hardware_tables_get_one_line(mutate, message: str) -> None:
    data = _base()
    mutate(data)
    with pytest.raises(ConfigError, match=message):
        cluster_from_dict(data, "bad.toml")


def test_a_hardware_file_that_is_not_a_table_at_all() -> None:
    with pytest.raises(ConfigError, match=r"bad.toml must be a table, got \[\]"):
        cluster_from_dict([], "bad.toml")  # type: ignore[arg-type]


def test_cross_field_errors_name_the_file() -> None:
    data = _base()
    data["links"][0]["b"] = "m9.gpu0"
    with pytest.raises(
        ConfigError, match=r"^bad.toml: cluster 'h100-1x': links\[0\].*unknown endpoint 'm9.gpu0'"
    ):
        cluster_from_dict(data, "bad.toml")


@pytest.mark.parametrize(
    ("parse", "value"),
    [
        (parse_bandwidth, float("nan")),
        (parse_bandwidth, True),
        (parse_bandwidth, "1e400 GB/s"),
        (parse_latency, float("inf")),
        (parse_latency, False),
        (parse_latency, None),
        (parse_size, float("nan")),
        (parse_size, 2**63),
        (parse_size, -(2**63) - 1),
        (parse_size, 10**400),
        (parse_size, "1e400 GiB"),
        (parse_size, True),
        (parse_rate, float("-inf")),
        (parse_rate, True),
        (parse_rate, "1e400 FLOP/s"),
    ],
)
def test_units_refuse_non_finite_bool_and_too_large_quantities(parse, value) -> None:
    with pytest.raises(ConfigError, match=r"^f\.x: "):
        parse(value, "f.x")


def test_units_keep_whole_sizes_exact_and_round_sizes_with_units() -> None:
    assert parse_size(2**63 - 1, "x") == 2**63 - 1
    assert parse_size(1e9, "x") == 1_000_000_000 and type(parse_size(1e9, "x")) is int
    assert parse_size("1.3 GiB", "x") == round(1.3 * 2**30)
    assert parse_bandwidth(10**30, "x") == 1e30


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: GPUSpec("g", 2**30, float("nan"), 1e9), r"gpu0\.flops must be a finite number, got nan"),
        (lambda: GPUSpec("g", 2**30, 1e12, float("nan")), r"gpu0\.memory_bandwidth must be a finite number"),
        (lambda: GPUSpec("g", 1.5, 1e12, 1e9), r"gpu0\.memory_bytes must be an integer, got 1.5"),
        (lambda: GPUSpec("g", 2**64, 1e12, 1e9), r"gpu0\.memory_bytes must be at most"),
    ],
)
def test_clusters_built_in_code_are_checked_the_same(build, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ClusterSpec("c", (MachineSpec("m0", (build(),), 2**30),), ())


def test_a_machine_built_in_code_with_fractional_cores_or_nan_latency_is_refused() -> None:
    from workbench.hardware import LinkSpec

    with pytest.raises(ConfigError, match=r"machines\.m0\.cpu_cores must be an integer, got 2.5"):
        ClusterSpec("c", (MachineSpec("m0", (), 2**30, cpu_cores=2.5),), ())  # type: ignore[arg-type]
    gpu = GPUSpec("g", 2**30, 1e12, 1e9)
    with pytest.raises(ConfigError, match=r"links\[0\].*latency must be a finite number, got nan"):
        ClusterSpec(
            "c", (MachineSpec("m0", (gpu,), 2**30),), (LinkSpec("m0.host", "m0.gpu0", 1e9, float("nan")),)
        )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'memory = "80 GiB"',
            "memory = nan",
            "machines[0].gpus[0].memory: a size must be a finite number, got nan",
        ),
        ("cpu_cores = 16", "cpu_cores = 2.5", "machines[0].cpu_cores must be an integer, got 2.5"),
        ('latency = "0 us"', "latency = nan", "links[0].latency: a latency must be a finite number"),
        (
            'flops = "67 TFLOP/s"',
            "flops = nan",
            "machines[0].gpus[0].flops: a compute rate must be a finite number",
        ),
        ('bandwidth = "48 GB/s"', "bandwidth = true", "links[1].bandwidth: a bandwidth must be a number"),
    ],
)
def test_hardware_show_and_sim_print_one_line_and_exit_2(
    tmp_path, capsys, old: str, new: str, message: str
) -> None:
    from pathlib import Path

    from workbench.cli.main import main

    path = _write(tmp_path, H100_TOML.replace(old, new, 1))
    plan = Path(__file__).resolve().parents[1] / "examples" / "plans" / "one_transfer.json"
    for argv in (["hardware", "show", str(path)], ["sim", str(plan), "--hardware", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Traceback" not in err
        assert f"{path}: {message}" in err
