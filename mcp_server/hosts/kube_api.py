"""A Kubernetes host's API access: the client for its context and namespace (one per host, pooled
like an SSH connection), the one boundary where the client's exceptions become this server's
errors (each with what to do), and the labels that mark the objects this server creates.
Credentials stay inside the kubeconfig and the client: nothing here prints, logs or returns them."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.core.exceptions import ConfigError as KubeConfigError

from mcp_server.errors import (
    AuthError,
    ConfigError,
    ConflictError,
    DeniedError,
    InputError,
    NotFoundError,
    RgtError,
    TransportError,
)
from mcp_server.hosts.kube_options import KubeOptions

TIMEOUT_S = 15.0  # one API call; every tool stays well under its ~40 s budget
RBAC = "references://run-remote/kubernetes#rbac"
MANAGED_BY = {"app.kubernetes.io/managed-by": "remote-gpu-trainer"}
_LABEL_VALUE_CUT = 63


def label_value(text: str) -> str:
    """A label value carrying `text` (run ids and names fit; longer ones are cut)."""
    value = re.sub(r"[^A-Za-z0-9._-]", "-", text)[:_LABEL_VALUE_CUT]
    return value.strip("-._") or "x"


def kubeconfig_path(opts: KubeOptions) -> Path:
    """The kubeconfig the host names, else $KUBECONFIG's first file, else ~/.kube/config."""
    if opts.kubeconfig:
        return Path(opts.kubeconfig).expanduser()
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first).expanduser() if first else Path("~/.kube/config").expanduser()


def open_client(host: str, opts: KubeOptions) -> AsyncClient:
    """A client for the host's context and namespace. A kubeconfig that is missing or names no
    such context is a configuration error naming the file and the context."""
    path = kubeconfig_path(opts)
    try:
        config = KubeConfig.from_file(path).get(opts.context)
    except KubeConfigError as exc:
        raise ConfigError(f"cannot use the kubeconfig: {exc}", host=host, path=str(path),
                          next_step="set [hosts.<name>.kubernetes] kubeconfig and context (kubectl config "
                          "get-contexts lists them)") from exc
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError("the kubeconfig cannot be read", host=host, path=str(path),
                          observed=type(exc).__name__) from exc
    namespace = opts.namespace or (config.namespace if config else None) or "default"
    return AsyncClient(config, namespace=namespace, timeout=httpx2.Timeout(TIMEOUT_S), trust_env=False)


class KubeConnection:
    """One Kubernetes host of the inventory: its `[hosts.<name>.kubernetes]` options and a client
    made on first use (kept by the host pool, closed with it)."""

    def __init__(self, name: str, options: KubeOptions | None) -> None:
        if options is None:
            raise ConfigError(f"host {name!r} has the kubernetes profile but no [hosts.{name}.kubernetes] "
                              "table", next_step="add one with at least image (and context, namespace)")
        self.name = name
        self.options = options
        self._client: AsyncClient | None = None

    @property
    def client(self) -> AsyncClient:
        if self._client is None:
            self._client = open_client(self.name, self.options)
        return self._client

    @property
    def namespace(self) -> str:
        return str(self.client.namespace)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


@asynccontextmanager
async def api_errors(host: str, doing: str) -> AsyncIterator[None]:
    """Map what the client raises while `doing` something to this server's errors."""
    try:
        yield
    except ApiError as exc:
        raise _api_error(host, doing, exc) from exc
    except httpx2.TimeoutException as exc:
        raise TransportError(f"the API server did not answer in time while {doing}", host=host,
                             next_step="check the cluster is up (kubectl get --raw /readyz) and retry") from exc
    except httpx2.TransportError as exc:
        raise TransportError(f"cannot reach the API server while {doing}: {type(exc).__name__}", host=host,
                             next_step="check the kubeconfig's server address, the VPN, and that the cluster "
                             "is up") from exc


def _api_error(host: str, doing: str, exc: ApiError) -> RgtError:
    status = exc.status
    code = status.code or (exc.response.status_code if exc.response is not None else 0)
    said = (status.message or status.reason or "")[:500]
    where = f"while {doing}"
    if code == 401:
        return AuthError(f"the API server refused the kubeconfig's credentials (401) {where}", host=host,
                         next_step="refresh the credentials (an expired token or certificate): try the same "
                         "context with kubectl")
    if code == 403:
        quota = "exceeded quota" in said
        return DeniedError(f"the API server refused (403) {where}: {said}", host=host,
                           next_step="lower the request or ask for more quota (audit_box lists the "
                           "ResourceQuotas)" if quota else f"ask for the verb it names in the namespace: {RBAC}")
    if code == 404:
        return NotFoundError(f"not found {where}: {said}", host=host,
                             next_step="check the namespace and names in [hosts.<name>.kubernetes]")
    if code == 409:
        return ConflictError(f"already exists {where}: {said}", host=host,
                             next_step="list_runs shows the runs in the namespace")
    if code in (400, 422):
        return InputError(f"the API server refused the request {where}: {said}", host=host,
                          next_step="fix the field it names (references://run-remote/kubernetes#job-spec)")
    return RgtError(f"the API server answered {code} {where}: {said}", host=host,
                    next_step="retry; if it persists, check the API server's health")
