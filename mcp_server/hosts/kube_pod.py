"""The durable volume of a Kubernetes host as a Host: commands run by `exec` in a small reader
pod that mounts the host's PVC, so the tools that read files on a box (verify_artifacts' on-box
manifest and resumable pull) work on the PVC after the run's pod is gone. The reader pod asks
for no GPU, ends itself after READER_LIFETIME_S, and cancel/teardown never depend on it."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from typing import Any

from lightkube.codecs import from_dict
from lightkube.resources.core_v1 import Pod

from mcp_server.errors import CommandTimeout, ConfigError, ConflictError, NotFoundError, RgtError
from mcp_server.hosts.base import DEFAULT_MAX_OUTPUT, CommandResult, FileStat, HostKind
from mcp_server.hosts.commands import quote
from mcp_server.hosts.kube_api import MANAGED_BY, KubeConnection, api_errors, label_value

READER_LIFETIME_S = 3600  # activeDeadlineSeconds: a forgotten reader pod ends itself
START_WAIT_S = 25.0
LABEL_ROLE = "remote-gpu-trainer/role"
CHUNK_BYTES = 4 * 1024 * 1024  # one exec per chunk of a pulled file


def reader_name(pvc: str) -> str:
    return f"rgt-reader-{label_value(pvc)[:40].lower().strip('-._')}-{hashlib.sha256(pvc.encode()).hexdigest()[:6]}"


def reader_manifest(namespace: str, pvc: str, image: str, mount_path: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": reader_name(pvc), "namespace": namespace,
                     "labels": {**MANAGED_BY, LABEL_ROLE: "reader"}},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": READER_LIFETIME_S,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "reader", "image": image, "command": ["sleep", str(READER_LIFETIME_S)],
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                          "limits": {"cpu": "2", "memory": "4Gi"}},
                            "volumeMounts": [{"name": "durable", "mountPath": mount_path}]}],
            "volumes": [{"name": "durable", "persistentVolumeClaim": {"claimName": pvc}}],
        },
    }


class PodHost:
    """A Host over exec into the host's reader pod (created on first use)."""

    def __init__(self, conn: KubeConnection) -> None:
        opts = conn.options
        self.conn = conn
        self.name = conn.name
        self.round_trips = 0
        self._pvc, self._image, self._mount = opts.pvc or "", opts.image or "", opts.mount_path
        self._ready = False
        self._starting = asyncio.Lock()  # the verifier runs commands concurrently: one creates the pod

    @property
    def kind(self) -> HostKind:
        return "kubernetes"

    @property
    def pod(self) -> str:
        return reader_name(self._pvc)

    async def _ensure(self) -> None:
        async with self._starting:
            if not self._ready:
                await self._start()
                self._ready = True

    async def _start(self) -> None:
        if not self._pvc or not self._image:
            raise ConfigError(f"{self.name}: reading files on Kubernetes needs the PVC they are on and an image "
                              "with a shell", host=self.name,
                              next_step="set pvc and image in [hosts.<name>.kubernetes]")
        client = self.conn.client
        try:
            async with api_errors(self.name, "reading the reader pod"):
                found = (await client.get(Pod, self.pod)).to_dict()
        except NotFoundError:
            try:
                async with api_errors(self.name, "creating the reader pod that mounts the PVC"):
                    await client.create(from_dict(reader_manifest(self.conn.namespace, self._pvc, self._image,
                                                                  self._mount)))
            except ConflictError:
                pass  # another server call created it a moment ago
            found = {}
        deadline = time.monotonic() + START_WAIT_S
        while (found.get("status") or {}).get("phase") != "Running":
            phase = (found.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):  # it outlived its deadline: start a fresh one
                async with api_errors(self.name, "replacing the ended reader pod"):
                    await client.delete(Pod, self.pod)
                raise RgtError(f"the reader pod {self.pod} had ended ({phase}); it is being replaced", host=self.name,
                               next_step="call again in a few seconds")
            if time.monotonic() > deadline:
                raise RgtError(f"the reader pod {self.pod} is not running yet (phase {phase or 'Pending'})",
                               host=self.name, next_step="call again: it is pulling its image or waiting for the "
                               "PVC (a ReadWriteOnce PVC mounts on one node at a time)")
            await asyncio.sleep(1.0)
            async with api_errors(self.name, "reading the reader pod"):
                found = (await client.get(Pod, self.pod)).to_dict()

    async def run(self, script: str, *, stdin: bytes | None = None, timeout: float | None = None,
                  max_output: int = DEFAULT_MAX_OUTPUT, slow: bool = False) -> CommandResult:
        await self._ensure()
        self.round_trips += 1
        start = time.monotonic()
        try:
            async with api_errors(self.name, f"running a command in pod {self.pod}"):
                res = await asyncio.wait_for(self.conn.client.exec(
                    self.pod, command=["bash", "-c", script], stdin=stdin if stdin is not None else b"",
                    stdout=True, stderr=True, decode=None), timeout)
        except TimeoutError as exc:
            raise CommandTimeout(f"the command in pod {self.pod} ran past {timeout} s", host=self.name,
                                 command=script) from exc
        out, err = _as_bytes(res.stdout), _as_bytes(res.stderr)
        return CommandResult(host=self.name, command=script, exit_status=res.exit_code, stdout=out[:max_output],
                             stderr=err[-65536:], duration_s=time.monotonic() - start,
                             stdout_truncated=len(out) > max_output)

    async def stat(self, path: str) -> FileStat | None:
        res = await self.run(f"stat -L -c '%s %Y' -- {quote(path)} 2>/dev/null", timeout=20)
        parts = res.text.split()
        if not res.ok or len(parts) != 2:
            return None
        return FileStat(size=int(parts[0]), mtime=float(parts[1]))

    async def read_stream(self, path: str, offset: int = 0, chunk_size: int = 256 * 1024,
                          length: int | None = None) -> AsyncIterator[bytes]:
        found = await self.stat(path)
        if found is None:
            raise NotFoundError("no such file on the PVC", host=self.name, path=path)
        pos = offset
        end = found.size if length is None else min(found.size, offset + length)
        while pos < end:
            n = min(CHUNK_BYTES, end - pos)
            res = await self.run(f"tail -c +{pos + 1} -- {quote(path)} | head -c {n}", timeout=60,
                                 max_output=n + 1)
            res.check(f"reading {path}")
            if not res.stdout:
                break
            for i in range(0, len(res.stdout), chunk_size):
                yield res.stdout[i:i + chunk_size]
            pos += len(res.stdout)

    async def close(self) -> None:
        """The reader pod stays until its deadline (another call may use it); the client is the
        host pool's."""


def _as_bytes(data: str | bytes | None) -> bytes:
    return data.encode() if isinstance(data, str) else (data or b"")
