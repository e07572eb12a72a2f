"""GPU checks of the Phase-0 audit (A2-A9, A7b, A28). Read-only: report, never kill (A8 routes its
zombies to reap_vram, which shares its rule: holder_verdict)."""

from __future__ import annotations

from mcp_server.run.audit.driver_silence import Silence, smi_silence
from mcp_server.run.audit.kernel_log import parse_kernel_log
from mcp_server.run.audit.model import Check, Facts, check
from mcp_server.run.audit.nvidia import parse_dmon, parse_pids, parse_ps
from mcp_server.run.audit.smi_errors import SmiFailure, classify
from mcp_server.run.audit.versions import UNKNOWN_CUDA_MEANING, version_tuple
from mcp_server.run.audit.xid import assess

HOT_C = 83
THROTTLED_CLOCK_RATIO = 0.70
ZOMBIE_MIN_AGE_S = 120
BUSY_MIB = 1024


def smi_failure(f: Facts) -> SmiFailure | None:
    """What nvidia-smi reported instead of (or beside) the GPU rows, if anything."""
    sec = f.sec("gpu")
    if not f.has_nvidia_smi or sec is None:
        return None
    return classify(f.gpu_stray, sec.rc)


def _no_smi(f: Facts, cid: str, title: str) -> Check | None:
    """The shared answer when there is no usable nvidia-smi (A2 judges the failure itself)."""
    if f.has_nvidia_smi and f.gpus:
        return None
    if not f.has_nvidia_smi:
        return check(cid, title, "SKIP", "nvidia-smi is not installed: no NVIDIA driver is visible on this box")
    failure = smi_failure(f)
    return check(cid, title, "SKIP", f"{failure.headline} (see A2)" if failure else "nvidia-smi listed no GPU")


def _a2_failure(f: Facts, title: str, failure: SmiFailure) -> Check:
    said = f"nvidia-smi said: {failure.said[:200]!r}; {len(f.gpus)} GPU row(s) readable"
    if f.expect_gpu is not None or f.gpus or failure.kind == "gpu_lost":
        wanted = f" but a GPU was expected ({f.expect_gpu.model_dump(exclude_none=True)})" if f.expect_gpu else ""
        return check("A2", title, "FAIL", f"{failure.meaning}{wanted}; {said}")
    return check("A2", title, "WARN", f"{failure.meaning}; {said}. No GPU was expected (expect_gpu not given), "
                 "so this is not a failure of the box; give expect_gpu if it should have one")


def _a2_problems(f: Facts) -> list[str]:
    problems = list(f.gpu_bad_rows[:3])
    e = f.expect_gpu
    if e is not None:
        if e.name and not all(e.name.lower() in g.name.lower() for g in f.gpus):
            problems.append(f"expected name containing {e.name!r}")
        if e.count and e.count != len(f.gpus):
            problems.append(f"expected {e.count} GPU(s)")
        if e.min_memory_gib and any((g.memory_total_mib or 0) < e.min_memory_gib * 1024 * 0.97 for g in f.gpus):
            problems.append(f"expected at least {e.min_memory_gib:g} GiB per GPU")
    problems += [f"GPU {g.index} reads {', '.join(g.unreadable)} as an error (ERR! / [Unknown Error]): the driver "
                 "could not read it; the GPU may need a reset (nvidia-smi -q: GPU Recovery Action)"
                 for g in f.gpus if g.unreadable]
    if f.gpu_stray:
        problems.append(f"nvidia-smi printed {len(f.gpu_stray)} non-row line(s): {f.gpu_stray[0][:120]!r}")
    return problems


