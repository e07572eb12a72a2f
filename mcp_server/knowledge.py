"""The knowledge base's one door: references/ and profiles/ (package data in the wheel,
the source tree in an editable install), and the Profile model tools read platform
facts from. No tool hard-codes a platform fact; it reads a Profile."""

from __future__ import annotations

import functools
import importlib.resources
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server.errors import ConfigError, NotFoundError

_FRONT_MATTER = re.compile(r"\A\+\+\+\n(?P<toml>.*?)\n\+\+\+\n", re.S)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")

Kind = Literal["references", "profiles"]  # the two folders of the knowledge base
KINDS: tuple[Kind, ...] = ("references", "profiles")
FlexBool = bool | str  # several facts are "host-dependent" / "per-platform" rather than yes/no


class StorageTier(BaseModel):
    """One storage tier of a platform and what survives which meter action."""

    model_config = ConfigDict(extra="forbid")
    name: str
    path: str = Field(description="mount or path prefix on the box; ~ means the login home")
    survives_stop: bool | None = Field(
        default=None, description="survives the platform's park/stop action (None/absent: no such action)")
    survives_destroy: bool = Field(description="survives destroy/terminate/release")
    cap: str | None = None
    notes: str | None = None


class MeterAction(BaseModel):
    """One cost-affecting action the platform offers, as teardown presents it."""

    model_config = ConfigDict(extra="forbid")
    action: str = Field(pattern=r"^[a-z][a-z0-9-]*$", description="name used in teardown(action=...)")
    label: str = Field(description="the platform's own word for it, e.g. 关机 or terminate")
    park: bool = Field(description="non-destructive: disk kept and the box can be started again")
    irreversible: bool
    stops_gpu_meter: bool
    keeps_billing: list[str] = Field(default_factory=list,
                                     description="what still bills afterwards, with rates when known")
    loses: list[str] = Field(default_factory=list, description="what is destroyed")
    survives: list[str] = Field(default_factory=list)
    executor: Literal["none", "manual", "in-box", "runpod", "vastai", "lambda", "paperspace"]
    manual_steps: str | None = Field(default=None, description="what the user clicks when the executor is manual")


