"""nvidia-smi / kernel-log / fuser parsers: the rules each one keeps (strict csv, unknown versions,
the Xid catalogue), on the reconstructed rows of the audit's exact queries and on real captures.
What the audit concludes from each real capture is in test_real_outputs.py."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from mcp_server.run.audit.gpu_checks import a2_identity, a4_triangle, a5_health
from mcp_server.run.audit.kernel_log import parse_kernel_log
from mcp_server.run.audit.nvidia import (
    na,
    parse_apps,
    parse_csv,
    parse_dmon,
    parse_gpus,
    parse_pids,
    parse_ps,
)
from mcp_server.run.audit.probe import ProbeSection
from mcp_server.run.audit.smi_errors import classify
from mcp_server.run.audit.smi_report import parse_query_report
from mcp_server.run.audit.versions import from_header, version_of
from mcp_server.run.audit.xid import XIDS, assess
from tests.support.fakegpu import audit_facts, capture, dmon_table, load_samples, performance_report, scenario

SAMPLES = load_samples()


@pytest.mark.parametrize("key,count,stray", [
    ("h100x8-training", 8, 0), ("h100x8-idle", 8, 0), ("h100x8-degraded", 8, 0),
    ("h100x8-one-gpu-lost", 7, 1), ("rtx4090x1-training", 1, 0), ("rtx4090x1-idle-desktop", 1, 0),
    ("not-installed", 0, 0),
])
def test_gpu_rows_parse_and_non_rows_are_reported(key, count, stray) -> None:
    rows = parse_gpus(SAMPLES[(key, "Q_GPU")][1])
    assert (len(rows.gpus), len(rows.stray), rows.bad_rows) == (count, stray, [])


def test_gpu_fields_keep_types_and_not_available_is_none_never_zero() -> None:
    (g,) = parse_gpus(SAMPLES[("rtx4090x1-training", "Q_GPU")][1]).gpus
    assert (g.name, g.memory_total_mib, g.memory_used_mib, g.utilization_pct) == (
        "NVIDIA GeForce RTX 4090", 24564, 21482, 98)
    assert g.ecc_uncorrected is None and g.driver_version == "550.120"
    h = parse_gpus(SAMPLES[("h100x8-degraded", "Q_GPU")][1]).gpus
    assert h[3].ecc_uncorrected == 2 and h[6].memory_used_mib == 41022


@pytest.mark.parametrize("value", ["[N/A]", "N/A", "[Not Supported]", " [n/a] ", "", "[Unknown Error]", "ERR!"])
def test_unavailable_spellings(value) -> None:
    assert na(value) is None


def test_a_row_with_a_field_too_many_is_an_error_naming_the_row_not_a_repaired_name() -> None:
    rows = parse_gpus("0, Some GPU, Rev 2, GPU-x, 100, 1, 0, 30, 550.1, 0")
    assert rows.gpus == [] and rows.bad_rows == [
        "line 1: 10 fields where 9 were asked for: '0, Some GPU, Rev 2, GPU-x, 100, 1, 0, 30, 550.1, 0'"]


def test_a_real_row_missing_a_field_is_rejected_with_its_line_number() -> None:
    row = capture("csv-na-fan-noheader-nounits").text.strip()
    fields = ("memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed",
              "utilization.gpu", "utilization.memory")
    table = parse_csv("\n" + row.rsplit(",", 1)[0], fields)
    assert table.rows == [] and table.bad_rows[0].startswith("line 2: 6 fields where 7 were asked for")


def test_a_malformed_row_reaches_a2_as_a_warning_with_the_row() -> None:
    rows = "\n".join([SAMPLES[("h100x8-idle", "Q_GPU")][1], "8, NVIDIA H100 80GB HBM3, 81559, 0"])
    a2 = a2_identity(audit_facts(gpu=ProbeSection(0, rows)))
    assert a2.status == "WARN" and "line 9: 4 fields where 9 were asked for" in a2.evidence


def test_a_csv_header_names_the_fields_and_units_are_dropped() -> None:
    table = parse_csv(capture("csv-header-unknown-error-windows").text)
    (row,) = table.rows
    assert row["name"] == "GeForce RTX 2080 Ti" and row["power.default_limit"] == "[Unknown Error]"


def test_compute_apps_including_hidden_pids_and_empty_output() -> None:
    apps = parse_apps(SAMPLES[("h100x8-training", "Q_APPS")][1])
    assert len(apps) == 8 and apps[0].pid == 2113507 and apps[0].used_memory_mib == 77694
    assert parse_apps(SAMPLES[("h100x8-idle", "Q_APPS")][1]) == []
    (hidden,) = parse_apps(SAMPLES[("rtx4090x1-container-no-pid-access", "Q_APPS")][1])
    assert hidden.pid is None and hidden.used_memory_mib is None


def test_performance_report_header_and_active_reasons_only() -> None:
    report = parse_query_report(performance_report(scenario("h100x8-throttled")))
    assert (report.versions.driver, report.versions.cuda) == ("550.54.15", "12.4")
    assert report.gpus[4].active_throttle == ["HW Slowdown", "HW Thermal Slowdown"]
    assert all(not g.active_throttle for i, g in enumerate(report.gpus) if i != 4)


def test_older_throttle_heading_is_understood() -> None:
    text = performance_report(scenario("h100x8-throttled")).replace("Clocks Event Reasons", "Clocks Throttle Reasons")
    assert parse_query_report(text).gpus[4].active_throttle == ["HW Slowdown", "HW Thermal Slowdown"]


@pytest.mark.parametrize("header,driver,cuda,printed", [
    ({"Driver Version": "550.54.15", "CUDA Version": "12.4"}, "550.54.15", "12.4", "12.4"),
    ({"Driver Version": "610.47 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]",
      "CUDA Version": "13.3 [Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version instead]"},
     "610.47", "13.3", "13.3"),
    ({"KMD Version": "610.47", "CUDA UMD Version": "13.3"}, "610.47", "13.3", "13.3"),
    ({"Driver Version": "450.36.06", "CUDA Version": "N/A"}, "450.36.06", None, "N/A"),
    ({"Driver Version": "535.104.05", "CUDA Version": "Not Found"}, "535.104.05", None, "Not Found"),
    ({"Driver Version": "535.104.05", "CUDA Version": "ERR!"}, "535.104.05", None, "ERR!"),
    ({"Driver Version": "396.54"}, "396.54", None, None),
])
def test_versions_come_from_whichever_keys_the_driver_prints(header, driver, cuda, printed) -> None:
    v = from_header(header)
    assert (v.driver, v.cuda, v.cuda_printed) == (driver, cuda, printed)


@pytest.mark.parametrize("printed", ["Not Found", "N/A", "ERR!"])
def test_a4_warns_on_an_unknown_cuda_version_and_never_passes_it(printed) -> None:
    assert version_of(printed) is None
    perf = f"==============NVSMI LOG==============\nDriver Version : 535.104.05\nCUDA Version : {printed}\n"
    facts = audit_facts(gpu=ProbeSection(0, SAMPLES[("rtx4090x1-training", "Q_GPU")][1]), perf=perf,
                        torch_cuda="12.1")
    a4 = a4_triangle(facts)
    assert a4.status == "WARN" and f"prints CUDA Version {printed!r}, which is not a version" in a4.evidence


def test_the_exit_status_explains_a_failure_that_printed_nothing() -> None:
    failure = classify([], 9)
    assert failure is not None and failure.kind == "no_driver" and classify([], 0) is None


def test_a2_does_not_fail_a_box_where_no_gpu_was_expected() -> None:
    facts = audit_facts(gpu=ProbeSection(6, capture("error-no-devices-singularity-host").text.strip()))
    assert a2_identity(facts).status == "WARN"


def test_dmon_rows_are_counted_without_headers() -> None:
    assert parse_dmon(dmon_table(scenario("h100x8-healthy"))) == 40
    assert parse_dmon("# gpu pwr\n# Idx W\n") == 0


def test_xid_lines_keep_code_device_cause_and_recovery() -> None:
    events = parse_kernel_log(capture("kmsg-xid62-pmu-halt-154-45").text)
    assert [(e.kind, e.xid, e.device, e.recovery) for e in events] == [
        ("xid", 62, "0000:01:00", None), ("xid", 154, "0000:01:00", "GPU Reset Required"),
        ("xid", 45, "0000:01:00", None)]
    (first, *_) = parse_kernel_log(capture("kmsg-xid45-after-nvlink-149").text)
    assert (first.xid, first.cause) == (45, 149)


def test_a_lost_gpu_is_an_event_even_without_an_xid() -> None:
    (event,) = parse_kernel_log(capture("kmsg-fallen-off-multiline-no-xid").text)
    assert (event.kind, event.device) == ("bus_loss", "0000:b3:00")


@pytest.mark.parametrize("code,klass,needs_reset", [
    (13, "application", False), (31, "application", False), (43, "application", False),
    (119, "driver", True), (120, "driver", True), (62, "hardware-reset", True), (79, "hardware-reset", True),
    (48, "hardware-reset", True), (95, "hardware-reset", True), (64, "hardware-RMA", True),
    (92, "hardware-RMA", False), (94, "application", False), (63, "informational", False),
])
def test_the_catalogue_classifies_what_the_issue_names(code, klass, needs_reset) -> None:
    assert (XIDS[code].klass, XIDS[code].needs_reset) == (klass, needs_reset)


def test_every_catalogue_entry_names_its_nvidia_source() -> None:
    assert all(urlparse(e.source).netloc == "docs.nvidia.com" for e in XIDS.values())


def test_an_xid_45_alone_is_the_application_tearing_down() -> None:
    lines = [x for x in capture("kmsg-xid62-then-45-rtx5070ti").text.splitlines() if "): 45," in x]
    events = parse_kernel_log("\n".join(lines))
    (finding,) = assess(events)
    assert not finding.fail and "application" in finding.text


def test_fuser_and_ps_output() -> None:
    assert parse_pids(" 1234 5678m  91c") == [91, 1234, 5678]
    assert parse_ps("  1234  4000 Sl python\n 5678 10 S sleep\n") == {1234: (4000, "Sl python"), 5678: (10, "S sleep")}


def test_the_other_gpu_checks_skip_with_the_failure_named_once_in_a2() -> None:
    facts = audit_facts(gpu=ProbeSection(9, capture("error-no-driver-gcp-debian11").text.strip()))
    a5 = a5_health(facts)
    assert a5.status == "SKIP" and a5.evidence == "the NVIDIA driver is not loaded (see A2)"