def a2_identity(f: Facts) -> Check:
    title = "GPU present and as rented"
    failure = smi_failure(f)
    if failure is not None:
        return _a2_failure(f, title, failure)
    if not f.gpus and f.expect_gpu is not None:
        why = "nvidia-smi listed no GPU"
        if not f.has_nvidia_smi:
            why = "nvidia-smi is not installed: no NVIDIA driver is visible on this box"
        wanted = f.expect_gpu.model_dump(exclude_none=True)
        return check("A2", title, "FAIL", f"{why}, but a GPU was expected ({wanted})")
    missing = _no_smi(f, "A2", title)
    if missing:
        return missing
    names = sorted({g.name for g in f.gpus})
    mem = sorted({g.memory_total_mib for g in f.gpus if g.memory_total_mib})
    drivers = sorted({g.driver_version for g in f.gpus if g.driver_version} or {f.versions.driver or "?"})
    evidence = f"{len(f.gpus)} x {', '.join(names)}; memory.total {mem} MiB; driver {', '.join(drivers)}"
    problems = _a2_problems(f)
    if problems:
        return check("A2", title, "WARN", evidence + "; " + "; ".join(problems))
    return check("A2", title, "PASS", evidence)


def a3_framework(f: Facts) -> Check:
    title = "framework sees the GPU (same interpreter as the launch)"
    probe = f.python_probe()
    has_gpu = f.has_nvidia_smi and bool(f.gpus)
    if probe is None:
        sec = f.sec("python")
        tail = (sec.text.strip().splitlines() or ["no output"])[-1][:200] if sec else "not run"
        return check("A3", title, "WARN" if has_gpu else "SKIP", f"python did not run: {tail}")
    exe = probe.get("executable")
    if "torch_error" in probe:
        if has_gpu:
            return check("A3", title, "FAIL", f"{exe}: torch does not import ({probe['torch_error']})")
        return check("A3", title, "SKIP", f"{exe}: torch not importable and no GPU here ({probe['torch_error'][:120]})")
    ev = (f"{exe}: torch {probe.get('torch')} (CUDA {probe.get('torch_cuda')}), "
          f"cuda.is_available={probe.get('cuda_available')}, device_count={probe.get('device_count')}")
    if has_gpu and not probe.get("cuda_available"):
        return check("A3", title, "FAIL", ev + "; training would silently run on the CPU (~100x slower)")
    if has_gpu and probe.get("device_count") != len(f.gpus):
        return check("A3", title, "WARN", ev + f"; nvidia-smi lists {len(f.gpus)} (CUDA_VISIBLE_DEVICES?)")
    if not has_gpu:
        return check("A3", title, "SKIP", ev + "; no GPU on this box")
    return check("A3", title, "PASS", ev)


def a4_triangle(f: Facts) -> Check:
    title = "driver / CUDA toolkit / torch triangle"
    missing = _no_smi(f, "A4", title)
    if missing:
        return missing
    v = f.versions
    probe = f.python_probe() or {}
    torch_cuda = probe.get("torch_cuda")
    driver = v.driver or f.gpus[0].driver_version
    ev = f"driver {driver} supports CUDA {v.cuda or v.cuda_printed or '?'}; torch built for CUDA {torch_cuda}"
    pins = [line for line in f.text("pins").splitlines() if line.strip()]
    dv, tv = version_tuple(v.cuda), version_tuple(torch_cuda)
    if dv and tv and tv > dv:
        return check("A4", title, "FAIL", ev + "; the torch build needs a newer driver than the host has "
                     "(the tenant cannot change the driver)")
    if v.cuda_unreadable:
        return check("A4", title, "WARN", f"driver {driver} prints CUDA Version {v.cuda_printed!r}, which is not a "
                     f"version: {UNKNOWN_CUDA_MEANING}; torch built for CUDA {torch_cuda}. Run the job's "
                     "interpreter to confirm torch.cuda.is_available() (A3)")
    if pins:
        return check("A4", title, "WARN", ev + f"; requirements pin the framework ({pins[0][:120]}): "
                     "installing them would replace the image's build")
    if not dv or not tv:
        return check("A4", title, "WARN", ev + "; could not read both versions")
    return check("A4", title, "PASS", ev)


