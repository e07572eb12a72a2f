"""audit_box on a Kubernetes host: is the context reachable and the namespace there, may this
user do what the server needs (SelfSubjectAccessReview per verb), how many GPUs the nodes have
and can give, which ResourceQuotas would refuse the request, and whether the PVC is bound.
A check that needs a permission the user lacks is SKIP with the reason, never a guess."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.core_v1 import Namespace, Node, PersistentVolumeClaim, ResourceQuota

from mcp_server.errors import DeniedError, NotFoundError, RgtError
from mcp_server.hosts.kube_api import KubeConnection, api_errors
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.audit.box import AuditResult, headline
from mcp_server.run.audit.model import SEVERITY, Check, Status
from mcp_server.run.jobs.engines.kube.manifests import GPU
from mcp_server.run.jobs.engines.kube.runs import KubeHost, options

PAGE = "references://run-remote/kubernetes"
# (verb, group, resource, subresource): what launch, status, logs and cancel need in the namespace.
VERBS = [("create", "batch", "jobs", ""), ("list", "batch", "jobs", ""), ("delete", "batch", "jobs", ""),
         ("list", "", "pods", ""), ("get", "", "pods", "log"), ("create", "", "secrets", ""),
         ("patch", "", "secrets", ""), ("delete", "", "secrets", "")]
# What verify_artifacts needs besides: the PVC reader pod and exec into it.
VERIFY_VERBS = [("create", "", "pods", ""), ("get", "", "pods", ""), ("create", "", "pods", "exec")]


def _check(cid: str, title: str, status: Status, evidence: str, anchor: str) -> Check:
    return Check(id=cid, title=title, status=status, evidence=evidence[:1200], route=f"{PAGE}#{anchor}")


async def _allowed(kh: KubeHost, verb: str, group: str, resource: str, sub: str) -> bool:
    review = SelfSubjectAccessReview(spec=SelfSubjectAccessReviewSpec(resourceAttributes=ResourceAttributes(
        namespace=kh.namespace, verb=verb, group=group, resource=resource, subresource=sub or None)))
    async with api_errors(kh.spec.name, "asking the API server what this user may do"):
        done = await kh.client.create(review)
    return bool(done.status and done.status.allowed)


async def _missing(kh: KubeHost, verbs: list[tuple[str, str, str, str]]) -> list[str]:
    return [f"{v} {r}{'/' + s if s else ''}{'.' + g if g else ''}" for v, g, r, s in verbs
            if not await _allowed(kh, v, g, r, s)]


async def _rbac(kh: KubeHost) -> Check:
    title = "RBAC allows the server's verbs"
    missing, for_verify = await _missing(kh, VERBS), await _missing(kh, VERIFY_VERBS)
    if missing:
        return _check("K2", title, "FAIL", f"namespace {kh.namespace}: not allowed: {', '.join(missing + for_verify)}",
                      "rbac")
    if for_verify:
        return _check("K2", title, "WARN", f"namespace {kh.namespace}: runs work; verify_artifacts cannot read the "
                      f"PVC: not allowed: {', '.join(for_verify)}", "rbac")
    return _check("K2", title, "PASS", f"namespace {kh.namespace}: all {len(VERBS) + len(VERIFY_VERBS)} verbs "
                  "allowed", "rbac")


def _quantity(text: Any) -> float:
    s = str(text or "0")
    for suffix, mult in (("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("Ti", 2**40), ("m", 1e-3), ("k", 1e3),
                         ("M", 1e6), ("G", 1e9), ("T", 1e12)):
        if s.endswith(suffix):
            return float(s[: -len(suffix)] or 0) * mult
    return float(s)


async def _gpus(kh: KubeHost, want: int) -> Check:
    try:
        async with api_errors(kh.spec.name, "listing nodes"):
            nodes = [n.to_dict() async for n in kh.client.list(Node)]
    except DeniedError:
        return _check("K3", "GPU nodes", "SKIP", "this user may not list nodes (a cluster-scoped permission): "
                      "GPU capacity unknown; the scheduler's message will say if the request cannot fit", "gpu-nodes")
    rows = []
    best = 0
    for n in nodes:
        st = n.get("status") or {}
        cap, alloc = (st.get("capacity") or {}).get(GPU), (st.get("allocatable") or {}).get(GPU)
        if cap is None:
            continue
        labels = (n.get("metadata") or {}).get("labels") or {}
        product = labels.get("nvidia.com/gpu.product", "")
        rows.append(f"{(n.get('metadata') or {}).get('name')}: {alloc}/{cap} allocatable"
                    + (f" ({product})" if product else ""))
        best = max(best, int(_quantity(alloc)))
    if not rows:
        return _check("K3", "GPU nodes", "FAIL", f"no node advertises {GPU}: the NVIDIA device plugin is not "
                      "running, or no GPU node is in the cluster", "gpu-nodes")
    status: Status = "PASS" if best >= want else "FAIL"
    lead = f"largest allocatable per node {best}, the run asks {want}" + ("" if status == "PASS" else
                                                                          ": it can never be scheduled")
    return _check("K3", "GPU nodes", status, lead + "; " + "; ".join(rows[:16]), "gpu-nodes")


async def _quota(kh: KubeHost, want: int) -> Check:
    async with api_errors(kh.spec.name, "listing ResourceQuotas"):
        quotas = [q.to_dict() async for q in kh.client.list(ResourceQuota)]
    tight = []
    seen = []
    for q in quotas:
        st = q.get("status") or {}
        hard, used = st.get("hard") or {}, st.get("used") or {}
        for key in (f"requests.{GPU}", f"limits.{GPU}", GPU):
            if key in hard:
                free = _quantity(hard[key]) - _quantity(used.get(key))
                seen.append(f"{(q.get('metadata') or {}).get('name')}: {key} {used.get(key, 0)}/{hard[key]} used")
                if free < want:
                    tight.append(seen[-1])
    if tight:
        return _check("K4", "ResourceQuota leaves room", "FAIL", f"the run asks {want} GPU(s); " + "; ".join(tight),
                      "unschedulable")
    return _check("K4", "ResourceQuota leaves room", "PASS", "; ".join(seen) or "no ResourceQuota limits GPUs here",
                  "unschedulable")


async def _pvc(kh: KubeHost, name: str | None) -> Check:
    if not name:
        return _check("K5", "durable PVC", "WARN", "no PVC configured: the pod's filesystem dies with the pod; only "
                      "the log survives (until the Job's TTL). Set kubernetes.pvc for checkpoints", "storage")
    try:
        async with api_errors(kh.spec.name, f"reading PVC {name}"):
            pvc = (await kh.client.get(PersistentVolumeClaim, name)).to_dict()
    except NotFoundError:
        return _check("K5", "durable PVC", "FAIL", f"PVC {name} does not exist in namespace {kh.namespace}",
                      "storage")
    phase = (pvc.get("status") or {}).get("phase")
    spec = pvc.get("spec") or {}
    facts = f"PVC {name}: {phase}, class {spec.get('storageClassName') or '(default)'}, modes " \
            f"{','.join(spec.get('accessModes') or [])}"
    status: Status = "PASS" if phase == "Bound" else "WARN"
    if phase == "Pending":
        facts += "; a WaitForFirstConsumer class binds when the first pod is scheduled, otherwise nothing can mount it"
    if "local" in str(spec.get("storageClassName") or "").lower():
        status = "WARN"
        facts += "; a node-local class ties every run to one node"
    return _check("K5", "durable PVC", status, facts, "storage")


async def audit_kube(spec: HostSpec, conn: KubeConnection) -> AuditResult:
    start = time.monotonic()
    kh = KubeHost(spec, conn)
    opts = options(kh.spec)
    want = opts.gpus if opts.gpus is not None else 1
    checks: list[Check] = []
    try:
        async with api_errors(kh.spec.name, f"reading namespace {kh.namespace}"):
            await kh.client.get(Namespace, kh.namespace)
        checks.append(_check("K1", "context reachable, namespace exists", "PASS",
                             f"the API server answered; namespace {kh.namespace} exists", "rbac"))
    except NotFoundError:
        checks.append(_check("K1", "context reachable, namespace exists", "FAIL",
                             f"namespace {kh.namespace} does not exist", "rbac"))
    except DeniedError:
        checks.append(_check("K1", "context reachable, namespace exists", "PASS",
                             f"the API server answered (this user may not read namespace {kh.namespace} itself)",
                             "rbac"))
    for part in (_rbac(kh), _gpus(kh, want), _quota(kh, want), _pvc(kh, opts.pvc)):
        try:
            checks.append(await part)
        except RgtError as exc:
            checks.append(_check("K?", "check could not run", "SKIP", str(exc), "rbac"))
    worst = max(checks, key=lambda c: SEVERITY[c.status]).status
    counts = {s: sum(c.status == s for c in checks) for s in ("PASS", "WARN", "FAIL", "SKIP")}
    return AuditResult(host=kh.spec.name, profile=kh.spec.profile.platform,
                       audited_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                       verdict=worst if worst != "SKIP" else "PASS",
                       headline=headline(worst if worst != "SKIP" else "PASS", counts, True), counts=counts,
                       checks=checks, mounts=[], gpus=[],
                       round_trips=4 + len(VERBS) + len(VERIFY_VERBS), duration_s=round(time.monotonic() - start, 2),
                       authoritative=True)
