"""inspect_run: how a live run is using the box right now. One round trip samples on the box
once a second for a bounded window (scripts/job_inspect.sh): the run's process tree (CPU, RSS),
its cgroup's memory against the limit, free bytes and inodes where it writes and on the durable
root, the log's size, and every GPU. From the series: how fast the disk fills and the log grows,
and when the disk is full at that rate. The verdicts say what the numbers mean, each with the
reference to read: data-bound, spare VRAM on a metered GPU, near the memory wall, host RAM
creeping up, a disk that fills before long."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import InputError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import reference_uri
from mcp_server.paths import policy
from mcp_server.paths.policy import Scope
from mcp_server.run.jobs.rundir import read_run_record, run_dir_path

DEFAULT_WINDOW_S = 20
MAX_WINDOW_S = 30
GPU_IDLE_PCT = 50.0       # below this mean utilisation with the CPUs saturated: data-bound
CPU_SATURATED = 0.8       # the run's processes use this share of the CPUs it may use
BOX_BUSY_PCT = 90.0       # or the whole box is this busy
SPARE_VRAM = 0.6          # a metered GPU whose VRAM stays below this share has room for a bigger batch
MEMORY_WALL = 0.9         # the run's memory at this share of its limit: one spike from an OOM kill
CREEP_MIB_PER_MIN = 50.0  # RSS growing this fast, steadily, over the window: a leak until shown otherwise
# The run record does not say when the run will end, so this horizon stands in for "before the
# run ends": a disk full sooner than this at the measured rate is worth acting on now.
DISK_ETA_H = 6.0


class Sample(BaseModel):
    t: float = Field(description="seconds since the first sample")
    cpu_pct: float | None = Field(description="the run's processes, % of one CPU, since the previous sample")
    box_cpu_pct: float | None = Field(default=None, description="the whole box, % of all its CPUs busy")
    rss_mib: float
    procs: int
    cgroup_mib: float | None
    avail_gib: float | None = Field(description="free on the filesystem the run writes to (its output root)")
    inodes_free: int | None
    durable_avail_gib: float | None = Field(default=None, description="free on the durable root's filesystem")
    log_bytes: int | None = Field(default=None, description="size of the run's log")
    gpu_util_pct: float | None = Field(description="mean over the GPUs")
    gpu_mem_util_pct: float | None = Field(description="memory-controller activity: % of time device memory "
                                           "was read or written, mean over the GPUs (not VRAM in use)")
    vram_used_mib: float | None = Field(description="summed over the GPUs")
    vram_total_mib: float | None
    power_w: float | None


class Verdict(BaseModel):
    kind: str = Field(description="data_bound | spare_vram | memory_wall | ram_creep | disk_filling | healthy")
    severity: str = Field(description="WARN or INFO")
    evidence: str
    route: str


class DiskRates(BaseModel):
    """Rates over the window, each the least-squares slope of its series (one busy second moves
    a first-to-last difference too much)."""

    fill_bytes_per_s: float | None = Field(description="free bytes falling per second where the run writes "
                                                       "(negative: space freed)")
    inode_fill_per_s: float | None = Field(description="free inodes falling per second there")
    durable_fill_bytes_per_s: float | None = Field(
        description="free bytes falling per second on the durable root; None when it is the same filesystem")
    log_write_bytes_per_s: float | None = Field(description="the run's log growing, bytes per second")
    full_eta_s: float | None = Field(description="seconds until the first of those runs out at its rate; "
                                                 "None when none is falling")


class InspectResult(BaseModel):
    host: str
    run_id: str
    live: bool
    window_s: int
    samples: list[Sample]
    cpus_allowed: float
    memory_limit_mib: float | None = Field(description="the cgroup's limit, else the box's RAM")
    disk: DiskRates
    verdicts: list[Verdict]
    output_root_refused: str | None = Field(
        default=None, description="the path policy's rule when it refused the output root run.json names: free "
                                  "space was then sampled in the run dir instead")


def _num(v: str | None) -> float | None:
    try:
        return float(v) if v not in (None, "", "-", "[N/A]", "N/A", "max") else None
    except ValueError:
        return None


def _cpus(facts: dict[str, str]) -> float:
    quota, _, period = facts.get("cpu_max", "").partition(" ")
    ncpu = _num(facts.get("ncpu")) or 1.0
    q, p = _num(quota), _num(period)
    return min(ncpu, q / p) if q and p else ncpu


def _gpu(rows: list[list[str]]) -> tuple[float | None, ...]:
    if not rows:
        return (None,) * 5
    cols = [[_num(r[i]) for r in rows] for i in range(2, 7)]

    def mean(v: list[float | None]) -> float | None:
        xs = [x for x in v if x is not None]
        return sum(xs) / len(xs) if xs else None

    def total(v: list[float | None]) -> float | None:
        xs = [x for x in v if x is not None]
        return sum(xs) if xs else None
    return mean(cols[0]), mean(cols[1]), total(cols[2]), total(cols[3]), total(cols[4])


def parse_samples(text: str) -> tuple[dict[str, str], list[Sample]]:
    """The sampler's output: its facts and one Sample per second (CPU % from tick deltas)."""
    facts = parse_kv("\n".join(ln for ln in text.splitlines() if not ln.startswith(("s=", "g="))))
    tck, page = _num(facts.get("tck")) or 100.0, _num(facts.get("page_kb")) or 4.0
    gpus: dict[str, list[list[str]]] = {}
    for line in text.splitlines():
        if line.startswith("g="):
            row = [c.strip() for c in line[2:].split(",")]
            if len(row) == 7:
                gpus.setdefault(row[0], []).append(row)
    out: list[Sample] = []
    prev: tuple[float, float] | None = None
    prev_box: tuple[float, float] | None = None
    t0 = None
    for line in text.splitlines():
        if not line.startswith("s="):
            continue
        kv = dict(w.split("=", 1) for w in line.split() if "=" in w)
        t, ticks = float(kv["s"]), float(kv.get("ticks", 0))
        t0 = t if t0 is None else t0
        cpu = 100.0 * (ticks - prev[1]) / tck / max(t - prev[0], 1e-3) if prev else None
        prev = (t, ticks)
        busy, every = float(kv.get("boxbusy", 0)), float(kv.get("boxall", 0))
        box = 100.0 * (busy - prev_box[0]) / max(every - prev_box[1], 1.0) if prev_box else None
        prev_box = (busy, every)
        cg, avail, iavail = _num(kv.get("cg")), _num(kv.get("avail")), _num(kv.get("iavail"))
        dfree = None if facts.get("samefs") == "1" else _num(kv.get("dfree"))
        log = _num(kv.get("log"))
        util, mem_util, used, total, power = _gpu(gpus.get(kv["s"], []))
        out.append(Sample(t=round(t - t0, 2), cpu_pct=None if cpu is None else round(cpu, 1),
                          box_cpu_pct=None if box is None else round(box, 1),
                          rss_mib=round(float(kv.get("rss_pages", 0)) * page / 1024, 1),
                          procs=int(kv.get("procs", 0)), cgroup_mib=None if cg is None else round(cg / 2**20, 1),
                          # KiB / 2**20 is exact in a float: unrounded, the fill rate keeps KiB precision
                          avail_gib=None if avail is None else avail / 2**20,
                          durable_avail_gib=None if dfree is None else dfree / 2**20,
                          log_bytes=None if log is None else int(log),
                          inodes_free=None if iavail is None else int(iavail), gpu_util_pct=util,
                          gpu_mem_util_pct=mem_util, vram_used_mib=used, vram_total_mib=total, power_w=power))
    return facts, out


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _route(page: str, anchor: str | None = None) -> str:
    return reference_uri(page, anchor)


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares change per second of a series."""
    if len(points) < 2:
        return None
    mt, mv = sum(t for t, _ in points) / len(points), sum(v for _, v in points) / len(points)
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / den if den else None


def _falling(samples: list[Sample], key: str, scale: float) -> tuple[float | None, float | None]:
    """How fast a free-space series falls (per second, in its unit times scale) and its last value."""
    pts = [(s.t, float(v) * scale) for s in samples if (v := getattr(s, key)) is not None]
    rise = _slope(pts)
    return (None if rise is None else -rise), (pts[-1][1] if pts else None)


def disk_rates(samples: list[Sample]) -> DiskRates:
    """The fill rates over the window and when the first thing runs out at its rate."""
    fill, free = _falling(samples, "avail_gib", 2**30)
    ifill, ifree = _falling(samples, "inodes_free", 1.0)
    dfill, dfree = _falling(samples, "durable_avail_gib", 2**30)
    log = _slope([(s.t, float(s.log_bytes)) for s in samples if s.log_bytes is not None])
    etas = [left / rate for rate, left in ((fill, free), (ifill, ifree), (dfill, dfree))
            if rate is not None and left is not None and rate > 0]
    return DiskRates(fill_bytes_per_s=fill, inode_fill_per_s=ifill, durable_fill_bytes_per_s=dfill,
                     log_write_bytes_per_s=log, full_eta_s=min(etas) if etas else None)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} GiB"


def _disk_verdicts(samples: list[Sample]) -> list[Verdict]:
    rates = disk_rates(samples)
    if len(samples) < 5 or rates.full_eta_s is None or rates.full_eta_s >= DISK_ETA_H * 3600:
        return []
    where = [f"{_size(r)}/s where it writes" for r in [rates.fill_bytes_per_s] if r and r > 0]
    where += [f"{r:.3g} inodes/s there" for r in [rates.inode_fill_per_s] if r and r > 0]
    where += [f"{_size(r)}/s on the durable root" for r in [rates.durable_fill_bytes_per_s] if r and r > 0]
    log = rates.log_write_bytes_per_s
    return [Verdict(kind="disk_filling", severity="WARN", route=_route("run-remote/gotchas", "u6"),
                    evidence=f"free space falls by {', '.join(where)} (the log grows {_size(log or 0)}/s): "
                             f"full in about {rates.full_eta_s / 3600:.1f} h at this rate, sooner than the "
                             f"{DISK_ETA_H:g} h a run may still need (prune checkpoints, write fewer files)")]


def judge(samples: list[Sample], cpus: float, limit_mib: float | None, billed: bool) -> list[Verdict]:
    """What the window's numbers mean for the run."""
    out: list[Verdict] = []
    cpu, util = _mean([s.cpu_pct for s in samples]), _mean([s.gpu_util_pct for s in samples])
    box, mem = _mean([s.box_cpu_pct for s in samples]), _mean([s.gpu_mem_util_pct for s in samples])
    gpu = "-" if util is None else f"{util:.0f} % busy" + ("" if mem is None else f" (memory controller {mem:.0f} %)")
    # The CPUs are saturated when the run uses nearly all it may, or the whole box is busy (the run
    # cannot get more even if it asked).
    saturated = cpu is not None and (cpu >= CPU_SATURATED * cpus * 100 or (box or 0) >= BOX_BUSY_PCT)
    if util is not None and cpu is not None and util < GPU_IDLE_PCT and saturated:
        out.append(Verdict(kind="data_bound", severity="WARN", route=_route("training/throughput-profiling"),
                           evidence=f"GPUs {gpu} while the run's processes use {cpu:.0f} % CPU of "
                                    f"{cpus:g} CPU(s) (the box {box or 0:.0f} % busy): the input pipeline is the "
                                    "bottleneck (more workers, faster decoding, data on local disk)"))
    shares = [s.vram_used_mib / s.vram_total_mib for s in samples if s.vram_used_mib and s.vram_total_mib]
    if billed and shares and max(shares) < SPARE_VRAM:
        out.append(Verdict(kind="spare_vram", severity="WARN", route=_route("training/throughput-profiling"),
                           evidence=f"VRAM at most {max(shares):.0%} used on a metered GPU: unspent speed (a larger "
                                    "batch, fewer gradient-checkpointed layers)"))
    used = [max(s.cgroup_mib or 0.0, s.rss_mib) for s in samples]
    if limit_mib and used and max(used) >= MEMORY_WALL * limit_mib:
        out.append(Verdict(kind="memory_wall", severity="WARN", route=_route("training/oom-memory"),
                           evidence=f"{max(used):.0f} MiB of a {limit_mib:.0f} MiB limit: one spike from an "
                                    "OOM kill (fewer workers, smaller prefetch, pin_memory off)"))
    if len(samples) >= 5:
        span_min = (samples[-1].t - samples[0].t) / 60
        rise = samples[-1].rss_mib - samples[0].rss_mib
        steady = sum(1 for a, b in zip(samples, samples[1:], strict=False) if b.rss_mib >= a.rss_mib)
        if span_min > 0 and rise / span_min >= CREEP_MIB_PER_MIN and steady >= 0.8 * (len(samples) - 1):
            out.append(Verdict(kind="ram_creep", severity="WARN", route=_route("training/oom-memory"),
                               evidence=f"RSS rose {rise:.0f} MiB in {span_min * 60:.0f} s ({rise / span_min:.0f} "
                                        "MiB/min) and never fell: a leak (lists of tensors kept, a growing cache) "
                                        "until shown otherwise; inspect again later to confirm"))
    out += _disk_verdicts(samples)
    if not out:
        log = disk_rates(samples).log_write_bytes_per_s
        out.append(Verdict(kind="healthy", severity="INFO", route=_route("run-remote/monitoring"),
                           evidence=f"CPU {cpu or 0:.0f} %, GPU {gpu}, RSS {samples[-1].rss_mib if samples else 0:.0f}"
                                    f" MiB, log written at {_size(log or 0)}/s: nothing to act on"))
    return out