def a5_health(f: Facts) -> Check:
    title = "GPU health: temperature and SM clock"
    missing = _no_smi(f, "A5", title)
    if missing:
        return missing
    hot_slow, hot = [], []
    for g in f.gpus:
        if g.temperature_c is None or g.temperature_c < HOT_C:
            continue
        if g.sm_clock_mhz and g.sm_clock_max_mhz and g.sm_clock_mhz < THROTTLED_CLOCK_RATIO * g.sm_clock_max_mhz:
            hot_slow.append(f"GPU {g.index}: {g.temperature_c} C, SM {g.sm_clock_mhz}/{g.sm_clock_max_mhz} MHz")
        else:
            hot.append(f"GPU {g.index}: {g.temperature_c} C")
    temps = [g.temperature_c for g in f.gpus if g.temperature_c is not None]
    dmon_rows = parse_dmon(f.text("dmon"))
    ev = f"max temperature {max(temps) if temps else '?'} C; dmon samples {dmon_rows}"
    if hot_slow:
        return check("A5", title, "FAIL",
                     "thermal throttling: " + "; ".join(hot_slow) + " (silent 25-40 % loss; re-rent)")
    if hot:
        return check("A5", title, "WARN", "hot but clocks still high: " + "; ".join(hot))
    if dmon_rows == 0:
        return check("A5", title, "WARN", ev + " (dmon produced nothing: old driver?)")
    return check("A5", title, "PASS", ev)


def a6_throttle(f: Facts) -> Check:
    title = "throttle reasons (nvidia-smi -q -d PERFORMANCE)"
    missing = _no_smi(f, "A6", title)
    if missing:
        return missing
    bad = [f"GPU {g.index}: {', '.join(g.active_throttle)}" for g in f.gpus if g.active_throttle]
    if bad:
        return check("A6", title, "FAIL",
                     "active: " + "; ".join(bad) + " (the tenant cannot fix cooling or power: re-rent)")
    if "perf" not in f.sections or not f.text("perf").strip():
        return check("A6", title, "WARN", "no PERFORMANCE report")
    return check("A6", title, "PASS", f"no slowdown/thermal/power-brake reason active on {len(f.gpus)} GPU(s)")


def a7_xid(f: Facts) -> Check:
    title = "GPU faults in the kernel log (Xid, bus loss, init failure)"
    sec = f.sec("dmesg")
    findings = assess(parse_kernel_log(f.text("dmesg")))
    text = "; ".join(x.text for x in findings)
    if any(x.fail for x in findings):
        return check("A7", title, "FAIL", text + ". Stop and re-rent a different box; do not debug code")
    if findings:
        return check("A7", title, "WARN", text)
    if sec is None or sec.rc != 0:
        return check("A7", title, "WARN", "dmesg is not readable here (needs root): "
                     "this verdict is not authoritative; ask the operator")
    return check("A7", title, "PASS", "no GPU fault (Xid, bus loss, init failure) in the kernel log")


def a7b_ecc(f: Facts) -> Check:
    title = "uncorrected ECC errors (volatile)"
    missing = _no_smi(f, "A7b", title)
    if missing:
        return missing
    bad = [f"GPU {g.index}: {g.ecc_uncorrected}" for g in f.gpus if g.ecc_uncorrected]
    if bad:
        return check("A7b", title, "FAIL", "uncorrected ECC errors: " + "; ".join(bad)
                     + " (results from this GPU are suspect; re-rent)")
    na_count = sum(1 for g in f.gpus if g.ecc_uncorrected is None)
    if na_count == len(f.gpus):
        return check("A7b", title, "SKIP", "ECC not reported ([N/A]: ECC disabled or unsupported, e.g. GeForce)")
    return check("A7b", title, "PASS", "0 uncorrected ECC errors")


CANDIDATE = "candidate"
DRIVER_SILENT = "nvidia-smi did not answer, so nothing can be called a zombie"
PARENTS_UNREAD = "a candidate unless it is a child of a listed compute process (a dataloader worker)"
CHILD = "a child of a listed compute process (a dataloader worker): in use"


