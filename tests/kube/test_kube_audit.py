"""audit_box on a Kubernetes host, through the real MCP client against the API double: RBAC per
verb (SelfSubjectAccessReview), GPU capacity per node, quotas that would refuse the request and the
PVC's binding. Node objects follow `kubectl get node -o json` for a device-plugin node."""

from __future__ import annotations

from typing import Any

from tests.conftest import error_text, structured
from tests.support.kube_api import KubeApi

GPU_NODE = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-node-7", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "status": {"capacity": {"cpu": "224", "memory": "2113249228Ki", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "220", "memory": "2061410764Ki", "nvidia.com/gpu": "8"}}}
CPU_NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-1"},
            "status": {"capacity": {"cpu": "64"}, "allocatable": {"cpu": "62"}}}


async def audit(client: Any) -> dict[str, Any]:
    res = structured(await client.call_tool("audit_box", {"host": "gpu-k8s", "detail": "all"}))
    return {c["id"]: c for c in res["outcomes"][0]["audit"]["checks"]}


async def test_a_ready_namespace_passes_and_names_its_gpus(kube: KubeApi, client: Any) -> None:
    kube.nodes = [GPU_NODE, CPU_NODE]
    kube.pvcs["ckpt"] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "ckpt"},
                         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "cephfs"},
                         "status": {"phase": "Bound"}}
    checks = await audit(client)
    assert {k: c["status"] for k, c in checks.items()} == {"K1": "PASS", "K2": "PASS", "K3": "PASS", "K4": "PASS",
                                                             "K5": "PASS"}
    assert "8/8 allocatable (NVIDIA-H100-80GB-HBM3)" in checks["K3"]["evidence"]
    assert checks["K2"]["route"] == "references://run-remote/kubernetes#rbac"


async def test_missing_verbs_a_full_quota_and_an_unbound_pvc_are_named(kube: KubeApi, client: Any) -> None:
    kube.denied |= {("delete", "jobs.batch"), ("get", "pods/log"), ("list", "nodes")}
    kube.quotas = [{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota"},
                    "status": {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "4"}}}]
    checks = await audit(client)
    assert checks["K2"]["status"] == "FAIL"
    assert "delete jobs.batch" in checks["K2"]["evidence"] and "get pods/log" in checks["K2"]["evidence"]
    assert checks["K3"]["status"] == "SKIP" and "may not list nodes" in checks["K3"]["evidence"]
    assert checks["K4"]["status"] == "FAIL" and "4/4" in checks["K4"]["evidence"]
    assert checks["K5"]["status"] == "FAIL" and "does not exist" in checks["K5"]["evidence"]


async def test_teardown_on_kubernetes_plans_nothing_metered_and_names_live_jobs(kube: KubeApi, client: Any) -> None:
    run = structured(await client.call_tool("launch_detached", {"host": "gpu-k8s", "command": "python train.py"}))
    run_id = run["outcomes"][0]["launch"]["run_id"]
    kube.apply(kube.job_names()[0], "running")
    plan = structured(await client.call_tool("plan_teardown", {"host": "gpu-k8s", "action": "none"}))
    assert plan["token"] is None and plan["executor"] == "none"
    assert plan["ready"] is False and run_id in " ".join(plan["unmet"]), "G1 names the live Job"
    assert "the PVC" in plan["survives"]
    kube.apply(kube.job_names()[0], "succeeded")
    done = structured(await client.call_tool("plan_teardown", {"host": "gpu-k8s", "action": "none"}))
    assert done["ready"] is True and done["token"] is None
    assert not [p for p in kube.pods.values() if "reader" in p["metadata"]["name"]], "a plan creates no pod"
    refused = error_text(await client.call_tool("teardown", {"host": "gpu-k8s", "action": "none", "token": "0" * 32}))
    assert "nothing to tear down per run" in refused and "cancel_run" in refused


async def test_a_user_who_cannot_exec_hears_that_runs_work_but_verification_cannot(kube: KubeApi, client: Any) -> None:
    kube.denied.add(("create", "pods/exec"))
    k2 = (await audit(client))["K2"]
    assert k2["status"] == "WARN" and "verify_artifacts cannot read the PVC" in k2["evidence"]
    assert "create pods/exec" in k2["evidence"]
