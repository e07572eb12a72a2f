"""Fake GPU tools for the test box. There is no GPU here, so `nvidia-smi` (and `dmesg`
for Xid scenarios) are replaced by scripts printing real output. Where a capture from a real
machine exists it is used verbatim (tests/fixtures/gpu/, one file per capture, its source on the
first line); the csv rows of the audit's exact query have no public capture, so they come from
tests/fixtures/nvidia-smi-samples.txt (reconstructed from NVIDIA's documentation and public
captures); the PERFORMANCE report, clock query and dmon table follow the documented layouts and
are generated per scenario. Labelled fakes, not mocks."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import profile
from mcp_server.run.audit.model import ExpectGpu, Facts
from mcp_server.run.audit.nvidia import Gpu
from mcp_server.run.audit.probe import ProbeSection
from mcp_server.run.audit.versions import DriverVersions

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia-smi-samples.txt"
CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


@dataclass(frozen=True)
class Capture:
    """One output captured on a real machine and posted publicly: where it was posted, and the text."""

    name: str
    source: str
    text: str


def capture(name: str) -> Capture:
    """tests/fixtures/gpu/<name>.txt without its first line, which names the source."""
    first, _, text = (CAPTURES / f"{name}.txt").read_text().partition("\n")
    if not first.startswith("# source: http"):
        raise ValueError(f"{name}: the first line must be '# source: <url>', got {first[:80]!r}")
    return Capture(name, first.removeprefix("# source: ").strip(), text)


def captures() -> list[str]:
    return sorted(p.stem for p in CAPTURES.glob("*.txt"))
_BLOCK = re.compile(r"^=== (?P<scenario>[^/(]+?)(?: \([^)]*\))? / (?P<query>Q_GPU|Q_APPS) \(rc=(?P<rc>\d+)[^)]*\) ===$")


def load_samples() -> dict[tuple[str, str], tuple[int, str]]:
    """(scenario, Q_GPU|Q_APPS) -> (rc, exact stdout)."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    key, rc, buf = None, 0, []
    for line in SAMPLES.read_text().splitlines():
        m = _BLOCK.match(line)
        if m or line.startswith("=== "):
            if key:
                out[key] = (rc, "\n".join(buf).strip("\n"))
            key = (m["scenario"].strip(), m["query"]) if m else None
            rc, buf = (int(m["rc"]) if m else 0), []
            continue
        if key and not line.startswith("#"):
            buf.append("" if line == "<empty>" else line)
    if key:
        out[key] = (rc, "\n".join(buf).strip("\n"))
    return out


@dataclass
class Scenario:
    name: str
    gpu_rows: str
    gpu_rc: int = 0
    apps: str = ""
    throttled: dict[int, list[str]] = field(default_factory=dict)  # gpu index -> active reasons
    temps: dict[int, int] = field(default_factory=dict)
    clocks: dict[int, int] = field(default_factory=dict)  # current SM MHz overrides
    driver: str = "550.54.15"
    cuda: str = "12.4"
    dmesg: str | None = None  # replaces dmesg output when set


def _indices(rows: str) -> list[tuple[int, int]]:
    out = []
    for line in rows.splitlines():
        parts = line.split(", ")
        if len(parts) == 9 and parts[0].isdigit():
            out.append((int(parts[0]), int(parts[6])))
    return out


_REASONS = ["Idle", "Applications Clocks Setting", "SW Power Cap", "HW Slowdown", "HW Thermal Slowdown",
            "HW Power Brake Slowdown", "Sync Boost", "SW Thermal Slowdown", "Display Clock Setting"]


def performance_report(s: Scenario) -> str:
    lines = ["", "==============NVSMI LOG==============", "",
             f"{'Timestamp':42}: Wed Dec  2 13:00:00 2026", f"{'Driver Version':42}: {s.driver}",
             f"{'CUDA Version':42}: {s.cuda}", "", f"{'Attached GPUs':42}: {len(_indices(s.gpu_rows))}"]
    for idx, _ in _indices(s.gpu_rows):
        lines += [f"GPU 00000000:{0x18 + idx * 0x10:02X}:00.0", f"    {'Performance State':38}: P0",
                  "    Clocks Event Reasons"]
        for r in _REASONS:
            indent = "            " if r in ("HW Thermal Slowdown", "HW Power Brake Slowdown") else "        "
            state = "Active" if r in s.throttled.get(idx, []) else "Not Active"
            lines.append(f"{indent}{r:{42 - len(indent)}}: {state}")
        lines.append(f"    {'Sparse Operation Mode':38}: N/A")
    return "\n".join(lines) + "\n"


def clocks_rows(s: Scenario) -> str:
    rows = []
    for idx, temp in _indices(s.gpu_rows):
        rows.append(f"{idx}, {s.temps.get(idx, temp)}, {s.clocks.get(idx, 1980)}, 1980")
    return "\n".join(rows)


def dmon_table(s: Scenario) -> str:
    head = ("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk  pviol  tviol    fb   bar1\n"
            "# Idx      W      C      C      %      %      %      %    MHz    MHz      %   bool    MB     MB")
    body = [f"    {i}     70     {t}     35      0      0      0      0   2619   1980      0      0     0      2"
            for i, t in _indices(s.gpu_rows)]
    return head + "\n" + "\n".join(body * 5)