def holder_verdict(pid: int, listed: set[int], *, ancestors: set[int] | None, age_s: int | None,
                   min_age_s: int = ZOMBIE_MIN_AGE_S, hidden: bool = False, own: frozenset[int] = frozenset(),
                   ours: bool = False, answered: bool = True) -> str:
    """Whether a process holding a /dev/nvidia* node is a zombie: CANDIDATE, or why it is left
    alone. One rule for A8 (which reports) and reap_vram (which stops what it calls a candidate).
    `ancestors` None: its parent chain could not be read, so a child of a listed process cannot be
    told from a zombie while any compute process is listed (PARENTS_UNREAD). `answered` False: nvidia-smi
    failed, hung or is absent, so its empty list proves nothing (DRIVER_SILENT)."""
    if pid in listed:
        return "a compute process nvidia-smi lists: in use"
    if ancestors and ancestors & listed:
        return CHILD
    if pid in own:
        return "this check itself"
    if ours:
        return "part of a run this server launched: stop it with cancel_run"
    if not answered:
        return DRIVER_SILENT
    if hidden:
        return "nvidia-smi cannot show pids in this container, so nothing can be called a zombie"
    if age_s is None or age_s < min_age_s:
        return f"younger than {min_age_s} s: it may still be starting"
    return PARENTS_UNREAD if ancestors is None and listed else CANDIDATE


def a8_silence(f: Facts) -> Silence | None:
    """Why A8 cannot tell a zombie from a live job on this probe: nvidia-smi absent, or its GPU
    query or its process query failed or hung."""
    if not f.has_nvidia_smi:
        return smi_silence(None, [])
    gpu, apps = f.sec("gpu"), f.sec("apps")
    if gpu is not None and (silent := smi_silence(gpu.rc, f.gpu_stray)):
        return silent
    if apps is None:
        return Silence("nvidia-smi's process list was not read", "run audit_box again")
    return smi_silence(apps.rc, apps.text.splitlines())


def ancestors_of(pid: int, parents: dict[int, int] | None) -> set[int] | None:
    """pid's ancestors from the probe's pid:ppid pairs; None when they were not read (a probe from
    before they were) or the chain is cut short (a process in it ended meanwhile)."""
    if parents is None or pid not in parents:
        return None
    found: set[int] = set()
    p = parents[pid]
    while p > 1 and p not in found:
        found.add(p)
        if p not in parents:
            return None
        p = parents[p]
    return found


def _parents(f: Facts) -> dict[int, int] | None:
    raw = f.kv("holders").get("ppid")
    if raw is None:
        return None
    pairs = (w.partition(":") for w in raw.split())
    return {int(a): int(b) for a, _, b in pairs if a.isdigit() and b.isdigit()}


def a8_holders(f: Facts, min_age_s: int = ZOMBIE_MIN_AGE_S) -> list[tuple[int, str, set[int] | None, str]]:
    """Each holder the probe saw: (pid, 'stat comm, N s old', its ancestors, holder_verdict)."""
    listed = {a.pid for a in f.apps if a.pid is not None}
    hidden = any(a.pid is None for a in f.apps)
    ages = parse_ps("\n".join(line for line in f.text("holders").splitlines() if "=" not in line))
    parents, answered = _parents(f), a8_silence(f) is None
    out = []
    for p in parse_pids(f.kv("holders").get("pids", "")):
        if p in ages:
            anc = ancestors_of(p, parents)
            verdict = holder_verdict(p, listed, ancestors=anc, age_s=ages[p][0], min_age_s=min_age_s, hidden=hidden,
                                     answered=answered)
            out.append((p, f"{ages[p][1]}, {ages[p][0]} s old", anc, verdict))
    return out


def _a8_findings(f: Facts, held: list[tuple[int, str, set[int] | None, str]]) -> list[str]:
    listed = {a.pid for a in f.apps if a.pid is not None}
    named = {v: [f"pid {p} ({what})" for p, what, _, verdict in held if verdict == v]
             for v in (CANDIDATE, PARENTS_UNREAD)}
    out = []
    if named[CANDIDATE]:
        out.append(f"{', '.join(named[CANDIDATE])}: not a compute process nvidia-smi lists nor a child of one. "
                   "reap_vram stops such holders: call it for a plan (read-only), then confirm with its token; "
                   "killing needs the user's explicit OK")
    if named[PARENTS_UNREAD]:
        out.append(f"{', '.join(named[PARENTS_UNREAD])}: not listed by nvidia-smi, and its parents could not be "
                   f"read, so it may be a dataloader worker of listed pid(s) {sorted(listed)[:8]}. reap_vram's plan "
                   "reads each holder's parents and offers only true zombies; killing needs the user's explicit OK")
    listed_on = {a.gpu_uuid for a in f.apps}  # once: a box may list thousands of GPUs and processes
    unexplained = [f"GPU {g.index}: {g.memory_used_mib} MiB used, no process listed" for g in f.gpus
                   if (g.memory_used_mib or 0) > BUSY_MIB and g.uuid not in listed_on]
    if unexplained:
        out.append("; ".join(unexplained) + ": held by a process this container cannot see (another container, "
                   "or the host): restart that container; it cannot be signalled from here, and killing anything "
                   "needs the user's explicit OK")
    return out


