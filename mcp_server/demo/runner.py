"""The demo's steps, each a tool call through a real in-memory MCP client (made by
__main__.py, the adapter side: nothing here imports mcp), as an agent makes them. Everything it
writes lives under one demo folder: its own state dir (ledger, pulls), an inventory with one host
`demo` (this machine, durable and scratch roots inside the folder), the code folder the runs work
in, and the report. The user's own runs and ledger are never touched."""

from __future__ import annotations

import base64
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_server.settings import Settings

HERE = Path(__file__).parent
SEEDS = (1, 2, 3)
RUN_FILES = ("final.json", "weights.safetensors", "config.yaml", "train.csv")
Say = Callable[[str], None]


class DemoFailed(RuntimeError):
    """A step did not do what it should; the message names it."""


@dataclass
class Demo:
    base: Path
    say: Say
    client: Any  # an mcp Client connected to the server
    run_ids: dict[int, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    code: str = ""  # the pushed snapshot, <project>/<id>
    verdicts: list[str] = field(default_factory=list)

    @property
    def work(self) -> Path:
        """The local project (the bundled script), pushed to the box as a snapshot."""
        return self.base / "work"

    @property
    def paper(self) -> Path:
        """The user's project: capsules in runs/, EVIDENCE.json, the report."""
        return self.base / "paper"

    @property
    def out(self) -> Path:
        """Where the runs write their results on the box (never inside the code snapshot)."""
        return self.base / "box" / "out"

    async def call(self, tool: str, args: dict[str, Any], progress: Any = None) -> dict[str, Any]:
        res = await self.client.call_tool(tool, args, progress_callback=progress)
        if res.is_error:
            raise DemoFailed(f"{tool}: " + _text(res))
        return res.structured_content or {}

    def step(self, name: str, verdict: str) -> None:
        self.verdicts.append(f"{name:18} {verdict}")
        self.say(f"  {name:18} {verdict}")


def _text(res: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in res.content)[:2000]


def prepare(base: Path) -> Settings:
    """The demo folder: inventory, code folder with the bundled script, roots; returns its settings."""
    for d in ("work", "box", "scratch", "paper"):
        (base / d).mkdir(parents=True, exist_ok=True)
    (base / "state").mkdir(mode=0o700, exist_ok=True)  # the server's own state is private
    shutil.copy(HERE / "train_tiny.py", base / "work" / "train_tiny.py")
    (base / "hosts.toml").write_text(
        '[hosts.demo]\ndestination = "local"\nprofile = "local"\n'
        f"durable_root = {json.dumps(str(base / 'box'))}\nscratch_root = {json.dumps(str(base / 'scratch'))}\n")
    return Settings.from_env({"RGT_HOME": str(base / "state"), "RGT_CONFIG": str(base / "hosts.toml"),
                              "RGT_SSH_CONFIG": "none", "RGT_PULL_ROOTS": str(base / "paper")})


async def audit(d: Demo) -> None:
    out = await d.call("audit_box", {"host": "demo"})
    d.step("audit_box", out["outcomes"][0]["audit"]["headline"])


async def push(d: Demo) -> None:
    out = await d.call("push_code", {"host": "demo", "source": str(d.work), "project": "tiny"})
    d.code = f"{out['project']}/{out['snapshot_id']}"
    d.step("push_code", f"snapshot {out['snapshot_id']}: {out['files']} file(s), {out['bytes_sent']} bytes sent, "
           "read-only on the box")


async def preflight(d: Demo) -> None:
    """Before the meter starts: the tiny script on this CPU, stopped and restarted by the drill."""
    cmd = f"{sys.executable} train_tiny.py --seed 1 --out pf --steps 40 --save-every 5 --pace 0.03"
    out = await d.call("preflight", {"host": "demo", "command": cmd, "code": d.code, "checkpoints": ["pf/ckpt/*.json"],
                                     "planned_steps": 60, "grace_s": 2, "attempt_s": 30})
    run_id = out["run_id"]
    while not (await d.call("wait_for_run", {"host": "demo", "run_id": run_id, "timeout_s": 30}))["ended"]:
        pass
    out = await d.call("preflight", {"host": "demo", "run_id": run_id})
    if out["verdict"] != "GO":
        bad = [f["what"] for s in out["stages"] for f in s["findings"] if f["level"] in ("fail", "warn")]
        raise DemoFailed(f"preflight: {out['verdict']}: " + "; ".join(bad)[:500])
    drill = next(s for s in out["stages"] if s["stage"] == "drill")
    resumed = [f["what"] for f in drill["findings"] if "resumed at step" in f["what"]]
    d.step("preflight", f"GO: {out['seconds_per_step']:.3f} s/step on CPU; {len(resumed)} restarts resumed "
           f"({resumed[0] if resumed else ''}); budget fits")


async def launch(d: Demo) -> None:
    for seed in SEEDS:
        # checkpoints beside the results, not among them: a resume anchor is no result to pull
        cmd = f"{sys.executable} train_tiny.py --seed {seed} --out {d.out}/seed{seed} --ckpt {d.base}/box/ckpt/s{seed}"
        out = await d.call("launch_detached", {"host": "demo", "name": f"tiny-s{seed}", "command": cmd,
                                               "code": d.code, "probe_s": 0, "output_root": f"{d.out}/seed{seed}",
                                               "outputs": list(RUN_FILES)})
        d.run_ids[seed] = out["outcomes"][0]["launch"]["run_id"]
    d.step("launch_detached", f"{len(SEEDS)} seeds started detached: " + ", ".join(d.run_ids.values()))


async def wait(d: Demo) -> None:
    started = time.monotonic()
    for seed, run_id in d.run_ids.items():
        async def show(progress: float, total: float | None, message: str | None, seed: int = seed) -> None:
            d.say(f"    seed {seed}: {message or ''}"[:110])
        while True:
            out = await d.call("wait_for_run", {"host": "demo", "run_id": run_id, "timeout_s": 30}, show)
            if out["ended"]:
                break
        if out["state"]["status"] != "succeeded":
            raise DemoFailed(f"wait_for_run: seed {seed} ended {out['state']['status']}: {out['message']}")
    d.step("wait_for_run", f"all {len(SEEDS)} runs succeeded in {time.monotonic() - started:.0f} s")


async def curves(d: Demo) -> None:
    res = await d.client.call_tool("plot_run", {"host": "demo", "run_ids": list(d.run_ids.values()),
                                                "series": ["loss", "acc"]})
    if res.is_error:
        raise DemoFailed("plot_run: " + _text(res))
    images = [c for c in res.content if getattr(c, "type", None) == "image"]
    flags = [f for s in (res.structured_content or {}).get("runs", []) for f in s.get("flags", [])]
    if not images:
        d.step("plot_run", "numbers only (install the [plots] extra for the PNG)")
        return
    png = d.base / "curves.png"
    png.write_bytes(base64.b64decode(images[0].data))
    d.files["curves (PNG)"] = str(png)
    d.step("plot_run", f"{png.stat().st_size // 1024} KB PNG of loss and acc, 3 seeds overlaid"
           + (f"; flags: {'; '.join(flags[:2])}" if flags else "; no divergence or NaN"))


async def verify(d: Demo) -> dict[str, float]:
    args = {"host": "demo", "root": str(d.out), "budget_s": 30,
            "roster": [f"seed*/{f}" for f in (*RUN_FILES, "metrics.jsonl")]}
    out = await d.call("verify_artifacts", args)
    while not out["done"]:
        out = await d.call("verify_artifacts", args)
    if not out["passed"]:
        raise DemoFailed("verify_artifacts: " + json.dumps(out.get("findings"))[:500])
    d.files["PULL_VERIFIED.json"] = out["verified_path"]
    d.step("verify_artifacts", f"passed: {out['files_total']} files hashed on the box, pulled, checked by type")
    pulled = Path(out["dest"])
    return {f"seed{s}": json.loads((pulled / f"seed{s}" / "final.json").read_text())["accuracy"] for s in SEEDS}


async def probe(d: Demo, accs: dict[str, float]) -> None:
    out = await d.call("run_probe", {"inputs": {"probe": "mde", "baseline_values": list(accs.values()),
                                                "claimed_effect": 0.01}})
    finding = out.get("finding", out)
    d.step("run_probe (mde)", f"{finding.get('verdict')}: {str(finding.get('disclosure') or '')[:90]}")


async def capsules(d: Demo) -> list[str]:
    """Each seed's run pulled and verified by its run id, then sealed into <paper>/runs/<run-id>/ by
    the capsule tool (the verified bytes, its provenance, how repro.sh re-evaluates it)."""
    sealed = []
    for seed, run_id in d.run_ids.items():
        args = {"host": "demo", "run_id": run_id, "budget_s": 30}
        out = await d.call("verify_artifacts", args)
        while not out["done"]:
            out = await d.call("verify_artifacts", args)
        if not out["passed"]:
            raise DemoFailed(f"verify_artifacts (seed {seed}): " + json.dumps(out.get("findings"))[:500])
        roles = {"best.pth": "weights.safetensors", "config.yaml": "config.yaml", "train.csv": "train.csv",
                 "test/main/metrics.json": "final.json"}
        evaluate = [sys.executable, str(d.work / "train_tiny.py"), "--eval", "{checkpoint}", "--config", "{config}",
                    "--out", "{out}"]
        cap = (await d.call("capsule", {"action": "seal", "project": str(d.paper), "path": out["verified_path"],
                                        "roles": roles, "evaluate": {"command": evaluate}}))["sealed"]
        sealed.append(cap["run_id"])
    kinds = sorted({f["kind"] for f in cap["findings"]})
    d.files["capsules"] = str(d.paper / "runs")
    d.step("capsule (seal)", f"{len(sealed)} capsules from verified pulls; findings: {', '.join(kinds) or 'none'}")
    return sealed


async def evidence(d: Demo, run_ids: list[str]) -> dict[str, Any]:
    """The claim's evidence row proposed from the three capsules (mean and std computed by the tool)
    and applied with the plan's token: EVIDENCE.json is written by the tool, never typed."""
    plan = (await d.call("capsule", {"action": "propose", "project": str(d.paper), "run_ids": run_ids,
                                     "row": {"claim": "C1", "metric": "accuracy", "aliases": ["tiny model"],
                                             "statement": "The tiny model learns the blobs."}}))["plan"]
    await d.call("capsule", {"action": "apply", "project": str(d.paper), "token": plan["token"]})
    row = plan["row"]
    d.files["EVIDENCE.json"] = str(d.paper / "EVIDENCE.json")
    d.step("capsule (evidence)", f"C1 accuracy {row['value']:.4f} ± {row['variance']['value']:.4f} over "
           f"{row['variance']['seeds']} seeds, written with the plan's token")
    return dict(row)


def write_paper(d: Demo, row: dict[str, Any]) -> None:
    """The bundled report: one number as the evidence has it and one stale number from an 'earlier draft'."""
    mean, std = float(row["value"]), float(row["variance"]["value"])
    stale = f"{min(mean + 0.0312, 0.99):.4f}"
    text = (HERE / "report.md").read_text().format(seeds=row["variance"]["seeds"], acc=f"{mean:.4f}",
                                                   std=f"{std:.4f}", n=row["n"], stale=stale)
    (d.paper / "report.md").write_text(text)
    d.files["report"] = str(d.paper / "report.md")


async def reconcile(d: Demo, row: dict[str, Any]) -> None:
    write_paper(d, row)
    out = await d.call("reconcile_evidence", {"evidence": str(d.paper / "EVIDENCE.json"), "documents": ["report.md"]})
    counts = out["summary"]["counts"]
    if not counts.get("stale"):
        raise DemoFailed("reconcile_evidence: the stale number in the report was not flagged: " + json.dumps(counts))
    stale = next(f for f in out["findings"] if f["category"] == "stale")
    d.step("reconcile_evidence", f"{counts.get('match', 0)} number(s) match the evidence; stale: "
           f"{stale['text']} at report.md:{stale['line']} (evidence says {stale['evidence_value']})")


async def teardown_plan(d: Demo) -> None:
    plan = await d.call("plan_teardown", {"host": "demo", "action": "none"})
    gates = ", ".join(f"{g['id']} {g['state']}" for g in plan["gates"])
    d.step("teardown (plan)", f"{gates}; {plan['next_step'][:80]} (not confirmed: a demo stops nothing)")


async def run_demo(base: Path, say: Say, client: Any) -> int:
    """Run every step through `client` (connected to a server built on `prepare(base)`'s
    settings); 0 when each did what it should, 1 naming the step otherwise."""
    started = time.monotonic()
    say(f"remote-gpu-trainer demo in {base}")
    d = Demo(base, say, client)
    try:
        await audit(d)
        await push(d)
        await preflight(d)
        await launch(d)
        await wait(d)
        await curves(d)
        accs = await verify(d)
        await probe(d, accs)
        row = await evidence(d, await capsules(d))
        await reconcile(d, row)
        await teardown_plan(d)
    except DemoFailed as exc:
        say(f"demo FAILED at {exc}")
        return 1
    d.files["run dirs"] = str(base / "box" / ".rgt" / "runs")
    say(f"done in {time.monotonic() - started:.0f} s. Files:")
    for what, where in d.files.items():
        say(f"  {what:18} {where}")
    return 0
