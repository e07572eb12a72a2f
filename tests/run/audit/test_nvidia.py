"""nvidia-smi / dmesg / fuser parsers against the real output formats in the sample file."""

from __future__ import annotations

import pytest

from mcp_server.run.audit.nvidia import (
    na,
    parse_apps,
    parse_dmon,
    parse_gpus,
    parse_performance,
    parse_pids,
    parse_ps,
    parse_xids,
    split_csv,
)
from tests.support.fakegpu import dmon_table, load_samples, performance_report, scenario

SAMPLES = load_samples()


@pytest.mark.parametrize("key,count,stray", [
    ("h100x8-training", 8, 0), ("h100x8-idle", 8, 0), ("h100x8-degraded", 8, 0),
    ("h100x8-one-gpu-lost", 7, 1), ("rtx4090x1-training", 1, 0), ("rtx4090x1-idle-desktop", 1, 0),
    ("driver-not-loaded", 0, 1), ("driver-library-mismatch", 0, 2), ("no-devices", 0, 1), ("not-installed", 0, 0),
])
def test_gpu_rows_parse_and_non_rows_are_reported(key, count, stray) -> None:
    gpus, other = parse_gpus(SAMPLES[(key, "Q_GPU")][1])
    assert (len(gpus), len(other)) == (count, stray)


def test_gpu_fields_keep_types_and_not_available_is_none_never_zero() -> None:
    (g,) = parse_gpus(SAMPLES[("rtx4090x1-training", "Q_GPU")][1])[0]
    assert (g.name, g.memory_total_mib, g.memory_used_mib, g.utilization_pct) == (
        "NVIDIA GeForce RTX 4090", 24564, 21482, 98)
    assert g.ecc_uncorrected is None and g.driver_version == "550.120"
    h = parse_gpus(SAMPLES[("h100x8-degraded", "Q_GPU")][1])[0]
    assert h[3].ecc_uncorrected == 2 and h[6].memory_used_mib == 41022


@pytest.mark.parametrize("value", ["[N/A]", "N/A", "[Not Supported]", " [n/a] ", ""])
def test_unavailable_spellings(value) -> None:
    assert na(value) is None


def test_a_name_with_a_comma_is_kept_whole() -> None:
    parts = split_csv("0, Some GPU, Rev 2, GPU-x, 100, 1, 0, 30, 550.1, 0", 9)
    assert parts is not None and parts[1] == "Some GPU, Rev 2" and parts[2] == "GPU-x"


def test_compute_apps_including_hidden_pids_and_empty_output() -> None:
    apps = parse_apps(SAMPLES[("h100x8-training", "Q_APPS")][1])
    assert len(apps) == 8 and apps[0].pid == 2113507 and apps[0].used_memory_mib == 77694
    assert parse_apps(SAMPLES[("h100x8-idle", "Q_APPS")][1]) == []
    (hidden,) = parse_apps(SAMPLES[("rtx4090x1-container-no-pid-access", "Q_APPS")][1])
    assert hidden.pid is None and hidden.used_memory_mib is None


def test_performance_report_header_and_active_reasons_only() -> None:
    header, active = parse_performance(performance_report(scenario("h100x8-throttled")))
    assert header["Driver Version"] == "550.54.15" and header["CUDA Version"] == "12.4"
    assert active[4] == ["HW Slowdown", "HW Thermal Slowdown"]
    assert all(not v for k, v in active.items() if k != 4)


def test_older_throttle_heading_is_understood() -> None:
    text = performance_report(scenario("h100x8-throttled")).replace("Clocks Event Reasons", "Clocks Throttle Reasons")
    assert parse_performance(text)[1][4] == ["HW Slowdown", "HW Thermal Slowdown"]


def test_dmon_rows_are_counted_without_headers() -> None:
    assert parse_dmon(dmon_table(scenario("h100x8-healthy"))) == 40
    assert parse_dmon("# gpu pwr\n# Idx W\n") == 0


def test_xid_lines() -> None:
    lines = ("[ 10.1] NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"
             "[ 11.2] NVRM: Xid (PCI:0000:3b:00): 13, pid=2, Graphics Exception\nother line")
    assert [(c, d) for c, d, _ in parse_xids(lines)] == [(79, "PCI:0000:5d:00"), (13, "PCI:0000:3b:00")]


def test_fuser_and_ps_output() -> None:
    assert parse_pids(" 1234 5678m  91c") == [91, 1234, 5678]
    assert parse_ps("  1234  4000 Sl python\n 5678 10 S sleep\n") == {1234: (4000, "Sl python"), 5678: (10, "S sleep")}