def install(fakebin: Path, s: Scenario) -> None:
    d = fakebin / "scenario"
    d.mkdir(exist_ok=True)
    (d / "q_gpu").write_text(s.gpu_rows + ("\n" if s.gpu_rows else ""))
    (d / "q_apps").write_text(s.apps + ("\n" if s.apps else ""))
    (d / "clocks").write_text(clocks_rows(s) + "\n")
    (d / "perf").write_text(performance_report(s))
    (d / "dmon").write_text(dmon_table(s) + "\n")
    script = f"""#!/bin/sh
# fake nvidia-smi ({s.name}): documented output formats, see tests/support/fakegpu.py
D={d}
case "$*" in
  *--query-gpu=index,name,uuid*) cat "$D/q_gpu"; exit {s.gpu_rc};;
  *--query-compute-apps*) cat "$D/q_apps"; exit 0;;
  *--query-gpu=index,temperature.gpu,clocks*) cat "$D/clocks"; exit 0;;
  *"-q -d PERFORMANCE"*) cat "$D/perf"; exit 0;;
  *dmon*) cat "$D/dmon"; exit 0;;
  *) echo "fake nvidia-smi: unsupported arguments: $*" >&2; exit 2;;
esac
"""
    _write_exec(fakebin / "nvidia-smi", script)
    if s.dmesg is not None:
        (d / "dmesg").write_text(s.dmesg + "\n")
        _write_exec(fakebin / "dmesg", f"#!/bin/sh\ncat {d}/dmesg\n")


def uninstall(fakebin: Path) -> None:
    for name in ("nvidia-smi", "dmesg"):
        (fakebin / name).unlink(missing_ok=True)


def _write_exec(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def scenario(name: str) -> Scenario:
    """Named scenarios the tests use, built from the sample file's real rows."""
    samples = load_samples()

    def rows(key: str) -> tuple[int, str]:
        return samples[(key, "Q_GPU")]

    if name == "h100x8-healthy":
        rc, text = rows("h100x8-idle")
        return Scenario(name, text, rc, samples[("h100x8-idle", "Q_APPS")][1])
    if name == "h100x8-training":
        rc, text = rows("h100x8-training")
        return Scenario(name, text, rc, samples[("h100x8-training", "Q_APPS")][1])
    if name == "h100x8-throttled":
        rc, text = rows("h100x8-idle")
        lines = text.splitlines()
        parts = lines[4].split(", ")
        parts[6] = "88"  # GPU 4 runs hot
        lines[4] = ", ".join(parts)
        return Scenario(name, "\n".join(lines), rc, "", throttled={4: ["HW Slowdown", "HW Thermal Slowdown"]},
                        temps={4: 88}, clocks={4: 1095})
    if name == "h100x8-xid79":
        rc, text = rows("h100x8-idle")
        return Scenario(name, text, rc, "", dmesg=capture("kmsg-xid79-workstation").text.rstrip("\n"))
    if name == "h100x8-zombie":
        rc, text = rows("h100x8-idle")
        lines = text.splitlines()
        parts = lines[2].split(", ")
        parts[4] = "31744"  # 31 GiB held on GPU 2, and no compute process listed for it
        lines[2] = ", ".join(parts)
        return Scenario(name, "\n".join(lines), rc, "")
    if name == "h100x8-degraded":
        rc, text = rows("h100x8-degraded")
        return Scenario(name, text, rc, samples[("h100x8-degraded", "Q_APPS")][1])
    if name == "driver-not-loaded":  # exit status 9: nvidia-smi(1), RETURN VALUE
        return Scenario(name, capture("error-no-driver-gcp-debian11").text.rstrip("\n"), 9, "")
    if name == "rtx4090-container":
        rc, text = rows("rtx4090x1-training")
        return Scenario(name, text, rc, samples[("rtx4090x1-container-no-pid-access", "Q_APPS")][1], driver="550.120")
    raise KeyError(name)


def audit_facts(*, gpu: ProbeSection | None = None, gpus: list[Gpu] | None = None,
                versions: DriverVersions | None = None, perf: str | None = None, dmesg: str | None = None,
                expect_gpu: dict[str, object] | None = None, torch_cuda: str | None = None) -> Facts:
    """The facts one audit round trip would hold, built from captured outputs rather than a box:
    `gpu`/`perf`/`dmesg` are probe sections parsed as the audit parses them; `gpus`/`versions`
    replace the parsed inventory (for outputs the probe does not gather, such as the table)."""
    sections = {"tools": ProbeSection(0, "nvidia-smi=/usr/bin/nvidia-smi")}
    sections["gpu"] = gpu or ProbeSection(0, "")
    if perf is not None:
        sections["perf"] = ProbeSection(0, perf)
    if dmesg is not None:
        sections["dmesg"] = ProbeSection(0, dmesg)
    if torch_cuda is not None:
        sections["python"] = ProbeSection(0, json.dumps({"executable": "/usr/bin/python3", "torch": "2",
                                                          "torch_cuda": torch_cuda, "cuda_available": True}))
    spec = HostSpec(name="box", destination="box", kind="ssh", profile=profile("generic-ssh"), durable_root="/d",
                    scratch_root="/s", python=None, hourly_price=None, currency="USD", host_key_policy="strict",
                    instance_id=None, api_key_env=None, in_inventory=False)
    f = Facts(spec=spec, sections=sections, mounts=[], durable_abs="/d",
              expect_gpu=ExpectGpu.model_validate(expect_gpu) if expect_gpu else None, expect_files={},
              code_dir=None, local_epoch=0.0)
    f.load_gpus()
    if gpus is not None:
        f.gpus = gpus
    if versions is not None:
        f.versions = versions
    return f


@contextlib.contextmanager
def device_node(path: Path) -> Iterator[Path]:
    """A character device at `path` (a stand-in for /dev/nvidiaN that processes can hold open), removed
    after; skips the test where creating one needs root."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    path.unlink(missing_ok=True)
    subprocess.run(["mknod", str(path), "c", "1", "3"], check=True)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
