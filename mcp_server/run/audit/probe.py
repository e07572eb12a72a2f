"""The audit's single remote round trip: `scripts/audit_probe.sh` gathers every fact the
checks need in marked sections, and `parse_sections` splits its output again."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_server import scripts
from mcp_server.hosts.commands import path_word, quote
from mcp_server.paths import policy
from mcp_server.paths.refusal import PathRefused
from mcp_server.run.jobs.status import STATE_FUNCS

BEGIN = "@@RGT-BEGIN "
_END_RE = re.compile(r"^@@RGT-END (\S+) (-?\d+)$")


@dataclass(frozen=True)
class ProbeSection:
    """One marked section of the probe's output: the exit code of what produced it, and its text."""

    rc: int
    text: str


def build_script(
    *, mounts: list[str], durable_root: str, python: str | None, proxy_hook: str | None,
    cache_dirs: list[str], code_dir: str | None, expect_files: dict[str, str], slurm: bool = False,
    confined: Sequence[str] = (), scope: policy.Scope | None = None,
) -> str:
    """The whole audit as one script for one round trip (box paths validated here). `confined`:
    the paths a caller named, put through the path policy (read, within `scope`) before anything
    else runs; any refused and the script stops after its `policy` section."""
    gate = [str(len(confined)), *(path_word(p, "path") for p in confined)]
    gate += [str(len(scope.words())), *scope.words()] if scope else ["0"]
    words = [
        *gate,
        path_word(durable_root, "durable root"),
        quote(python or ""),
        quote(proxy_hook or ""),
        path_word(code_dir, "code_dir") if code_dir else quote(""),
        "1" if slurm else "0",
        str(len(mounts)), *(path_word(m, "mount path") for m in mounts),
        str(len(cache_dirs)), *(path_word(c, "cache dir") for c in cache_dirs),
        *(path_word(p, "expected file") for p in expect_files),
    ]
    # The jobs' state functions go first (the probe counts live runs with `rgt_state`), and the
    # interpreter reading A18 shares with prepare_box.
    return (policy.library() + STATE_FUNCS + "\n" + scripts.load("box_interp")
            + scripts.command_words("audit_probe", *words))


def refused(section: ProbeSection | None, named: Sequence[str], *, host: str,
            scope: policy.Scope) -> PathRefused | None:
    """The policy's refusal of the first path it refused (`named[i]`: the argument the i-th confined
    path came from, e.g. `paths`), or None when every one passed (or none was confined)."""
    if section is None or section.rc == 0:
        return None
    lines = section.text.splitlines()
    for i, what in enumerate(named):
        line = lines[i] if i < len(lines) else ""
        if not line.startswith("/"):
            return policy.refusal(line, what=what, host=host, scope=scope, done="nothing was measured or read")
    return None


def parse_sections(text: str) -> dict[str, ProbeSection]:
    """Split the script's output into its sections (a section that never ended is kept
    with rc -1 so a check can say the probe was cut short)."""
    out: dict[str, ProbeSection] = {}
    name: str | None = None
    buf: list[str] = []
    for line in text.splitlines():
        if line.startswith(BEGIN):
            name, buf = line[len(BEGIN):].strip(), []
            continue
        m = _END_RE.match(line)
        if m and name is not None and name == m.group(1):
            body = "\n".join(buf)
            out[name] = ProbeSection(int(m.group(2)), body[:-1] if body.endswith("\n") else body.rstrip("\n"))
            name = None
            continue
        if name is not None:
            buf.append(line)
    if name is not None:
        out[name] = ProbeSection(-1, "\n".join(buf))
    return out
