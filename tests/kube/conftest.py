"""A Kubernetes host backed by the API double (tests/support/kube_api.py), in the inventory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.kube_api import KubeApi


@pytest.fixture(scope="session")
def kube_server() -> Iterator[KubeApi]:
    api = KubeApi()
    api.start()
    yield api
    api.stop()


@pytest.fixture
def kube(kube_server: KubeApi, env: Any, tmp_path: Path) -> KubeApi:
    """The double, emptied, and an inventory naming it as host `gpu-k8s`."""
    kube_server.reset()
    cfg = kube_server.kubeconfig(tmp_path / "kubeconfig")
    env.config.write_text(
        '[hosts.gpu-k8s]\ndestination = "kubernetes"\n\n[hosts.gpu-k8s.kubernetes]\n'
        f'kubeconfig = "{cfg}"\nimage = "nvcr.io/nvidia/pytorch:24.10-py3"\ngpus = 1\nmem = "64Gi"\n'
        'pvc = "ckpt"\n')
    return kube_server