class PlatformApi(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cli: str | None = None
    rest_base: str | None = None
    api_key_env: str | None = Field(default=None, description="env var NAME holding the key; never the key")


class _PlatformFacts(BaseModel):
    """The quick-matrix facts (knowledge/profiles.md §1.1) a profile and its variants share."""

    model_config = ConfigDict(extra="forbid")
    title: str
    meter_stop_verb: str
    meter_stop_irreversible: bool | Literal["mixed", "n/a"]
    detach_primitive: str
    spot_available: bool
    spot_grace: str
    shared_fs: FlexBool
    inode_cap: str
    free_egress: FlexBool
    china_mirror_needed: FlexBool
    danger_clocks: list[str] = Field(default_factory=list)


class ProfileVariant(_PlatformFacts):
    """A sub-platform a family profile covers (generic-ssh: Slurm, Kubernetes, notebooks)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    kind: Literal["slurm", "kubernetes", "notebook"]
    anchor: str = Field(description="section of the profile page that describes it")
    durable_root: str | None = None


class Profile(_PlatformFacts):
    """A platform's machine-readable facts (front matter of profiles/<platform>.md)."""

    platform: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    kind: Literal["workstation", "ssh-rental", "cloud-api", "kubernetes", "slurm", "ssh", "notebook"]
    host_driver_cuda_max: str
    local_nvme: FlexBool
    billed: bool = Field(description="does the box bill by time (a meter to stop)?")
    durable_root: str = Field(description="default durable root: run dirs and results live under it")
    scratch_root: str = Field(description="fast per-instance scratch")
    python: str | None = Field(default=None, description="the interpreter jobs use, when the platform fixes it")
    env_contract: Literal["project-env", "base-is-env", "image-is-env"]
    proxy_hook: str | None = Field(default=None,
                                   description="shell snippet every job runs first (trusted profile data)")
    tiers: list[StorageTier]
    meter_actions: list[MeterAction] = Field(default_factory=list)
    api: PlatformApi | None = None
    ssh_user: str | None = Field(default=None, description="login user the platform gives you (root, ubuntu, ...)")
    relaunch_hook: str | None = Field(default=None,
                                      description="on-box script the platform re-runs on every container start")
    facts_verified: str | None = Field(default=None, pattern=r"^20\d\d-(0[1-9]|1[0-2])$",
                                       description="month the billing/teardown facts were last checked (YYYY-MM)")
    variants: list[ProfileVariant] = Field(default_factory=list)

    def tier_for(self, path: str) -> StorageTier | None:
        """The tier a path lives on: the longest matching path prefix."""
        def norm(p: str) -> str:
            return p.rstrip("/") or "/"

        path = norm(path)
        matches = [
            t for t in self.tiers
            if norm(t.path) == "/" or path == norm(t.path) or path.startswith(norm(t.path) + "/")
        ]
        return max(matches, key=lambda t: len(norm(t.path)), default=None)

    def action(self, name: str) -> MeterAction | None:
        return next((a for a in self.meter_actions if a.action == name), None)


_EXPLICIT_ANCHOR = re.compile(r"\s*\{#([a-z0-9][a-z0-9-]*)\}\s*$")
# A heading that opens with a stable id (U7, A7b, T18b, K8S1, VAST10, ...) is anchored by it.
_STABLE_ID = re.compile(r"^([A-Z][A-Z0-9]*?[0-9]+[a-z]?)(?=$|[\s:.,;(\u2014\u2013-])")
_FENCE = re.compile(r"^\s*(```|~~~)")
_EXCERPT_SKIP = re.compile(r"^\s*(#|\||```|~~~|<!--|---|\+\+\+)")


def stable_id(heading: str) -> str | None:
    """The catalog id a heading starts with (`U7 — No space left` -> `U7`), if any."""
    m = _STABLE_ID.match(heading.strip())
    return m.group(1) if m else None


def slugify(heading: str) -> str:
    """GitHub-style anchor: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s", "-", text)


def _anchor(heading: str) -> tuple[str, str, str | None]:
    """(display heading, anchor, stable id) for a heading's text."""
    m = _EXPLICIT_ANCHOR.search(heading)
    shown = heading[: m.start()] if m else heading
    sid = stable_id(shown)
    if m:
        return shown.strip(), m.group(1), sid
    return shown.strip(), sid.lower() if sid else slugify(shown), sid


@dataclass(frozen=True)
class KnowledgeSection:
    """One heading of a page and the text under it (its subsections included)."""

    kind: Kind
    path: str
    anchor: str
    heading: str
    level: int
    stable_id: str | None
    text: str = field(repr=False)
    own_text: str = field(repr=False)  # up to the next heading of any level: what search indexes
    trail: tuple[str, ...] = ()  # headings of the enclosing sections, outermost first

    @property
    def uri(self) -> str:
        return f"{self.kind}://{self.path}#{self.anchor}"


def _split_sections(kind: Kind, path: str, body: str) -> tuple[KnowledgeSection, ...]:
    lines = body.splitlines()
    heads: list[tuple[int, int, str]] = []  # (line index, level, raw heading)
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2)))
    out: list[KnowledgeSection] = []
    seen: dict[str, int] = {}
    stack: list[tuple[int, str]] = []
    for n, (i, level, raw) in enumerate(heads):
        shown, anchor, sid = _anchor(raw)
        if anchor in seen:
            seen[anchor] += 1
            anchor = f"{anchor}-{seen[anchor]}"
        else:
            seen[anchor] = 0
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
        own_end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        out.append(KnowledgeSection(kind=kind, path=path, anchor=anchor, heading=shown, level=level, stable_id=sid,
                           text="\n".join(lines[i:end]).strip() + "\n",
                           own_text="\n".join(lines[i + 1:own_end]).strip(),
                           trail=tuple(h for _, h in stack)))
        stack.append((level, shown))
    return tuple(out)


def first_paragraph(text: str, limit: int = 240) -> str:
    """The first prose paragraph of some markdown (quote markers and emphasis removed), cut."""
    para: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            if para:
                break
            continue
        if _EXCERPT_SKIP.match(line):
            if para:
                break
            continue
        para.append(line.strip().lstrip(">").strip())
    flat = re.sub(r"[*`]", "", " ".join(para)).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rsplit(" ", 1)[0] + "\u2026"


@dataclass(frozen=True)
class KnowledgePage:
    """One markdown page of the knowledge base."""

    kind: Kind
    path: str  # posix, relative to its folder, without the .md suffix
    text: str

    @property
    def title(self) -> str:
        for line in self.body.splitlines():
            m = _HEADING.match(line)
            if m:
                return _anchor(m.group(2))[0]
        return self.path

    @property
    def body(self) -> str:
        return _FRONT_MATTER.sub("", self.text, count=1)

    @property
    def uri(self) -> str:
        return f"{self.kind}://{self.path}"

    @functools.cached_property
    def sections(self) -> tuple[KnowledgeSection, ...]:
        return _split_sections(self.kind, self.path, self.body)

    @property
    def description(self) -> str:
        """The page's opening paragraph: what it is for."""
        intro = self.sections[0].own_text if self.sections else self.body
        return first_paragraph(intro) or self.title

    def section(self, anchor: str) -> KnowledgeSection:
        """The section with this anchor, or NotFoundError listing the page's anchors."""
        for s in self.sections:
            if s.anchor == anchor:
                return s
        raise NotFoundError(f"no section #{anchor} in {self.uri}", expected=[s.anchor for s in self.sections][:80],
                            next_step=f"read {self.uri} or call search_references")


