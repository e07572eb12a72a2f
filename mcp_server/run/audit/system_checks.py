"""System checks of the Phase-0 audit: reachability, disks (bytes AND inodes), cgroup,
shared memory, env identity, survival tier, proxies, reboot, tools, deployed code,
CRLF and danger clocks."""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple

from mcp_server.run.audit.model import Check, Facts, MountReport, Status, check, gib, redact_url
from mcp_server.settings import LAUNCH_MIN_FREE_GIB, LAUNCH_MIN_FREE_INODES

FULL_PCT, NEAR_PCT = 95.0, 85.0
FLOOR_BYTES = 10 * 2**30
SHM_MIN = 2**30
CLOCK_SKEW_S = 120
RECENT_BOOT_S = 3600
_CONDA_ROOT_PY = re.compile(r"/(mini|ana)conda3?/bin/python[0-9.]*$|^/opt/conda/bin/python[0-9.]*$")


def a1_reachability(f: Facts) -> Check:
    lines = f.text("ident").splitlines()
    if len(lines) < 2:
        return check("A1", "reachable, identity", "FAIL",
                     f"the probe ran but printed no identity ({f.probe_error or 'no output'})")
    host, epoch, user = lines[0], lines[1], lines[2] if len(lines) > 2 else "?"
    try:
        skew = float(epoch) - f.local_epoch
    except ValueError:
        skew = 0.0
    ev = f"reached {host} as {user} ({lines[3] if len(lines) > 3 else ''}); clock skew {skew:+.0f} s"
    if abs(skew) > CLOCK_SKEW_S:
        return check("A1", "reachable, identity", "WARN", ev + " (mtime-based stall checks will be off by that much)")
    return check("A1", "reachable, identity", "PASS", ev)


def a10_bytes(m: MountReport) -> Check:
    title = "disk space (bytes)"
    if m.bytes_total is None or m.bytes_used_pct is None:
        return check("A10", title, "WARN", f"df gave no byte counts for {m.measured_at}", m.path)
    ev = (f"{m.path} on {m.mount_point} ({m.fstype}): {m.bytes_used_pct:.0f}% used, "
          f"{gib(m.bytes_avail)} free of {gib(m.bytes_total)} [{', '.join(m.roles)}]")
    if m.bytes_used_pct >= FULL_PCT:
        return check("A10", title, "FAIL", ev + "; writes will fail soon", m.path)
    work = bool({"durable", "scratch"} & set(m.roles))
    if work and (m.bytes_avail or 0) < LAUNCH_MIN_FREE_GIB * 2**30:
        return check("A10", title, "FAIL",
                     ev + f"; below the {LAUNCH_MIN_FREE_GIB:g} GiB launch_detached refuses to start under", m.path)
    low = work and (m.bytes_avail or 0) < FLOOR_BYTES
    if m.bytes_used_pct >= NEAR_PCT or low:
        return check("A10", title, "WARN", ev + (f"; below the {gib(FLOOR_BYTES)} launch floor" if low else ""), m.path)
    return check("A10", title, "PASS", ev, m.path)


def a11_inodes(m: MountReport) -> Check:
    title = "disk inodes"
    if not m.inodes_total:
        return check("A11", title, "SKIP", f"{m.mount_point or m.path} ({m.fstype}) does not report inodes", m.path)
    ev = (f"{m.path} on {m.mount_point}: inodes {m.inodes_used_pct:.0f}% used "
          f"({m.inodes_free} free of {m.inodes_total}); bytes {m.bytes_used_pct:.0f}% used")
    if (m.inodes_used_pct or 0) >= FULL_PCT:
        return check("A11", title, "FAIL",
                     ev + "; 'No space left on device' even though bytes look fine (many small files)", m.path)
    if {"durable", "scratch"} & set(m.roles) and (m.inodes_free or 0) < LAUNCH_MIN_FREE_INODES:
        return check("A11", title, "FAIL", ev + f"; below the {LAUNCH_MIN_FREE_INODES} free inodes launch_detached "
                     "refuses to start under", m.path)
    if (m.inodes_used_pct or 0) >= NEAR_PCT:
        return check("A11", title, "WARN", ev, m.path)
    return check("A11", title, "PASS", ev, m.path)


def _mount_of(f: Facts, role: str) -> MountReport | None:
    return next((m for m in f.mounts if role in m.roles), None)


