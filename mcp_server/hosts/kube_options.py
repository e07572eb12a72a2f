"""Kubernetes job options: the `[hosts.<name>.kubernetes]` table of the inventory (the cluster's
defaults) and the `kubernetes` argument of a launch (overrides). Every value is checked against
what the API accepts for it before any request: names are DNS labels, quantities are quantities."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.limits import ValueStr

# RFC 1123 label (namespaces, PVCs, queues, service accounts, priority classes, secrets).
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# RFC 1123 subdomain (priority classes and most object names may contain dots).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
# A resource quantity: 8, 500m, 64Gi, 1.5G.
QUANTITY = r"^[0-9]{1,9}(\.[0-9]{1,6})?(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$"
_LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
_LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
_IMAGE = r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$"


class Toleration(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(pattern=_LABEL_KEY)
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = Field(default=None, pattern=_LABEL_VALUE)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class KubeOptions(BaseModel):
    """Where and how a run's Job is created. Unset fields fall back to the host's table, then to
    the defaults here. Credentials are never here: they come from the kubeconfig."""

    model_config = ConfigDict(extra="forbid")
    kubeconfig: str | None = Field(default=None, max_length=4096,
                                   description="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    context: str | None = Field(default=None, pattern=r"^[A-Za-z0-9@:/._-]{1,253}$",
                                description="kubeconfig context (default: its current-context)")
    namespace: str | None = Field(default=None, pattern=DNS_LABEL, description="default: the context's, else default")
    image: str | None = Field(default=None, pattern=_IMAGE, description="container image the run's command runs in")
    image_pull_secret: str | None = Field(default=None, pattern=DNS_SUBDOMAIN,
                                          description="a Secret of type dockerconfigjson for a private registry")
    node_selector: dict[ValueStr, ValueStr] | None = Field(
        default=None, description="e.g. {'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3'}", max_length=16)
    tolerations: list[Toleration] | None = Field(
        default=None, max_length=16, description="added to the nvidia.com/gpu toleration the server always sets")
    priority_class: str | None = Field(default=None, pattern=DNS_SUBDOMAIN, description="priorityClassName")
    queue: str | None = Field(default=None, pattern=DNS_SUBDOMAIN,
                              description="Kueue LocalQueue: the Job is created suspended for Kueue to admit")
    pvc: str | None = Field(default=None, pattern=DNS_SUBDOMAIN,
                            description="PersistentVolumeClaim mounted at mount_path: the durable root")
    mount_path: str = Field(default="/workspace", pattern=r"^/[A-Za-z0-9._/-]{0,255}$")
    service_account: str | None = Field(default=None, pattern=DNS_SUBDOMAIN)
    gpus: int | None = Field(default=None, ge=0, le=64, description="nvidia.com/gpu per pod (default 1)")
    cpu: str | None = Field(default=None, pattern=QUANTITY, description="CPU request and limit, e.g. 8")
    mem: str | None = Field(default=None, pattern=QUANTITY, description="memory request and limit, e.g. 64Gi")
    shm: str | None = Field(default=None, pattern=QUANTITY,
                            description="size of /dev/shm (a memory-backed emptyDir; default 8Gi)")
    time_s: int | None = Field(default=None, ge=60, le=90 * 86_400,
                               description="activeDeadlineSeconds: the run's time limit")
    ttl_s: int | None = Field(default=None, ge=600, le=90 * 86_400,
                              description="ttlSecondsAfterFinished: how long a finished Job (and its log) stays")

    def merged(self, override: KubeOptions | None) -> KubeOptions:
        """These defaults with every field the override sets."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_unset=True))
