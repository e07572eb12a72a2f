"""The GPU parsers and checks on outputs captured on real machines and posted in public bug
reports, forums and repositories (tests/fixtures/gpu/, one file per capture, its source URL on the
first line). Each row states what the audit must conclude from that capture.

How a capture reaches the checks is what the audit would do with it on the box:
- `error-*`: nvidia-smi's output as the probe's gpu section. The posts do not give the exit
  status, so a generic non-zero one (255, "other error") stands in: the text must decide.
- `kmsg-*`: the kernel log, filtered by the probe's own grep pattern (KMSG_PATTERN), as the dmesg section.
- `q-*`: `nvidia-smi -q`, whose header is the one the probe's `-q -d PERFORMANCE` prints, as the perf section.
- `table-*`: the default table, parsed into the GPUs and versions the checks read.
- `csv-*`: `--query-gpu` csv, parsed strictly with the fields of the query that produced it.
Where a check needs torch's CUDA version (A4), the row states the one it assumes.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest

from mcp_server import scripts
from mcp_server.run.audit.gpu_checks import a2_identity, a4_triangle, a7_xid, a7b_ecc, a9_tenants
from mcp_server.run.audit.kernel_log import KMSG_PATTERN
from mcp_server.run.audit.model import Check, Facts
from mcp_server.run.audit.nvidia import Gpu, gpu_from_row, parse_csv
from mcp_server.run.audit.probe import ProbeSection
from mcp_server.run.audit.smi_report import parse_query_report, parse_table
from mcp_server.run.audit.versions import from_header
from tests.support.fakegpu import audit_facts, capture, captures

CHECKS = {"A2": a2_identity, "A4": a4_triangle, "A7": a7_xid, "A7b": a7b_ecc, "A9": a9_tenants}
ONE_GPU = {"count": 1}


def error_facts(name: str, expect_gpu: dict[str, object] | None = None) -> Facts:
    return audit_facts(gpu=ProbeSection(255, capture(name).text.strip("\n")), expect_gpu=expect_gpu)


def kmsg_facts(name: str) -> Facts:
    kept = [line for line in capture(name).text.splitlines() if re.search(KMSG_PATTERN, line)]
    return audit_facts(dmesg="\n".join(kept))


def query_facts(name: str, torch_cuda: str | None = None) -> Facts:
    report = parse_query_report(capture(name).text)
    gpus = [Gpu(index=i, name=g.name or "", uuid=g.uuid or "", memory_total_mib=None, memory_used_mib=None,
                utilization_pct=None, temperature_c=None, driver_version=report.versions.driver,
                ecc_uncorrected=None) for i, g in enumerate(report.gpus)]
    return audit_facts(perf=capture(name).text, gpus=gpus, torch_cuda=torch_cuda)


def table_facts(name: str, torch_cuda: str | None = None, expect_gpu: dict[str, object] | None = None) -> Facts:
    table = parse_table(capture(name).text)
    return audit_facts(gpus=table.gpus, versions=table.versions, torch_cuda=torch_cuda, expect_gpu=expect_gpu)


# The query each csv capture was produced by (as posted with it).
CSV_FIELDS = {
    "csv-440-rtx2080-noheader-nounits": (
        "power.limit", "power.min_limit", "power.max_limit", "memory.total", "vbios_version", "driver_version",
        "name", "gpu_uuid", "power.draw", "temperature.gpu", "temperature.memory", "clocks.current.graphics",
        "clocks.sm", "clocks.mem", "utilization.gpu", "utilization.memory", "fan.speed",
        "pcie.link.width.current", "pstate"),
    "csv-na-fan-noheader-nounits": ("memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed",
                                    "utilization.gpu", "utilization.memory"),
    "csv-not-supported-gtx770-noheader": (
        "gpu_name", "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw", "power.limit",
        "fan.speed", "pstate", "clocks.current.graphics", "clocks.current.memory", "power.max_limit",
        "power.default_limit"),
    "csv-header-unknown-error-windows": None,  # --format=csv,nounits: the header names the fields
}


def csv_facts(name: str) -> Facts:
    table = parse_csv(capture(name).text, CSV_FIELDS[name])
    assert table.bad_rows == [] and table.messages == []
    rows = [{("name" if k == "gpu_name" else k): v for k, v in r.items()} for r in table.rows]
    return audit_facts(gpus=[gpu_from_row(r, i) for i, r in enumerate(rows)])


# capture -> the facts it yields -> what the audit must conclude: (check, status, evidence fragments).
Case = tuple[str, Facts, str, str, tuple[str, ...]]


def cases() -> list[Case]:
    out: list[Case] = []
    for name, kind in [
        ("error-device-handle-gpu-is-lost", "gpu_lost"), ("error-device-handle-unknown-2080ti", "gpu_lost"),
        ("error-device-handle-unknown-nospace", "gpu_lost"), ("error-no-devices-rtx5090-bios", "no_devices"),
        ("error-no-devices-singularity-host", "no_devices"), ("error-no-driver-after-upgrade", "no_driver"),
        ("error-no-driver-container-without-runtime", "no_driver"), ("error-no-driver-gcp-debian11", "no_driver"),
        ("error-nvml-mismatch-470", "nvml_mismatch"), ("error-nvml-mismatch-550", "nvml_mismatch"),
        ("error-nvml-mismatch-570", "nvml_mismatch"), ("error-nvml-mismatch-580", "nvml_mismatch"),
    ]:
        meaning = {"gpu_lost": "a GPU is unreachable", "no_devices": "brought up no GPU",
                   "no_driver": "driver is not loaded", "nvml_mismatch": "version mismatch"}[kind]
        lost = kind == "gpu_lost"
        out.append((name, error_facts(name), "A2", "FAIL" if lost else "WARN", (meaning,)))
        out.append((name, error_facts(name, ONE_GPU), "A2", "FAIL", (meaning, "a GPU was expected")))
    for name, status, fragments in [
        ("kmsg-fallen-off-multiline-no-xid", "FAIL", ("GPU 0000:b3:00 fell off the bus",)),
        ("kmsg-fallen-off-notebook-no-xid", "FAIL", ("GPU 0000:01:00 fell off the bus",)),
        ("kmsg-fallen-off-optimus-no-xid", "FAIL", ("GPU 0000:01:00 fell off the bus",)),
        ("kmsg-gpu-lost-check-failed", "FAIL", ("fell off the bus or was lost", "NV_ERR_GPU_IS_LOST")),
        ("kmsg-gpu-lost-dgx-station-a100", "FAIL", ("fell off the bus or was lost",)),
        ("kmsg-rminitadapter-3090-gsp-firmware", "FAIL", ("could not bring up GPU 0000:98:00", "(0x62:0x65:1792)")),
        ("kmsg-rminitadapter-openshift-vm", "FAIL", ("GPU 0000:04:01", "GPU 0000:04:02")),
        ("kmsg-rminitadapter-rtx5090-bios", "FAIL", ("could not bring up GPU 0000:01:00",)),
        ("kmsg-xid119-gsp-timeout-xe9680", "FAIL", ("Xid 119 on 0000:9b:00", "GSP_RPC_TIMEOUT", "; driver:")),
        ("kmsg-xid120-154-rtx-pro-6000", "FAIL", ("GSP_ERROR", "'GPU Reset Required'")),
        ("kmsg-xid13-then-109", "FAIL", ("Xid 109 on 0000:cb:00", "Xid 13 on 0000:cb:00", "; application:")),
        ("kmsg-xid43-31-94-cloud-node", "WARN", ("Xid 43", "Xid 31", "Xid 94", "the GPU stays usable")),
        ("kmsg-xid45-after-nvlink-149", "FAIL", ("caused by Xid 149 (NVLINK_NETIR_ERROR", "caused by Xid 145")),
        ("kmsg-xid48-64-rminitadapter-k8s", "FAIL", ("Xid 48 on 0000:07:00", "Xid 64", "hardware-RMA",
                                                     "could not bring up GPU 0000:0a:00")),
        ("kmsg-xid62-pmu-halt-154-45", "FAIL", ("Xid 62 on 0000:01:00 (PMU_HALT_ERROR", "'GPU Reset Required'")),
        ("kmsg-xid62-then-45-rtx5070ti", "FAIL", ("Xid 62 on 0000:01:00 (PMU_HALT_ERROR", "hardware-reset")),
        ("kmsg-xid79-rtx5080-open", "FAIL", ("Xid 79 on 0000:2b:00", "re-rent")),
        ("kmsg-xid79-workstation", "FAIL", ("Xid 79 on 0000:65:00", "re-rent")),
    ]:
        out.append((name, kmsg_facts(name), "A7", status, fragments))
    out += [
        ("q-396-no-cuda-line", query_facts("q-396-no-cuda-line", "10.0"), "A4", "WARN",
         ("driver 396.54", "could not read both versions")),
        ("q-450-gtx780", query_facts("q-450-gtx780", "11.8"), "A4", "FAIL",
         ("driver 450.66 supports CUDA 11.0", "needs a newer driver")),
        ("q-450-gtx780", query_facts("q-450-gtx780"), "A2", "PASS", ("1 x GeForce GTX 780", "driver 450.66")),
        ("q-535-vgpu-grid-p40", query_facts("q-535-vgpu-grid-p40", "12.1"), "A4", "PASS",
         ("driver 535.161.08 supports CUDA 12.2",)),
        ("q-535-vgpu-grid-p40", query_facts("q-535-vgpu-grid-p40"), "A2", "PASS", ("1 x GRID P40-24Q",)),
    ]
    return out + table_cases() + csv_cases()


def table_cases() -> list[Case]:
    t = table_facts
    h100 = {"name": "H100 80GB", "count": 2}
    return [
        ("table-331-gtx680-no-cuda-column", t("table-331-gtx680-no-cuda-column"), "A2", "PASS",
         ("3 x GeForce GTX 680", "driver 331.62")),
        ("table-331-gtx680-no-cuda-column", t("table-331-gtx680-no-cuda-column", "11.8"), "A4", "WARN",
         ("could not read both versions",)),
        ("table-460-vgpu-host-cuda-na", t("table-460-vgpu-host-cuda-na", "11.8"), "A4", "WARN",
         ("prints CUDA Version 'N/A'", "vGPU host")),
        ("table-460-vgpu-host-cuda-na", t("table-460-vgpu-host-cuda-na"), "A9", "WARN", ("1/1 GPU(s) busy",)),
        ("table-465-rtx3090-truncated-name", t("table-465-rtx3090-truncated-name", "12.1"), "A4", "FAIL",
         ("driver 465.19.01 supports CUDA 11.3", "needs a newer driver")),
        ("table-470-cuda-na-container", t("table-470-cuda-na-container", "11.3"), "A4", "WARN",
         ("prints CUDA Version 'N/A'", "container started without")),
        ("table-470-cuda-na-container", t("table-470-cuda-na-container"), "A2", "PASS", ("1 x Quadro P620",)),
        ("table-470-rtx3070", t("table-470-rtx3070", "11.3"), "A4", "PASS", ("CUDA 11.4",)),
        ("table-510-a100-mig-enabled", t("table-510-a100-mig-enabled"), "A9", "WARN", ("2/2 GPU(s) busy",)),
        ("table-510-a100-mig-enabled", t("table-510-a100-mig-enabled", "11.6"), "A4", "PASS", ("CUDA 11.6",)),
        ("table-515-p100-pcie", t("table-515-p100-pcie"), "A9", "PASS", ("all 1 GPU(s) idle",)),
        ("table-515-p100-pcie", t("table-515-p100-pcie"), "A7b", "PASS", ("0 uncorrected",)),
        ("table-535-a800-mig-enabled", t("table-535-a800-mig-enabled"), "A9", "WARN", ("1/1 GPU(s) busy",)),
        ("table-535-a800-mig-enabled", t("table-535-a800-mig-enabled"), "A2", "PASS",
         ("1 x NVIDIA A800-SXM4-80GB", "driver 535.86.10")),
        ("table-535-a800-training", t("table-535-a800-training"), "A9", "WARN", ("2/2 GPU(s) busy",)),
        ("table-535-rtx2060-host", t("table-535-rtx2060-host", "12.1"), "A4", "PASS", ("CUDA 12.2",)),
        ("table-546-windows-wddm", t("table-546-windows-wddm"), "A2", "PASS", ("1 x NVIDIA GeForce RTX 3050 ...",)),
        ("table-550-h100-busy-memory", t("table-550-h100-busy-memory", expect_gpu=h100), "A2", "PASS",
         ("2 x NVIDIA H100 80GB HBM3", "driver 550.90.07")),
        ("table-550-h100-busy-memory", t("table-550-h100-busy-memory"), "A9", "WARN", ("2/2 GPU(s) busy",)),
        ("table-550-h100-hgx-idle", t("table-550-h100-hgx-idle", expect_gpu={"name": "H100", "min_memory_gib": 80}),
         "A2", "PASS", ("1 x NVIDIA H100 80GB HBM3", "[81559] MiB")),
        ("table-550-h100-hgx-idle", t("table-550-h100-hgx-idle"), "A9", "PASS", ("all 1 GPU(s) idle",)),
        ("table-550-tesla-p4-ecc-off", t("table-550-tesla-p4-ecc-off"), "A7b", "SKIP", ("ECC not reported",)),
        ("table-555-rtx3090", t("table-555-rtx3090", "12.4"), "A4", "PASS", ("CUDA 12.5",)),
        ("table-580-a800-pcie", t("table-580-a800-pcie", "12.8"), "A4", "PASS",
         ("driver 580.119.02 supports CUDA 13.0",)),
        ("table-595-rtx2060-desktop", t("table-595-rtx2060-desktop"), "A9", "WARN", ("1/1 GPU(s) busy",)),
        ("table-595-rtx5090", t("table-595-rtx5090", "12.8"), "A4", "PASS", ("CUDA 13.2",)),
        ("table-610-b200-excerpt", t("table-610-b200-excerpt", "13.0"), "A4", "PASS",
         ("driver 610.43.02 supports CUDA 13.3",)),
        ("table-610-b200-excerpt", t("table-610-b200-excerpt"), "A2", "PASS", ("2 x NVIDIA B200",)),
        ("table-610-rtx3080-laptop", t("table-610-rtx3080-laptop", "13.4"), "A4", "FAIL",
         ("driver 610.43.03 supports CUDA 13.3", "needs a newer driver")),
        ("table-610-rtx5070-desktop", t("table-610-rtx5070-desktop", "12.8"), "A4", "PASS", ("CUDA 13.3",)),
        ("table-err-fan-ada-recovery-reset", t("table-err-fan-ada-recovery-reset"), "A2", "WARN",
         ("GPU 14 reads fan as an error",)),
        ("table-err-power-v100-azure", t("table-err-power-v100-azure"), "A2", "WARN",
         ("GPU 1 reads power as an error",)),
        ("table-rtx-pro-6000-mig-no-header", t("table-rtx-pro-6000-mig-no-header"), "A2", "PASS",
         ("3 x NVIDIA RTX PRO 6000 Blac...",)),
    ]


def csv_cases() -> list[Case]:
    return [
        ("csv-440-rtx2080-noheader-nounits", csv_facts("csv-440-rtx2080-noheader-nounits"), "A2", "PASS",
         ("1 x GeForce RTX 2080", "memory.total [7979] MiB", "driver 440.64")),
        ("csv-440-rtx2080-noheader-nounits", csv_facts("csv-440-rtx2080-noheader-nounits"), "A9", "WARN",
         ("1/1 GPU(s) busy",)),
        ("csv-na-fan-noheader-nounits", csv_facts("csv-na-fan-noheader-nounits"), "A9", "PASS",
         ("all 1 GPU(s) idle",)),
        ("csv-not-supported-gtx770-noheader", csv_facts("csv-not-supported-gtx770-noheader"), "A9", "PASS",
         ("all 1 GPU(s) idle",)),
        ("csv-header-unknown-error-windows", csv_facts("csv-header-unknown-error-windows"), "A2", "WARN",
         ("reads power.default_limit as an error",)),
    ]


CASES = cases()


@pytest.mark.parametrize(("name", "facts", "cid", "status", "fragments"), CASES,
                         ids=[f"{c[0]}:{c[2]}:{c[3]}" for c in CASES])
def test_the_audit_concludes_what_the_capture_shows(name, facts, cid, status, fragments) -> None:
    result: Check = CHECKS[cid](facts)
    assert result.status == status, f"{name}: {result.evidence}"
    for fragment in fragments:
        assert fragment in result.evidence, f"{name}: {fragment!r} not in {result.evidence!r}"


def test_every_capture_names_its_public_source_and_is_judged() -> None:
    names = captures()
    judged = {c[0] for c in CASES} | PARSER_ONLY | JUDGED_BY_A30 | REPLAYED_BY_INSPECT
    assert sorted(judged) == names
    sources = {capture(n).source for n in names}
    assert all(urlparse(s).scheme == "https" and urlparse(s).netloc for s in sources)
    assert len(sources) >= 40


# `nvidia-smi -q` Fabric blocks, judged by the multi-node check A30 (tests/run/audit/test_multibox.py).
JUDGED_BY_A30 = {"q-fabric-in-progress", "q-fabric-unhealthy", "q-fabric-insufficient"}
# Captures whose conclusion is about the parser alone (no GPU inventory or no header in them).
PARSER_ONLY = {"q-610-deprecated-header", "table-510-mig-devices-section"}
# A `--query-gpu ... -l 1` sequence the fake nvidia-smi replays to inspect_run
# (tests/run/jobs/test_inspect_run.py asserts the sampled series and verdicts).
REPLAYED_BY_INSPECT = {"loop-530-gtx1650super-query-l1"}


def test_the_610_header_yields_the_versions_not_the_deprecation_note() -> None:
    v = from_header(parse_query_report(capture("q-610-deprecated-header").text).header)
    assert (v.driver, v.cuda, v.cuda_unreadable) == ("610.47", "13.3", False)


def test_mig_device_rows_are_not_read_as_gpus() -> None:
    assert parse_table(capture("table-510-mig-devices-section").text).gpus == []


def test_the_probe_keeps_the_kernel_lines_the_parser_reads() -> None:
    assert KMSG_PATTERN in scripts.load("audit_probe")


def test_a_lost_gpu_in_the_kernel_log_survives_the_probe_filter() -> None:
    kept = [line for line in capture("kmsg-fallen-off-multiline-no-xid").text.splitlines()
            if re.search(KMSG_PATTERN, line)]
    assert any("fallen off the bus" in line for line in kept) and any("0000:b3:00.0" in line for line in kept)


def test_xid_45_after_another_xid_follows_it_instead_of_reading_as_an_application_fault() -> None:
    a7 = a7_xid(kmsg_facts("kmsg-xid62-then-45-rtx5070ti"))
    assert "Xid 45" not in a7.evidence and a7.status == "FAIL"