async def sample_run(host: Host, spec: HostSpec, run_id: str, window_s: int = DEFAULT_WINDOW_S) -> InspectResult:
    """Sample a live run for window_s seconds and say what the numbers mean."""
    record = await read_run_record(host, spec.durable_root, run_id)
    if record.backend == "slurm":
        raise InputError("a Slurm run runs on a compute node, which this server does not sample", host=spec.name,
                         observed=run_id, next_step="on the login node: sstat -j <job id>.batch (CPU, RSS) and "
                         "tail_logs; the job id is in the run dir's slurm_job_id")
    run_dir = run_dir_path(spec.durable_root, run_id)
    root = record.outputs.root if record.outputs else record.workdir
    # The output root comes from run.json, which the box can rewrite: the path policy decides
    # whether it is sampled (a refused one is replaced by the run dir on the box).
    scope = Scope(("/",), "the box's own folders", spec.durable_root, this_machine=spec.kind == "local")
    script = policy.library() + scripts.command_words(
        "job_inspect", path_word(run_dir, "run dir"), quote(str(int(window_s))), path_word(root, "output root"),
        *scope.words())
    res = await host.run(script, timeout=window_s + 15, slow=True)
    res.check("sampling the run")
    facts, samples = parse_samples(res.text)
    if facts.get("live") != "1":
        raise InputError("the run is not live on this box: nothing to sample", host=spec.name, observed=run_id,
                         next_step="tail_logs says how it ended; inspect_run looks at running jobs")
    cpus = _cpus(facts)
    limit = _num(facts.get("mem_max"))
    limit_mib = limit / 2**20 if limit else ((_num(facts.get("mem_total_kb")) or 0) / 1024 or None)
    return InspectResult(host=spec.name, run_id=run_id, live=True, window_s=window_s, samples=samples,
                         cpus_allowed=round(cpus, 2), memory_limit_mib=limit_mib, disk=disk_rates(samples),
                         verdicts=judge(samples, cpus, limit_mib, spec.profile.billed),
                         output_root_refused=_refused_rule(facts.get("root_refused", "")))


def _refused_rule(answer: str) -> str | None:
    """The path policy's rule name from the box's refusal line (`RGT-DENIED credential` -> credential)."""
    if not answer:
        return None
    return "outside" if answer == "RGT-OUTSIDE" else answer.removeprefix("RGT-DENIED ")