def _workers(f: Facts, held: list[tuple[int, str, set[int] | None, str]]) -> list[str]:
    """The holders whose parent chain proves them children of a listed compute process."""
    listed = {a.pid for a in f.apps if a.pid is not None}
    kids = [f"pid {p} ({what}) is a child of listed compute process {min(anc & listed)}"
            for p, what, anc, verdict in held if verdict == CHILD and anc]
    return ["; ".join(kids[:8]) + ": dataloader workers, in use; never offered for reaping"] if kids else []


def a8_zombies(f: Facts) -> Check:
    title = "zombie VRAM holders"
    silent = a8_silence(f)
    if silent is not None:
        return check("A8", title, "WARN" if f.has_nvidia_smi and f.gpus else "SKIP",
                     f"the driver did not answer ({silent.reason}): no holder of a GPU device is called a zombie, "
                     f"and reap_vram offers none. Next: {silent.step}")
    missing = _no_smi(f, "A8", title)
    if missing:
        return missing
    held = a8_holders(f)
    findings, workers = _a8_findings(f, held), _workers(f, held)
    if findings:
        return check("A8", title, "WARN", ". ".join(findings + workers))
    if any(a.pid is None for a in f.apps):
        return check("A8", title, "WARN",
                     "process ids are not visible from this container ([Not Supported]); cannot attribute VRAM")
    holders = f.kv("holders")
    pids = parse_pids(holders.get("pids", ""))
    scope = ("no /dev/nvidia* nodes visible" if not holders.get("devices")
             else f"{len(pids)} holder pid(s), each listed by nvidia-smi, a child of a listed one, or under "
                  f"{ZOMBIE_MIN_AGE_S} s old")
    return check("A8", title, "PASS", "; ".join([f"no invisible VRAM holder ({scope})", *workers]))


def a9_tenants(f: Facts) -> Check:
    title = "GPUs already in use (other jobs or tenants)"
    missing = _no_smi(f, "A9", title)
    if missing:
        return missing
    busy = [g for g in f.gpus if (g.memory_used_mib or 0) > BUSY_MIB or (g.utilization_pct or 0) > 5]
    if busy:
        idx = ",".join(str(g.index) for g in busy)
        pids = sorted({a.pid for a in f.apps if a.pid})
        return check("A9", title, "WARN",
                     f"{len(busy)}/{len(f.gpus)} GPU(s) busy (index {idx}; pids {pids[:8]}): "
                     "two jobs on one card both crawl or OOM; pin free cards with CUDA_VISIBLE_DEVICES")
    return check("A9", title, "PASS", f"all {len(f.gpus)} GPU(s) idle")


def a28_container(f: Facts) -> Check:
    title = "container has the GPU attached"
    marks = [line for line in f.text("container").splitlines() if line.strip()]
    if not marks:
        return check("A28", title, "SKIP", "not inside a container")
    gpu_ok = f.has_nvidia_smi and bool(f.gpus)
    if gpu_ok:
        return check("A28", title, "PASS",
                     f"inside a container ({marks[0][:60]}); nvidia-smi sees {len(f.gpus)} GPU(s)")
    if f.expect_gpu is not None:
        return check("A28", title, "FAIL", f"inside a container ({marks[0][:60]}) with no GPU visible: "
                     "start it with --gpus all and NVIDIA Container Toolkit >= 1.14")
    return check("A28", title, "SKIP", f"inside a container ({marks[0][:60]}); no GPU expected or visible")


GPU_CHECKS = (a2_identity, a3_framework, a4_triangle, a5_health, a6_throttle, a7_xid, a7b_ecc,
              a8_zombies, a9_tenants, a28_container)
