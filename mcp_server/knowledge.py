"""The knowledge base's one door: references/ and profiles/ (package data in the wheel,
the source tree in an editable install), and the Profile model tools read platform
facts from. No tool hard-codes a platform fact; it reads a Profile."""

from __future__ import annotations

import functools
import importlib.resources
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError, NotFoundError

_FRONT_MATTER = re.compile(r"\A\+\+\+\n(?P<toml>.*?)\n\+\+\+\n", re.S)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")

FlexBool = bool | str  # several facts are "host-dependent" / "per-platform" rather than yes/no


class StorageTier(BaseModel):
    """One storage tier of a platform and what survives which meter action."""

    model_config = ConfigDict(extra="forbid")
    name: str
    path: str = Field(description="mount or path prefix on the box; ~ means the login home")
    survives_stop: bool | None = Field(description="survives the platform's park/stop action (None: no such action)")
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
    keeps_billing: list[str] = Field(default_factory=list, description="what still bills afterwards, with rates when known")
    loses: list[str] = Field(default_factory=list, description="what is destroyed")
    survives: list[str] = Field(default_factory=list)
    executor: Literal["none", "manual", "in-box", "runpod", "vastai", "lambda", "paperspace"]
    manual_steps: str | None = Field(default=None, description="what the user clicks when the executor is manual")


class PlatformApi(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cli: str | None = None
    rest_base: str | None = None
    api_key_env: str | None = Field(default=None, description="env var NAME holding the key; never the key")


class Profile(BaseModel):
    """A platform's machine-readable facts (front matter of profiles/<platform>.md)."""

    model_config = ConfigDict(extra="forbid")
    platform: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    title: str
    kind: Literal["workstation", "ssh-rental", "cloud-api", "kubernetes", "slurm", "ssh", "notebook"]
    meter_stop_verb: str
    meter_stop_irreversible: bool | Literal["mixed", "n/a"]
    detach_primitive: str
    spot_available: bool
    spot_grace: str
    shared_fs: FlexBool
    inode_cap: str
    free_egress: FlexBool
    china_mirror_needed: FlexBool
    host_driver_cuda_max: str
    local_nvme: FlexBool
    billed: bool = Field(description="does the box bill by time (a meter to stop)?")
    durable_root: str = Field(description="default durable root: run dirs and results live under it")
    scratch_root: str = Field(description="fast per-instance scratch")
    python: str | None = Field(default=None, description="the interpreter jobs use, when the platform fixes it")
    env_contract: Literal["project-env", "base-is-env", "image-is-env"]
    proxy_hook: str | None = Field(default=None, description="shell snippet every job runs first (trusted profile data)")
    danger_clocks: list[str] = Field(default_factory=list)
    tiers: list[StorageTier]
    meter_actions: list[MeterAction] = Field(default_factory=list)
    api: PlatformApi | None = None

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


@dataclass(frozen=True)
class Doc:
    """One markdown page of the knowledge base."""

    kind: Literal["references", "profiles"]
    path: str  # posix, relative to its folder, without the .md suffix
    text: str

    @property
    def title(self) -> str:
        for line in self.body.splitlines():
            m = _HEADING.match(line)
            if m:
                return m.group(2)
        return self.path

    @property
    def body(self) -> str:
        return _FRONT_MATTER.sub("", self.text, count=1)

    @property
    def uri(self) -> str:
        return f"{self.kind}://{self.path}"


def knowledge_root() -> Path:
    """Where references/ and profiles/ live: package data, else the source tree."""
    packaged = Path(str(importlib.resources.files("mcp_server"))) / "_knowledge"
    if (packaged / "profiles").is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent


@functools.cache
def docs(kind: Literal["references", "profiles"]) -> tuple[Doc, ...]:
    folder = knowledge_root() / kind
    found = []
    for f in sorted(folder.rglob("*.md")):
        rel = f.relative_to(folder).with_suffix("").as_posix()
        found.append(Doc(kind=kind, path=rel, text=f.read_text(encoding="utf-8")))
    return tuple(found)


def doc(kind: Literal["references", "profiles"], path: str) -> Doc:
    for d in docs(kind):
        if d.path == path:
            return d
    raise NotFoundError(f"no {kind} page {path!r}", expected=[d.path for d in docs(kind)])


def parse_front_matter(text: str, source: str) -> dict:
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


def profile(name: str) -> Profile:
    found = profiles().get(name)
    if found is None:
        raise ConfigError(f"unknown profile {name!r}", observed=name, expected=sorted(profiles()))
    return found


def reference_uri(path: str, anchor: str | None = None) -> str:
    """URI of a reference page (and section); tools use it as the route to read next."""
    return f"references://{path}" + (f"#{anchor}" if anchor else "")