def knowledge_root() -> Path:
    """Where references/ and profiles/ live: package data, else the source tree."""
    packaged = Path(str(importlib.resources.files("mcp_server"))) / "_knowledge"
    if (packaged / "profiles").is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent


@functools.cache
def docs(kind: Kind) -> tuple[KnowledgePage, ...]:
    folder = knowledge_root() / kind
    found = []
    for f in sorted(folder.rglob("*.md")):
        rel = f.relative_to(folder).with_suffix("").as_posix()
        found.append(KnowledgePage(kind=kind, path=rel, text=f.read_text(encoding="utf-8")))
    return tuple(found)


def doc(kind: Kind, path: str) -> KnowledgePage:
    for d in docs(kind):
        if d.path == path:
            return d
    raise NotFoundError(f"no {kind} page {path!r}", expected=[d.path for d in docs(kind)])


def parse_front_matter(text: str, source: str) -> dict[str, Any]:
    m = _FRONT_MATTER.match(text)
    if not m:
        raise ConfigError("profile has no +++ TOML front matter at its top", path=source)
    try:
        return tomllib.loads(m.group("toml"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("profile front matter is not valid TOML", path=source, observed=str(exc)) from exc


def parse_profile(text: str, source: str) -> Profile:
    try:
        return Profile.model_validate(parse_front_matter(text, source))
    except ValidationError as exc:
        raise ConfigError("profile front matter does not match the Profile model", path=source,
                          observed=str(exc)) from exc


@functools.cache
def profiles() -> dict[str, Profile]:
    out = {}
    for d in docs("profiles"):
        if d.path.startswith("_"):
            continue
        p = parse_profile(d.text, f"profiles/{d.path}.md")
        if p.platform != d.path:
            raise ConfigError("profile 'platform' must equal its file name", path=f"profiles/{d.path}.md",
                              observed=p.platform, expected=d.path)
        out[p.platform] = p
    return out


_SLURM_NOTHING_TO_STOP = MeterAction(
    action="none", label="nothing to stop: jobs end on their own (cancel live ones with cancel_run)", park=False,
    irreversible=False, stops_gpu_meter=False, executor="none", survives=["the shared filesystem"])


_KUBE_NOTHING_PER_RUN = MeterAction(
    action="none", label="nothing metered per run: cancel_run deletes a live Job; the node pool bills until it "
    "scales down (your cloud's console)", park=False, irreversible=False, stops_gpu_meter=False, executor="none",
    survives=["the PVC", "the Job's log until ttlSecondsAfterFinished"])


def _variant(name: str) -> Profile | None:
    """A family profile's variant (generic-ssh's slurm, kubernetes, notebook) as a profile of its
    own: the family's facts with the variant's; a Slurm cluster has no meter to stop."""
    for base in profiles().values():
        for v in base.variants:
            if v.name != name:
                continue
            update = {**v.model_dump(exclude={"name", "anchor", "durable_root"}), "platform": name, "variants": []}
            if v.durable_root and "$" not in v.durable_root:  # a documented example, not always a usable path
                update["durable_root"] = v.durable_root
            if v.kind == "slurm":
                update |= {"billed": False, "meter_actions": [_SLURM_NOTHING_TO_STOP]}
            if v.kind == "kubernetes":
                update |= {"meter_actions": [_KUBE_NOTHING_PER_RUN]}
            return base.model_copy(update=update)
    return None


def profile(name: str) -> Profile:
    found = profiles().get(name) or _variant(name)
    if found is None:
        raise ConfigError(f"unknown profile {name!r}", observed=name, expected=sorted(profiles()))
    return found


def reference_uri(path: str, anchor: str | None = None) -> str:
    """URI of a reference page (and section); tools use it as the route to read next."""
    return f"references://{path}" + (f"#{anchor}" if anchor else "")


_URI = re.compile(r"^(references|profiles)://([^#]+?)(?:#(.+))?$")


def resolve(uri: str) -> tuple[KnowledgePage, KnowledgeSection | None]:
    """The page (and section, when the URI has an #anchor) a references:// or profiles:// URI names."""
    m = _URI.match(uri.strip())
    if not m:
        raise NotFoundError(f"not a knowledge URI: {uri!r}", expected="references://<path>[#anchor] or profiles://<platform>[#anchor]")
    kind: Kind = "references" if m.group(1) == "references" else "profiles"
    page = doc(kind, m.group(2))
    return page, page.section(m.group(3)) if m.group(3) else None


def all_sections() -> list[KnowledgeSection]:
    """Every section of every reference and profile page, in page order."""
    return [s for kind in KINDS for d in docs(kind) for s in d.sections]
