"""HostPool: turns a `host` argument into a Host, reusing one connection per box."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mcp_server.errors import ConfigError, InputError
from mcp_server.hosts.base import Host, HostKind
from mcp_server.hosts.destination import Destination
from mcp_server.hosts.fallback_options import FallbackOptions
from mcp_server.hosts.inventory import Inventory, InventoryEntry
from mcp_server.hosts.known_hosts import HostKeyPolicy
from mcp_server.hosts.kube_options import KubeOptions
from mcp_server.hosts.local import LocalHost
from mcp_server.hosts.slurm_options import SlurmOptions
from mcp_server.hosts.unknown_name import (
    config_routes,
    is_address,
    resolves,
    unknown_host_error,
    unrouted_destination_error,
)
from mcp_server.knowledge import Profile, profile
from mcp_server.settings import Settings

if TYPE_CHECKING:
    from mcp_server.hosts.kube_api import KubeConnection

LOCAL = "local"
KUBERNETES: Literal["kubernetes"] = "kubernetes"


@dataclass(frozen=True)
class HostSpec:
    """Everything the tools know about a box before talking to it."""

    name: str
    destination: str
    kind: HostKind
    profile: Profile
    durable_root: str
    scratch_root: str
    python: str | None
    hourly_price: float | None
    currency: str
    host_key_policy: HostKeyPolicy
    instance_id: str | None
    api_key_env: str | None
    in_inventory: bool
    api_base: str | None = None
    slurm: SlurmOptions | None = None
    kubernetes: KubeOptions | None = None
    verify_roots: tuple[str, ...] = ()
    log_roots: tuple[str, ...] = ()
    scratch_named: bool = False  # the inventory names the scratch root (else it follows the durable root)
    fallback: FallbackOptions | None = None  # transport_fallback = "clash"
    forward_agent: bool = False

    def widening(self, roots: list[str], under: int | None) -> str | None:
        """The entry of `roots` (1-based `under`, as a box script reports which root held a path)
        when it is an inventory widening, not the durable or scratch root; else None."""
        if under is None or not 0 < under <= len(roots):
            return None
        root = roots[under - 1]
        return None if root in (self.durable_root, self.scratch_root) else root

    @property
    def result_roots(self) -> list[str]:
        """Where verify_artifacts may read results on this box: the durable and scratch roots and
        the inventory's verify_roots."""
        return list(dict.fromkeys((self.durable_root, self.scratch_root, *self.verify_roots)))


def _durable_root(entry: InventoryEntry, kind: HostKind, prof: Profile, local_root: str) -> str:
    """The inventory's durable_root; else a Kubernetes host's mount path; else the local box's
    root from the settings (RGT_LOCAL_ROOT, $RGT_HOME/local, ~/rgt); else the profile's."""
    if entry.durable_root:
        return entry.durable_root
    if kind == KUBERNETES and entry.kubernetes:
        return entry.kubernetes.mount_path
    return local_root if kind == "local" else prof.durable_root


def _scratch_root(entry: InventoryEntry, prof: Profile, durable: str) -> str:
    """The inventory's scratch_root; else the profile's while the durable root is the profile's
    too; else `<durable_root>/scratch`: scratch follows a durable root that was moved (the local
    box's, an inventory's, a Kubernetes mount) instead of staying on a tier the host may not use.
    A folder inside the durable root, never the root itself: scratch is the purgeable tier, and
    purging it must never take run dirs, results or manifests with it."""
    if entry.scratch_root:
        return entry.scratch_root
    if durable == prof.durable_root:
        return prof.scratch_root
    return f"{durable.rstrip('/')}/scratch"


def _spec(name: str, entry: InventoryEntry, in_inventory: bool, local_root: str) -> HostSpec:
    kind: HostKind = "local" if entry.destination == LOCAL else KUBERNETES if entry.destination == KUBERNETES \
        else "ssh"
    prof = profile(entry.profile or {"local": LOCAL, "ssh": "generic-ssh", KUBERNETES: KUBERNETES}[kind])
    if (prof.kind == KUBERNETES) != (kind == KUBERNETES):
        raise ConfigError(f"host {name!r}: a Kubernetes host has destination = \"kubernetes\" and the kubernetes "
                          "profile (and only it)", observed=f"destination {entry.destination}, profile {prof.platform}")
    durable = _durable_root(entry, kind, prof, local_root)
    return HostSpec(
        name=name,
        destination=entry.destination,
        kind=kind,
        profile=prof,
        durable_root=durable,
        scratch_root=_scratch_root(entry, prof, durable),
        scratch_named=entry.scratch_root is not None,
        python=entry.python or prof.python,
        hourly_price=entry.hourly_price,
        currency=entry.currency,
        host_key_policy=entry.host_key_policy,
        instance_id=entry.instance_id,
        api_key_env=entry.api_key_env or (prof.api.api_key_env if prof.api else None),
        in_inventory=in_inventory,
        api_base=entry.api_base,
        slurm=entry.slurm,
        kubernetes=entry.kubernetes,
        verify_roots=tuple(entry.verify_roots),
        log_roots=tuple(entry.log_roots),
        fallback=_fallback(entry),
        forward_agent=entry.forward_agent,
    )


