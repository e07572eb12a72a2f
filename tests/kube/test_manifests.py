"""The objects a run creates, validated against the published Kubernetes schema (pinned version,
strict: no unknown fields) and checked for what a GPU training run needs: never restarted in
place but not failed by a disruption, GPUs in requests and limits, a real /dev/shm, secrets only
by reference, Kueue's suspend and label, an Indexed Job for a sweep."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from mcp_server import scripts
from mcp_server.hosts.kube_options import KubeOptions, Toleration
from mcp_server.hosts.kube_pod import reader_manifest
from mcp_server.run.jobs.engines.kube.manifests import JobRequest, job_manifest, object_name, secret_manifest

SCHEMA = "1.33.0"
OPTS = KubeOptions(image="nvcr.io/nvidia/pytorch:24.10-py3", gpus=4, cpu="16", mem="128Gi", pvc="ckpt",
                   node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, time_s=86_400,
                   tolerations=[Toleration(key="dedicated", operator="Equal", value="ml", effect="NoSchedule")],
                   priority_class="research-low", service_account="trainer", image_pull_secret="ngc")


def one(**kw: object) -> JobRequest:
    base = {"run_ids": ["bert-20261204-080000-a1b2c3"], "commands": ["torchrun --nproc-per-node 4 train.py"],
            "name": "bert", "env": {"SEED": "1"}, "secret_names": ["WANDB_API_KEY"], "workdir": "/workspace/code"}
    return JobRequest(**(base | kw))  # type: ignore[arg-type]


def test_a_run_job_is_valid_and_never_restarts_in_place_but_survives_disruptions() -> None:
    job = job_manifest("ml", one(), OPTS)
    kubernetes_validate.validate(job, SCHEMA, strict=True)
    spec = job["spec"]
    assert spec["backoffLimit"] == 0 and spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["podFailurePolicy"]["rules"][0] == {
        "action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert spec["activeDeadlineSeconds"] == 86_400 and spec["ttlSecondsAfterFinished"] >= 86_400


def test_gpus_are_requested_and_limited_equally_and_the_gpu_taint_is_tolerated() -> None:
    pod = job_manifest("ml", one(), OPTS)["spec"]["template"]["spec"]
    res = pod["containers"][0]["resources"]
    assert res["requests"] == res["limits"] == {"nvidia.com/gpu": "4", "cpu": "16", "memory": "128Gi"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_dev_shm_is_memory_backed_and_the_pvc_is_the_durable_root() -> None:
    pod = job_manifest("ml", one(), OPTS)["spec"]["template"]["spec"]
    assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    assert {"name": "shm", "mountPath": "/dev/shm"} in pod["containers"][0]["volumeMounts"]
    assert {"name": "durable", "persistentVolumeClaim": {"claimName": "ckpt"}} in pod["volumes"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["RGT_RUN_DIRS"] == "/workspace/.rgt/runs/bert-20261204-080000-a1b2c3", "the exit file lands on the PVC"


def test_secrets_are_referenced_never_written_into_the_job() -> None:
    job = job_manifest("ml", one(), OPTS)
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    ref = next(e for e in env if e["name"] == "WANDB_API_KEY")
    assert ref == {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {
        "name": object_name("bert-20261204-080000-a1b2c3"), "key": "WANDB_API_KEY"}}}
    secret = secret_manifest("ml", "bert-20261204-080000-a1b2c3", {"WANDB_API_KEY": "s3cr3t-value"})
    kubernetes_validate.validate(secret, SCHEMA, strict=True)
    assert "s3cr3t-value" not in json.dumps(job)


def test_a_sweep_is_one_indexed_job_and_kueue_gets_a_suspended_job_with_its_queue() -> None:
    req = one(run_ids=["s-1", "s-2", "s-3"], commands=["a", "b", "c"], max_concurrent=2, secret_names=[])
    job = job_manifest("ml", req, OPTS.merged(KubeOptions(queue="team-a")))
    kubernetes_validate.validate(job, SCHEMA, strict=True)
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 2)
    assert spec["suspend"] is True and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert job["metadata"]["annotations"]["remote-gpu-trainer/cells"] == "s-1 s-2 s-3"


def test_object_names_are_dns_labels_unique_per_run_id() -> None:
    a, b = object_name("Run_With.Dots-20261204-080000-aaaaaa"), object_name("Run_With.Dots-20261204-080000-aaaaab")
    assert a != b and len(a) <= 63 and a == a.lower() and a[0].isalpha()


@pytest.mark.parametrize(("field", "value"), [
    ("namespace", "ML_Team"), ("mem", "64 GB"), ("image", "img; rm -rf /"), ("pvc", "../x"), ("gpus", -1),
])
def test_a_bad_option_is_refused_before_any_request(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as exc:
        KubeOptions.model_validate({field: value})
    assert field in str(exc.value)


def test_the_generated_objects_match_the_golden_files_reviewed_by_hand() -> None:
    golden = Path(__file__).parents[1] / "fixtures/kube"
    opts = KubeOptions(image="nvcr.io/nvidia/pytorch:24.10-py3", gpus=8, cpu="96", mem="900Gi", shm="64Gi",
                       pvc="ckpt", node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, time_s=172800,
                       queue="team-a", priority_class="research-low")
    req = JobRequest(run_ids=["llama-ft-20261204-080000-a1b2c3"],
                     commands=["torchrun --nproc-per-node 8 train.py --cfg ft.yaml"], name="llama-ft",
                     env={"SEED": "1"}, secret_names=["HF_TOKEN", "WANDB_API_KEY"], workdir="/workspace/code/llama")
    job = job_manifest("ml", req, opts)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][2] == scripts.load("kube_entry")
    container["command"][2] = "<scripts/kube_entry.sh>"
    assert job == yaml.safe_load((golden / "golden-job.yaml").read_text())
    reader = reader_manifest("ml", "ckpt", "nvcr.io/nvidia/pytorch:24.10-py3", "/workspace")
    kubernetes_validate.validate(reader, SCHEMA, strict=True)
    assert reader == yaml.safe_load((golden / "golden-reader-pod.yaml").read_text())
