"""verify_artifacts on a Kubernetes host: the run's pod is gone, so the server reads the PVC
through a reader pod it creates (no GPU, its own deadline), hashing on the "box" by exec and
pulling by exec in chunks, with the same manifest and PULL_VERIFIED contract as over SSH. In the
double, exec runs the command on this machine and the PVC is a local directory (see
tests/support/kube_api.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tests.conftest import structured
from tests.support.kube_api import KubeApi
from tests.verify.artifacts.pulls import write_checkpoint


async def until_done(client: Any, **args: Any) -> dict[str, Any]:
    for _ in range(30):
        r = structured(await client.call_tool("verify_artifacts", {"host": "gpu-k8s", **args}))
        if r["done"]:
            return r
    raise AssertionError("never finished")


def pvc_at(env: Any, tmp_path: Path) -> Path:
    """Point the host's PVC mount at a local directory the double's exec sees."""
    pvc = tmp_path / "pvc"
    (pvc / "results/bert").mkdir(parents=True)
    env.config.write_text(env.config.read_text() + f'mount_path = "{pvc}"\n')
    return pvc


async def test_results_on_the_pvc_are_verified_through_a_reader_pod(kube: KubeApi, client: Any, env: Any,
                                                                      tmp_path: Path) -> None:
    pvc = pvc_at(env, tmp_path)
    out = pvc / "results/bert"
    write_checkpoint(out / "last.pt")
    (out / "metrics.json").write_text(json.dumps({"acc": 0.913, "seed": 1}))
    big = os.urandom(9 * 1024 * 1024 + 17)  # more than two exec chunks
    (out / "shard.bin").write_bytes(big)
    r = await until_done(client, root=str(out), roster=["last.pt", "metrics.json", "shard.bin"])
    assert r["passed"], r["findings"]
    pulled = Path(r["dest"])
    assert hashlib.sha256((pulled / "shard.bin").read_bytes()).hexdigest() == hashlib.sha256(big).hexdigest()
    assert json.loads(Path(r["verified_path"]).read_text())["root"] == str(out)
    (reader,) = [name for (_, name), p in kube.pods.items()
                 if p["metadata"]["labels"].get("remote-gpu-trainer/role") == "reader"]
    pod = kube.pods[("ml", reader)]
    assert pod["spec"]["activeDeadlineSeconds"] > 0, "a forgotten reader pod ends itself"
    assert "nvidia.com/gpu" not in json.dumps(pod["spec"]), "the reader holds no GPU"
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "ckpt"
    assert all(cmd[:2] == ["bash", "-c"] for cmd in kube.execs)


async def test_a_missing_roster_file_on_the_pvc_fails_the_verification(kube: KubeApi, client: Any, env: Any,
                                                                        tmp_path: Path) -> None:
    pvc = pvc_at(env, tmp_path)
    (pvc / "results/bert/metrics.json").write_text("{}")
    r = await until_done(client, root=str(pvc / "results/bert"), roster=["metrics.json", "last.pt"])
    assert r["passed"] is False
    assert any("last.pt" in json.dumps(f) for f in r["findings"])
