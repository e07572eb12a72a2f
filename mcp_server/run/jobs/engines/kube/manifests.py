"""The objects a run creates: one batch/v1 Job (an Indexed Job for a sweep) and, when the run has
secrets, one Secret the Job's variables reference. Plain dicts, validated against the published
schema in the tests; nothing here talks to the API."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from mcp_server import scripts
from mcp_server.hosts.kube_api import MANAGED_BY, label_value
from mcp_server.hosts.kube_options import KubeOptions
from mcp_server.run.jobs.rundir import run_dir_path

LABEL_RUN = "remote-gpu-trainer/run-id"  # the run (a sweep: its first cell's id stands for the Job)
LABEL_NAME = "remote-gpu-trainer/name"
ANNOTATION_CELLS = "remote-gpu-trainer/cells"  # a sweep's run ids, one per index, space-separated
ANNOTATION_COMMAND = "remote-gpu-trainer/command"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
GPU = "nvidia.com/gpu"
DEFAULT_SHM = "8Gi"
DEFAULT_TTL_S = 7 * 86_400  # a finished Job and its log stay a week
CONTAINER = "run"


def object_name(run_id: str) -> str:
    """The Job's (and Secret's) name: a DNS label derived from the run id, unique by its hash."""
    base = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:8]
    return f"rgt-{base[:50].rstrip('-')}-{digest}"


@dataclass(frozen=True)
class JobRequest:
    """What launch_detached asks of Kubernetes for one run or one sweep."""

    run_ids: list[str]  # one per command (a sweep: one per index)
    commands: list[str]
    name: str | None
    env: dict[str, str]
    secret_names: list[str]
    workdir: str | None
    max_concurrent: int = 1


def secret_manifest(namespace: str, run_id: str, values: dict[str, str]) -> dict[str, object]:
    """The run's Secret: one key per variable. Deleted with the run (cancel_run, teardown)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": object_name(run_id), "namespace": namespace,
                     "labels": {**MANAGED_BY, LABEL_RUN: label_value(run_id)}},
        "stringData": dict(values),
    }


def _pod_spec(name: str, req: JobRequest, opts: KubeOptions) -> dict[str, object]:
    """The run's pod: its command through the entry script, GPUs requested and limited, a real
    /dev/shm, the PVC, secrets by reference only."""
    durable = opts.mount_path if opts.pvc else None
    run_dirs = "\n".join(run_dir_path(durable, r) for r in req.run_ids) if durable else ""
    env: list[dict[str, object]] = [{"name": k, "value": v} for k, v in sorted(req.env.items())]
    env += [{"name": f"RGT_COMMAND_{i}", "value": c} for i, c in enumerate(req.commands)]
    env += [{"name": "RGT_RUN_DIRS", "value": run_dirs}, {"name": "RGT_WORKDIR", "value": req.workdir or ""}]
    env += [{"name": n, "valueFrom": {"secretKeyRef": {"name": name, "key": n}}} for n in req.secret_names]
    gpus = opts.gpus if opts.gpus is not None else 1
    limits = {k: v for k, v in ((GPU, str(gpus) if gpus else None), ("cpu", opts.cpu), ("memory", opts.mem)) if v}
    volumes: list[dict[str, object]] = [{"name": "shm", "emptyDir": {"medium": "Memory",
                                                                      "sizeLimit": opts.shm or DEFAULT_SHM}}]
    mounts: list[dict[str, object]] = [{"name": "shm", "mountPath": "/dev/shm"}]
    if opts.pvc:
        volumes.append({"name": "durable", "persistentVolumeClaim": {"claimName": opts.pvc}})
        mounts.append({"name": "durable", "mountPath": opts.mount_path})
    tolerations: list[dict[str, object]] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    tolerations += [t.model_dump(exclude_none=True) for t in opts.tolerations or []]
    pod: dict[str, object] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "containers": [{
            "name": CONTAINER, "image": opts.image, "command": ["bash", "-c", scripts.load("kube_entry")],
            "env": env, "resources": {"requests": dict(limits), "limits": limits} if limits else {},
            "volumeMounts": mounts,
        }],
        "volumes": volumes,
        "tolerations": tolerations,
    }
    for key, value in (("nodeSelector", dict(opts.node_selector) if opts.node_selector else None),
                       ("priorityClassName", opts.priority_class), ("serviceAccountName", opts.service_account),
                       ("imagePullSecrets", [{"name": opts.image_pull_secret}] if opts.image_pull_secret else None)):
        if value:
            pod[key] = value
    return pod


def job_manifest(namespace: str, req: JobRequest, opts: KubeOptions) -> dict[str, object]:
    """The run's Job: never restarted in place (restartPolicy Never, backoffLimit 0), except that a
    disruption (preemption, node drain, eviction) is not the run's failure: the pod failure
    policy ignores it and the Job starts a new pod."""
    run_id = req.run_ids[0]
    name = object_name(run_id)
    labels = {**MANAGED_BY, LABEL_RUN: label_value(run_id)}
    if req.name:
        labels[LABEL_NAME] = label_value(req.name)
    sweep = len(req.commands) > 1
    job_labels = {**labels, KUEUE_QUEUE: opts.queue} if opts.queue else dict(labels)  # Kueue reads the Job's
    spec: dict[str, object] = {
        "backoffLimit": 0,
        "podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]},
        "ttlSecondsAfterFinished": opts.ttl_s or DEFAULT_TTL_S,
        "template": {"metadata": {"labels": dict(labels)}, "spec": _pod_spec(name, req, opts)},
    }
    if opts.time_s:
        spec["activeDeadlineSeconds"] = opts.time_s
    if sweep:
        spec |= {"completionMode": "Indexed", "completions": len(req.commands),
                 "parallelism": min(req.max_concurrent, len(req.commands)), "backoffLimitPerIndex": 0}
        del spec["backoffLimit"]
    if opts.queue:
        spec["suspend"] = True  # Kueue admits it (unsuspends) when its ClusterQueue has quota
    annotations = {ANNOTATION_COMMAND: req.commands[0][:2000]}
    if sweep:
        annotations[ANNOTATION_CELLS] = " ".join(req.run_ids)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": job_labels, "annotations": annotations},
        "spec": spec,
    }
