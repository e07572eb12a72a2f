"""What Kubernetes says about a run's Job and pods, as the product's run state with the reason.
Pure: JSON objects as the API server returns them in, RunState out. The table this follows is
references://run-remote/kubernetes#states."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from mcp_server.run.jobs.status import RunState

JSON = Mapping[str, Any]
STATES = "references://run-remote/kubernetes#states"
# Waiting reasons Kubernetes retries forever: the run will not start until someone fixes them.
BLOCKED = {
    "ImagePullBackOff": "the image cannot be pulled: check the image name and tag, and imagePullSecrets for a "
                        "private registry",
    "ErrImagePull": "the image cannot be pulled: check the image name and tag, and imagePullSecrets for a "
                    "private registry",
    "InvalidImageName": "the image name is not valid",
    "CreateContainerConfigError": "the container's configuration refers to something missing (a Secret or "
                                  "ConfigMap key)",
    "CreateContainerError": "the runtime could not create the container",
    "CrashLoopBackOff": "the container keeps crashing on start",
}
DISRUPTIONS = {"PreemptionByScheduler": "preempted by a higher-priority pod",
               "EvictionByEvictionAPI": "evicted (a node drain or the eviction API)",
               "DeletionByTaintManager": "its node was tainted NoExecute (the node is going away)",
               "TerminationByKubelet": "the kubelet ended it (node pressure or a graceful node shutdown)",
               "DeletionByPodGC": "its node disappeared"}


def _conditions(obj: JSON) -> dict[str, JSON]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def _true(cond: JSON | None) -> bool:
    return bool(cond) and cond.get("status") == "True"  # type: ignore[union-attr]


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _created(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("creationTimestamp") or "")


def latest_pod(pods: Sequence[JSON]) -> JSON | None:
    """The newest pod of a run: after a disruption the Job starts another, and that one counts."""
    return max(pods, key=_created) if pods else None


def _container(pod: JSON) -> JSON:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return statuses[0] if statuses else {}


def _disrupted(pod: JSON) -> str | None:
    cond = _conditions(pod).get("DisruptionTarget")
    if _true(cond):
        reason = str(cond.get("reason") or "")  # type: ignore[union-attr]
        return DISRUPTIONS.get(reason, reason or "disrupted")
    if (pod.get("status") or {}).get("reason") == "Evicted":
        return "evicted by the kubelet: " + str((pod.get("status") or {}).get("message") or "node pressure")[:300]
    return None


def run_state(job: JSON | None, pods: Sequence[JSON], *, index: int | None = None) -> RunState:
    """The state of one run: a Job's (or, for a sweep, one index's) newest pod read with the
    Job's conditions. `job` None: the Job is gone (deleted, or its TTL after finishing passed)."""
    if job is None:
        return RunState(status="lost", evidence=[
            "the Job is gone from the namespace (deleted, or ttlSecondsAfterFinished passed) and no end was "
            "recorded for it", f"see {STATES}"])
    meta, spec, jstat = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    conds = _conditions(job)
    name = meta.get("name", "?")
    told = f"Job {name}" + (f" index {index}" if index is not None else "")
    pod = latest_pod(pods)
    ended_at = _epoch(jstat.get("completionTime")) or _epoch((conds.get("Failed") or {}).get("lastTransitionTime"))
    if index is not None:
        return _index_state(job, pod, told, index)
    if _true(conds.get("Complete")) or _true(conds.get("SuccessCriteriaMet")):
        return RunState(status="succeeded", exit_code=0, ended_at=ended_at, evidence=[f"{told} completed"])
    if _true(conds.get("Failed")) or _true(conds.get("FailureTarget")):
        cond = conds.get("Failed") or conds.get("FailureTarget") or {}
        return _failed(told, str(cond.get("reason") or ""), str(cond.get("message") or ""), pod, ended_at)
    if spec.get("suspend"):
        queue = (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name")
        why = f"waiting for Kueue to admit it from queue {queue} (its ClusterQueue's quota)" if queue else \
            "suspended (spec.suspend): it starts when something resumes it"
        return RunState(status="queued", evidence=[f"{told} is suspended: {why}"])
    return _pod_state(told, pod)


def _index_state(job: JSON, pod: JSON | None, told: str, index: int) -> RunState:
    """One index of an Indexed Job: its newest pod, and the Job's lists of ended indexes."""
    jstat = job.get("status") or {}
    if str(index) in _index_set(jstat.get("completedIndexes")):
        return RunState(status="succeeded", exit_code=0, evidence=[f"{told} completed"])
    if str(index) in _index_set(jstat.get("failedIndexes")):
        return _failed(told, "", "", pod, None)
    conds = _conditions(job)
    if _true(conds.get("Failed")) and pod is None:
        cond = conds["Failed"]
        return _failed(told, str(cond.get("reason") or ""), str(cond.get("message") or ""), None, None)
    if (job.get("spec") or {}).get("suspend"):
        return RunState(status="queued", evidence=[f"{told}: the Job is suspended (waiting for admission)"])
    return _pod_state(told, pod)


def _index_set(text: str | None) -> set[str]:
    """"1,3-5" -> {"1", "3", "4", "5"} (the API's compressed index lists)."""
    out: set[str] = set()
    for part in (text or "").split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out |= {str(i) for i in range(int(lo), int(hi or lo) + 1)}
    return out


def _pod_state(told: str, pod: JSON | None) -> RunState:
    if pod is None:
        return RunState(status="queued", evidence=[
            f"{told}: no pod yet (the Job controller creates it)", "if it stays without a pod, the namespace's "
            "ResourceQuota may refuse the pod: `kubectl describe job` shows FailedCreate events"])
    pname = (pod.get("metadata") or {}).get("name", "?")
    pstat = pod.get("status") or {}
    phase = pstat.get("phase", "")
    disrupted = _disrupted(pod)
    if disrupted:
        return RunState(status="queued", evidence=[
            f"{told}: pod {pname} was {disrupted}", "the Job's podFailurePolicy ignores disruptions: Kubernetes "
            "starts a new pod from the beginning (resume from a checkpoint)"])
    container = _container(pod)
    waiting = (container.get("state") or {}).get("waiting") or {}
    reason = str(waiting.get("reason") or "")
    if reason in BLOCKED:
        message = str(waiting.get("message") or "")[:300]
        return RunState(status="queued", evidence=[
            f"{told}: blocked — pod {pname} is {reason}" + (f": {message}" if message else ""),
            f"{BLOCKED[reason]}; Kubernetes keeps retrying and the run never starts until it is fixed: "
            "cancel_run, fix it, launch again"])
    if phase == "Pending":
        sched = _conditions(pod).get("PodScheduled")
        if sched and sched.get("status") == "False":
            msg = str(sched.get("message") or sched.get("reason") or "")[:400]
            return RunState(status="queued", evidence=[
                f"{told}: pod {pname} is not scheduled ({sched.get('reason', 'Unschedulable')}): {msg}",
                "references://run-remote/kubernetes#unschedulable says what to change when it can never fit"])
        return RunState(status="queued", evidence=[
            f"{told}: pod {pname} is starting" + (f" ({reason})" if reason else "")
            + ": pulling the image or mounting volumes"])
    if phase == "Running":
        return RunState(status="running", evidence=[f"{told}: pod {pname} is running on "
                                                    f"{(pod.get('spec') or {}).get('nodeName', '?')}"])
    if phase == "Succeeded":
        return RunState(status="succeeded", exit_code=0, evidence=[f"{told}: pod {pname} succeeded"])
    if phase == "Failed":
        return _failed(told, "", "", pod, None)
    return RunState(status="unknown", evidence=[f"{told}: pod {pname} is in phase {phase or 'Unknown'} "
                                                "(its node stopped reporting)"])


def _failed(told: str, reason: str, message: str, pod: JSON | None, ended_at: float | None) -> RunState:
    """A failed Job: the container's own end when a pod recorded one, with what the Job said."""
    evidence = []
    if reason == "DeadlineExceeded":
        evidence.append(f"{told} ran past activeDeadlineSeconds (the run's time limit) and was stopped: "
                        "checkpoint, then launch again with more time (kubernetes.time_s)")
    elif reason:
        evidence.append(f"{told} failed ({reason})" + (f": {message[:300]}" if message else ""))
    code = None
    terminated = ((_container(pod).get("state") or {}).get("terminated") or {}) if pod else {}
    if terminated:
        code = terminated.get("exitCode")
        why = terminated.get("reason") or ""
        ended_at = ended_at or _epoch(terminated.get("finishedAt"))
        if why == "OOMKilled":
            evidence.append(f"the container was OOMKilled (exit {code}): it hit its memory limit; raise "
                            "kubernetes.mem or shrink the batch")
        else:
            evidence.append(f"the container ended: {why or 'terminated'}, exit code {code}; tail_logs shows why")
    elif not evidence:
        evidence.append(f"{told} failed")
    return RunState(status="failed", exit_code=code if isinstance(code, int) else None, ended_at=ended_at,
                    evidence=[*evidence, f"see {STATES}"])