def a12_hogs(f: Facts) -> Check:
    title = "hidden space hogs (framework caches)"
    sizes = []
    for line in f.text("caches").splitlines():
        kb, _, path = line.partition("\t")
        if kb.strip().isdigit():
            sizes.append((int(kb) * 1024, path.strip()))
    if not sizes:
        return check("A12", title, "SKIP", "no HF/pip/torch cache directories found")
    root = _mount_of(f, "root")
    ev = "; ".join(f"{p} {gib(b)}" for b, p in sorted(sizes, reverse=True))
    total = sum(b for b, _ in sizes)
    if root and root.bytes_total and total > 0.2 * root.bytes_total:
        return check("A12", title, "WARN", ev + f"; caches are {total / root.bytes_total:.0%} of the system disk: "
                     "move HF_HOME/PIP_CACHE_DIR to the data disk")
    return check("A12", title, "PASS", ev)


def a13_which_disk(f: Facts) -> Check:
    title = "which disk is which"
    rows = [f"{', '.join(m.roles)} -> {m.mount_point} ({m.fstype}, {m.filesystem})" for m in f.mounts]
    root, durable = _mount_of(f, "root"), _mount_of(f, "durable")
    ev = "; ".join(rows)
    if (root and durable and root.mount_point != durable.mount_point and (root.bytes_used_pct or 0) >= 90
            and (durable.bytes_used_pct or 100) < 50):
        return check("A13", title, "WARN", ev + "; the full disk is the system/container disk, not the data volume: "
                     "caches likely fill it")
    return check("A13", title, "PASS", ev)


def a14_cgroup_memory(f: Facts) -> Check:
    title = "cgroup memory (not `free`)"
    kv = f.kv("cgroup")
    limit, current = kv.get("memory.max", ""), kv.get("memory.current", "")
    host_total = int(kv.get("memtotal_kb", "0") or 0) * 1024
    if not limit or not current.isdigit():
        return check("A14", title, "SKIP", "no cgroup memory files readable")
    if limit == "max" or not limit.isdigit() or int(limit) >= 2**60:
        return check("A14", title, "PASS",
                     f"no cgroup memory limit; host memory {gib(host_total)}; in use {gib(int(current))}")
    lim, cur = int(limit), int(current)
    ev = (f"cgroup limit {gib(lim)}, in use {gib(cur)} ({cur / lim:.0%}); "
          f"the host shows {gib(host_total)} (size workers by the limit)")
    if cur > 0.9 * lim:
        return check("A14", title, "WARN", ev + "; OOM-kill risk")
    return check("A14", title, "PASS", ev)


def a15_oom_history(f: Facts) -> Check:
    title = "earlier OOM kills (baseline)"
    count = f.kv("cgroup").get("oom_kill", "")
    lines = [x for x in f.text("dmesg").splitlines() if "Killed process" in x or "Out of memory" in x]
    if count.isdigit() and int(count) > 0:
        return check("A15", title, "WARN", f"oom_kill counter is {count} in this cgroup "
                     "(baseline recorded; a later increase means a job was OOM-killed)")
    if lines:
        return check("A15", title, "WARN", f"{len(lines)} OOM line(s) in dmesg; last: {lines[-1][:160]}")
    if not count.isdigit():
        return check("A15", title, "SKIP", "no oom_kill counter readable; dmesg shows no OOM line")
    return check("A15", title, "PASS", "oom_kill counter 0 (baseline recorded)")


def a16_cpu_quota(f: Facts) -> Check:
    title = "CPU quota vs thread pools"
    kv = f.kv("cgroup")
    nproc = kv.get("nproc", "?")
    quota = kv.get("cpu.max", "").split()
    threads = (f.python_probe() or {}).get("num_threads")
    if len(quota) == 2 and quota[0].isdigit() and quota[1].isdigit() and int(quota[0]) > 0:
        vcpus = int(quota[0]) / int(quota[1])
        ev = f"quota {vcpus:g} vCPU; nproc {nproc}; torch threads {threads}"
        if threads and threads > max(1.5 * vcpus, vcpus + 1):
            return check("A16", title, "WARN",
                         ev + f"; set OMP_NUM_THREADS/MKL_NUM_THREADS={max(1, int(vcpus))} at launch")
        return check("A16", title, "PASS", ev)
    return check("A16", title, "PASS", f"no CPU quota; nproc {nproc}; torch threads {threads}")