def _fallback(entry: InventoryEntry) -> FallbackOptions | None:
    if entry.transport_fallback != "clash":
        return None
    return FallbackOptions(resolver_url=entry.doh_resolver, interface=entry.fallback_interface,
                           local_address=str(entry.fallback_local_address) if entry.fallback_local_address else None,
                           ca_file=Path(entry.doh_ca_file).expanduser() if entry.doh_ca_file else None)


class HostPool:
    """Resolves names (local, inventory, ad-hoc ssh) and keeps one Host per box."""

    def __init__(self, settings: Settings, inventory: Inventory | None = None) -> None:
        self.settings = settings
        self.inventory = inventory if inventory is not None else Inventory.load(settings.config_path)
        self._hosts: dict[str, Host] = {}
        self._kube: dict[str, KubeConnection] = {}
        self._lock = asyncio.Lock()

    def spec(self, name: str, host_key_policy: HostKeyPolicy | None = None) -> HostSpec:
        if not isinstance(name, str) or not name:
            raise InputError("host is empty", expected='"local", an inventory name or user@host[:port]')
        entry = self.inventory.hosts.get(name)
        local_root = str(self.settings.local_root)
        if entry is not None:
            spec = _spec(name, entry, True, local_root)
        elif name == LOCAL:
            spec = _spec(LOCAL, InventoryEntry(destination=LOCAL), False, local_root)
        else:
            Destination.parse(name)  # validates; raises InputError with the accepted forms
            spec = _spec(name, InventoryEntry(destination=name), False, local_root)
        if host_key_policy is not None and host_key_policy != spec.host_key_policy:
            if spec.in_inventory and host_key_policy == "accept-new":
                raise InputError(
                    f"the inventory keeps {name!r} on strict host keys; a call may make the policy stricter, "
                    "never weaker", observed=host_key_policy, expected="strict (or omit host_key_policy)",
                    next_step=f'set host_key_policy = "accept-new" in [hosts.{name}] if you mean it')
            spec = replace(spec, host_key_policy=host_key_policy)
        return spec

    async def host(self, spec: HostSpec) -> Host:
        key = f"{spec.destination}|{spec.host_key_policy}|{spec.fallback}|{spec.forward_agent}"
        if key not in self._hosts and spec.kind == "ssh":
            await self._refuse_a_name_of_nothing(spec)
        async with self._lock:
            found = self._hosts.get(key)
            if found is None:
                found = self._make(spec)
                self._hosts[key] = found
            return found

    async def _refuse_a_name_of_nothing(self, spec: HostSpec) -> None:
        """Before the first connection to an ssh box: a name that is not in the inventory, that the
        ssh config does not route, and that this machine cannot resolve gets an error saying where
        names come from, instead of a bare DNS failure. Anything else connects as before."""
        dest = Destination.parse(spec.destination)
        ssh_config = self.settings.ssh_config
        if is_address(dest.host) or dest.host == "localhost":
            return
        if ssh_config is not None and config_routes(ssh_config, dest.host) is not False:
            return
        if await resolves(dest.host, dest.port or 22, self.settings.connect_timeout_s):
            return
        if spec.in_inventory:
            raise unrouted_destination_error(spec.name, dest.host, self.settings.config_path, ssh_config)
        raise unknown_host_error(spec.name, dest.host, self.settings.config_path, ssh_config)

    def _make(self, spec: HostSpec) -> Host:
        s = self.settings
        if spec.kind == KUBERNETES:
            raise InputError(f"{spec.name} is a Kubernetes host: this tool runs commands on a box, and a Kubernetes "
                             "host has none", host=spec.name,
                             next_step="on Kubernetes use launch_detached, tail_logs, list_runs, wait_for_run, "
                             "cancel_run and audit_box (the node pool's billing is your cloud console's)")
        if spec.kind == "local":
            return LocalHost(spec.name, command_timeout_s=s.command_timeout_s)
        if s.max_channels < 1:
            raise ConfigError("RGT_MAX_CHANNELS must be at least 1")
        from mcp_server.hosts.ssh import SshHost  # asyncssh loads only when a box is reached over SSH

        return SshHost(
            spec.name,
            Destination.parse(spec.destination),
            known_hosts_path=s.known_hosts_path,
            ssh_config=s.ssh_config,
            host_key_policy=spec.host_key_policy,
            connect_timeout_s=s.connect_timeout_s,
            command_timeout_s=s.command_timeout_s,
            max_channels=s.max_channels,
            command_channel=s.command_channel,
            forward_agent=spec.forward_agent,
            fallback=spec.fallback,
        )

    def kube(self, spec: HostSpec) -> KubeConnection:
        """The API connection of a Kubernetes host (one per host name)."""
        from mcp_server.hosts.kube_api import KubeConnection  # the client loads only when a Kubernetes host is used

        if spec.kind != KUBERNETES:
            raise InputError(f"{spec.name} is not a Kubernetes host", host=spec.name)
        found = self._kube.get(spec.name)
        if found is None:
            found = self._kube[spec.name] = KubeConnection(spec.name, spec.kubernetes)
        return found

    async def close(self) -> None:
        hosts, self._hosts = list(self._hosts.values()), {}
        kube, self._kube = list(self._kube.values()), {}
        await asyncio.gather(*(h.close() for h in hosts), *(k.close() for k in kube), return_exceptions=True)