def a17_shm(f: Facts) -> Check:
    m = _mount_of(f, "shm")
    title = "/dev/shm size"
    if m is None or m.bytes_total is None:
        return check("A17", title, "WARN", "/dev/shm not measurable: DataLoader workers may fail")
    ev = f"/dev/shm {gib(m.bytes_total)} ({m.bytes_used_pct:.0f}% used)"
    if m.bytes_total < SHM_MIN:
        return check("A17", title, "WARN", ev + "; tiny (Docker default 64 MB): workers die with 'Bus error'; "
                     "use --shm-size/--ipc=host or fewer workers")
    return check("A17", title, "PASS", ev)


class Interp(NamedTuple):
    path: str
    torch: bool
    names: tuple[str, ...]  # which of python/python3 its directory holds


def _interp(value: str) -> Interp | None:
    """One `PATH|torch|names` fact ("-" when that interpreter is absent)."""
    path, torch, names = value.rsplit("|", 2) if value.count("|") >= 2 else ("", "", "")
    return Interp(path, torch == "1", tuple(names.split())) if path else None


def box_env_dir(text: str) -> str:
    """The directory the box env file's `export PATH=<dir>:"$PATH"` line puts first ("" for none)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("export PATH=")]
    words = shlex.split(lines[-1], comments=True) if lines else []
    return words[1].removeprefix("PATH=").removesuffix(":$PATH") if len(words) == 2 else ""


class LaunchPython(NamedTuple):
    right: str  # the interpreter launches should reach ("" when none can be named)
    reached: dict[str, str]  # python/python3 -> what a launch reaches now, box env file included
    path_dir: str  # the directory the box env file must put first on PATH ("" for none)
    advice: str  # why no PATH line can fix it ("" when one can, or none is needed)


def _right(f: dict[str, str], named_python: str | None, contract: str) -> tuple[Interp | None, str]:
    named, login = _interp(f.get("named", "")), _interp(f.get("login", ""))
    keep, launch = " (no environment is created)", (_interp(f.get(f"launch_{n}", "")) for n in ("python", "python3"))
    if named_python and named is None:
        return None, f"the interpreter named for this host ({named_python}) is not on the box: set `python` " \
                     "for the host to the one that has the stack" + keep
    if named is not None or any(i and i.torch for i in launch):
        return named, ""
    if login is None or not login.torch:
        return None, "no interpreter a launch or a login shell reaches can import torch: name the one that " \
                     "has it as `python` for the host, or install torch into the image's" + keep
    if contract == "project-env" and _CONDA_ROOT_PY.search(login.path):
        return None, f"the login shell's {login.path} is the conda base, not a project env (A18): name the " \
                     "project env's interpreter as `python` for the host" + keep
    return login, ""


def launch_python(f: dict[str, str], named_python: str | None, contract: str, env_dir: str = "") -> LaunchPython:
    """The one decision A18 reports and prepare_box acts on: the right interpreter (the host's named
    `python`; without one, the login shell's when it can import torch and a launch's python/python3
    cannot) against what a launch reaches. `env_dir`: what the box env file puts first on PATH now.
    A fix is due exactly when `path_dir != env_dir`."""
    right, advice = _right(f, named_python, contract)
    bare = {n: (i.path if (i := _interp(f.get(f"launch_{n}", ""))) else "") for n in ("python", "python3")}
    reached = {n: f"{env_dir}/{n}" if env_dir else p for n, p in bare.items()}
    if right is None:
        return LaunchPython("", reached, "", advice)
    bindir = right.path.rpartition("/")[0]
    if not right.names:
        return LaunchPython(right.path, reached, env_dir, f"{right.path} has no python/python3 beside it: "
                            "call it by its path in the command")
    if env_dir == bindir or all(bare[n] == f"{bindir}/{n}" for n in right.names):
        return LaunchPython(right.path, reached, env_dir if env_dir == bindir else "", "")
    return LaunchPython(right.path, reached, bindir, "")


def _a18_launch(f: Facts, title: str, ev: str) -> Check:
    facts = f.kv("interp")
    env_dir = box_env_dir(facts.get("box_env_path", ""))
    lp = launch_python(facts, facts.get("asked"), f.spec.profile.env_contract, env_dir)
    reach = ", ".join(f"{n} -> {p or 'nothing'}" for n, p in lp.reached.items())
    if not facts:
        return check("A18", title, "PASS", ev)
    if lp.path_dir != env_dir:
        fix = f"put {lp.path_dir} first on PATH" if lp.path_dir else "drop its PATH line"
        return check("A18", title, "WARN", f"{ev}; a launch reaches {reach}, not {lp.right or 'the interpreter'}: "
                     f"call prepare_box, which plans the box env file change ({fix}) for your confirm")
    right = f", the right one ({lp.right})" if lp.right else ""
    return check("A18", title, "WARN" if lp.advice else "PASS",
                 f"{ev}; a launch reaches {reach}" + (f"; {lp.advice}" if lp.advice else right))


def a18_env_identity(f: Facts) -> Check:
    title = "python environment identity"
    probe = f.python_probe()
    contract = f.spec.profile.env_contract
    if probe is None:
        return check("A18", title, "WARN",
                     f"no python ran ({contract}); name the interpreter (python argument or inventory)")
    exe = str(probe.get("executable"))
    env = ", ".join(f"{k}={v}" for k, v in f.kv("env").items() if k in ("CONDA_DEFAULT_ENV", "VIRTUAL_ENV"))
    ev = f"{exe} (Python {probe.get('version')}){'; ' + env if env else ''}; profile says {contract}"
    if contract == "project-env" and _CONDA_ROOT_PY.search(exe):
        return check("A18", title, "FAIL", ev + ": this is the conda base interpreter; "
                     "use the project env (…/envs/<project>/bin/python)")
    return _a18_launch(f, title, ev)


def a19_survival(f: Facts) -> Check:
    title = "checkpoints on a tier that survives the meter stop"
    prof = f.spec.profile
    probe = f.text("probe").strip()
    tier = prof.tier_for(f.durable_abs) or prof.tier_for(f.spec.durable_root)
    root = f.spec.durable_root
    if probe.startswith("write-failed"):
        return check("A19", title, "FAIL",
                     f"cannot create a file in {root}: {probe[13:200]} (full bytes/inodes or read-only)", root)
    if tier is None:
        return check("A19", title, "WARN",
                     f"{root} is on no tier listed in profile {prof.platform}; survival unknown", root)
    park = next((a for a in prof.meter_actions if a.park), None)
    exists = "exists, write probe ok" if probe == "ok" else "does not exist yet (created at first launch)"
    ev = f"{root} -> tier {tier.name!r} ({tier.path}); {exists}"
    if park is not None and tier.survives_stop is False:
        keep = [t.path for t in prof.tiers if t.survives_stop]
        return check("A19", title, "FAIL", ev + f"; {park.label} wipes this tier: write checkpoints under {keep}", root)
    if not tier.survives_destroy and prof.billed:
        return check("A19", title, "PASS" if probe == "ok" else "WARN",
                     ev + "; lost on destroy/terminate: pull and verify before teardown", root)
    return check("A19", title, "PASS" if probe == "ok" else "WARN", ev, root)


def a20_same_fs(f: Facts) -> Check:
    title = "export/.partial and export on one filesystem (atomic close)"
    devs = [line.split("\t") for line in f.text("exportdev").splitlines() if "\t" in line]
    if len(devs) < 2:
        return check("A20", title, "SKIP", "no export/ and export/.partial under the durable root yet")
    if devs[0][0] != devs[1][0]:
        return check("A20", title, "FAIL", f"{devs[0][1]} (dev {devs[0][0]}) and {devs[1][1]} (dev {devs[1][0]}) "
                     "differ: a rename becomes a copy, not a closure")
    return check("A20", title, "PASS", f"both on device {devs[0][0]}")


def _proxy_verdict(env: dict[str, str], where: str) -> tuple[Status, str]:
    proxies = {k: redact_url(v) for k, v in env.items() if "proxy" in k.lower() and "no_proxy" not in k.lower() and v}
    if not proxies:
        return "PASS", f"{where}: no proxy set (no_proxy not needed)"
    low, up = env.get("no_proxy", ""), env.get("NO_PROXY", "")
    missing = [n for n in ("no_proxy", "NO_PROXY") if not env.get(n)]
    loop = [h for h in ("127.0.0.1", "localhost") if h not in low.split(",") or h not in up.split(",")]
    ev = f"{where}: proxy {sorted(proxies.items())}"
    if missing or loop:
        gaps = f"; {'missing ' + ', '.join(missing) if missing else ''} "
        gaps += f"{'loopback not exempt: ' + ', '.join(loop) if loop else ''}"
        return "WARN", ev + gaps.rstrip() + " (domestic mirrors and localhost would go through the proxy)"
    return "PASS", ev + "; no_proxy and NO_PROXY exempt loopback"


def a22_proxy(f: Facts) -> Check:
    title = "proxy and mirror state"
    env = f.kv("env")
    status, ev = _proxy_verdict(env, "plain shell")
    mirrors = ", ".join(f"{k}={v}" for k, v in env.items() if k.startswith("HF_") or k == "PIP_INDEX_URL")
    hook = f.spec.profile.proxy_hook
    if hook:
        hs, hev = _proxy_verdict(f.kv("envhook"), "after the profile hook")
        status = max(status, hs, key=lambda s: {"PASS": 0, "WARN": 1}[s])
        ev += "; " + hev
        if "network_turbo" in hook and not f.text("turbo").strip():
            status, ev = "WARN", ev + "; /etc/network_turbo is missing (the profile expects it)"
    return check("A22", title, status, ev + (f"; {mirrors}" if mirrors else ""))


def a24_reboot(f: Facts) -> Check:
    title = "recent reboot"
    try:
        up = float(f.text("uptime").split()[0])
    except (IndexError, ValueError):
        return check("A24", title, "SKIP", "no /proc/uptime")
    ev = f"up {up / 3600:.1f} h"
    if up < RECENT_BOOT_S:
        return check("A24", title, "WARN", ev + ": rebooted recently; detached jobs from before the boot are gone "
                     "(not OOM unless dmesg says so)")
    return check("A24", title, "PASS", ev)


def a25_tools(f: Facts) -> Check:
    title = "tools present"
    kv = f.kv("tools")
    missing = [t for t in ("tmux", "rsync", "fuser", "lsof", "setsid", "timeout") if not kv.get(t)]
    notes = []
    if "tmux" in missing:
        notes.append("no tmux: launches use the shell backend (setsid/nohup)")
    if "fuser" in missing and "lsof" in missing:
        notes.append("no fuser/lsof: zombie VRAM holders cannot be found")
    if "setsid" in missing:
        notes.append("no setsid: detached launch is not possible")
    ev = "missing: " + (", ".join(missing) if missing else "none")
    return check("A25", title, "WARN" if notes else "PASS", ev + ("; " + "; ".join(notes) if notes else ""))


def a26_deployed(f: Facts) -> Check:
    title = "code actually deployed on the box"
    if not f.expect_files:
        return check("A26", title, "SKIP",
                     "no expect_files given (map box paths to the sha256 of your local copy to check)")
    seen = {}
    for line in f.text("hashes").splitlines():
        digest, _, path = line.partition(" ")
        seen[path.strip().lstrip("*")] = digest.strip()
    bad = []
    for path, want in f.expect_files.items():
        got = next((d for p, d in seen.items() if p.endswith(path.lstrip("~").lstrip("/"))), None)
        if got is None or got == "missing":
            bad.append(f"{path}: missing on the box")
        elif got.lower() != want.lower():
            bad.append(f"{path}: box {got[:12]}… vs local {want[:12]}…")
    if bad:
        return check("A26", title, "FAIL", "NOT DEPLOYED: " + "; ".join(bad))
    return check("A26", title, "PASS", f"{len(f.expect_files)} file(s) match")


def a27_crlf(f: Facts) -> Check:
    title = "CRLF line endings in shell scripts"
    if not f.code_dir:
        return check("A27", title, "SKIP", "no code_dir given")
    text = f.text("crlf")
    if text.strip() == "absent":
        return check("A27", title, "WARN", f"{f.code_dir} does not exist on the box")
    bad = [line.split("\t", 1) for line in text.splitlines() if "\t" in line]
    scanned = f.kv("crlf").get("scanned", "0")
    if bad:
        return check("A27", title, "FAIL", f"{len(bad)} script(s) with CRLF, e.g. {bad[0][1]} ({bad[0][0]} lines): "
                     "fix with sed -i 's/\\r$//' and .gitattributes '*.sh text eol=lf'")
    return check("A27", title, "PASS", f"{scanned} .sh file(s) scanned, none with CRLF")


def a29_danger_clocks(f: Facts) -> Check:
    clocks = f.spec.profile.danger_clocks
    title = "danger clocks and idle policies"
    if not clocks:
        return check("A29", title, "PASS", f"profile {f.spec.profile.platform}: no danger clock")
    return check("A29", title, "WARN", f"profile {f.spec.profile.platform}: " + "; ".join(clocks))


SYSTEM_CHECKS = (a1_reachability, a12_hogs, a13_which_disk, a14_cgroup_memory, a15_oom_history,
                 a16_cpu_quota, a17_shm, a18_env_identity, a19_survival, a20_same_fs, a22_proxy,
                 a24_reboot, a25_tools, a26_deployed, a27_crlf, a29_danger_clocks)
