"""An HTTP double of the Kubernetes API server, for the parts the Kubernetes engine uses: Jobs,
pods, Secrets, pod logs, SelfSubjectAccessReviews, nodes, ResourceQuotas and PVCs in a namespace.
A real HTTP server on 127.0.0.1 (uvicorn) that the real client reaches through a kubeconfig, so
the kubeconfig loading, the requests and the error bodies are exercised as on a cluster. It keeps
objects in memory; tests move a run through recorded states (tests/fixtures/kube/states.yaml)
with `apply`. Created Jobs are validated against the published schema, as the API server would."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

SCHEMA_VERSION = "1.33.0"
STATES = yaml.safe_load((Path(__file__).parents[1] / "fixtures/kube/states.yaml").read_text())
TOKEN = "kube-bearer-token-" + "9f3a1c"  # the kubeconfig's credential: must never reach tool output


def _status(code: int, reason: str, message: str) -> JSONResponse:
    return JSONResponse({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": message, "reason": reason, "code": code}, status_code=code)


def _matches(obj: dict[str, Any], selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        k, _, v = term.partition("=")
        if labels.get(k) != v:
            return False
    return True


class KubeApi:
    def __init__(self) -> None:
        self.port = 0
        self._server: uvicorn.Server | None = None
        self.reset()

    def reset(self) -> None:
        """Forget every object (a fresh cluster on the same server)."""
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.logs: dict[str, bytes] = {}
        self.denied: set[tuple[str, str]] = set()  # (verb, resource) the token may not do
        self.requests: list[str] = []
        self.bodies: list[str] = []  # every request body received, to grep for secrets
        self.nodes: list[dict[str, Any]] = []
        self.quotas: list[dict[str, Any]] = []
        self.pvcs: dict[str, dict[str, Any]] = {}
        self.execs: list[list[str]] = []  # the command of every exec, in order
        self.signals: list[tuple[str, str]] = []  # (pod, kill command) execs, recorded not run

    # --- test controls -------------------------------------------------------------------
    def job_names(self) -> list[str]:
        return [n for (_, n) in self.jobs]

    def apply(self, job: str, scenario: str, *, index: int | None = None, ns: str = "ml") -> str:
        """Move a Job (and its newest pod, or a new one) to a recorded state; returns the pod name."""
        s = STATES[scenario]
        obj = self.jobs[(ns, job)]
        obj["status"] = copy.deepcopy(s.get("job") or {})
        obj["spec"]["suspend"] = bool(s.get("suspend"))
        if "pod" not in s:
            return ""
        name = f"{job}-{index if index is not None else 0}-{len(self.pods):05d}"[:63]
        labels = {**obj["spec"]["template"]["metadata"]["labels"], "job-name": job,
                  "batch.kubernetes.io/job-name": job}
        if index is not None:
            labels["batch.kubernetes.io/job-completion-index"] = str(index)
        keep = [k for k, p in self.pods.items() if p["metadata"]["labels"].get("job-name") == job and
                p["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index") == labels.get(
                    "batch.kubernetes.io/job-completion-index") and p["status"].get("phase") in ("Pending", "Running")]
        if keep:  # the same pod moves on
            name = keep[-1][1]
        self.pods[(ns, name)] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "uid": f"uid-{name}",
                         "creationTimestamp": self.pods.get((ns, name), {}).get("metadata", {}).get(
                             "creationTimestamp") or _now_unique(len(self.pods))},
            "spec": {"nodeName": "gpu-node-7", "containers": obj["spec"]["template"]["spec"]["containers"]},
            "status": copy.deepcopy(s["pod"]),
        }
        return name

    def write_log(self, pod: str, data: bytes) -> None:
        self.logs[pod] = self.logs.get(pod, b"") + data

    # --- server ----------------------------------------------------------------------------
    def start(self) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), log_level="warning", lifespan="off", ws="wsproto")
        self._server = uvicorn.Server(config)
        threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=[sock])),  # type: ignore[union-attr]
                         daemon=True).start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the API double did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True

    def kubeconfig(self, path: Path, namespace: str = "ml") -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "lab",
            "clusters": [{"name": "lab", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "me", "user": {"token": TOKEN}}],
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "me", "namespace": namespace}}],
        }))
        return path

    def app(self) -> Starlette:
        b, c = "/apis/batch/v1/namespaces/{ns}", "/api/v1/namespaces/{ns}"
        return Starlette(routes=[
            Route(b + "/jobs", self._jobs, methods=["GET", "POST"]),
            Route(b + "/jobs/{name}", self._job, methods=["GET", "DELETE"]),
            Route(c + "/pods", self._pods, methods=["GET", "POST"]),
            Route(c + "/pods/{name}", self._pod, methods=["GET", "DELETE"]),
            WebSocketRoute(c + "/pods/{name}/exec", self._exec),
            Route(c + "/pods/{name}/log", self._log, methods=["GET"]),
            Route(c + "/secrets", self._secrets, methods=["POST"]),
            Route(c + "/secrets/{name}", self._secret, methods=["DELETE", "PATCH"]),
            Route(c + "/resourcequotas", self._quotas, methods=["GET"]),
            Route(c + "/persistentvolumeclaims/{name}", self._pvc, methods=["GET"]),
            Route("/api/v1/nodes", self._nodes, methods=["GET"]),
            Route("/api/v1/namespaces/{name}", self._namespace, methods=["GET"]),
            Route("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", self._review, methods=["POST"]),
        ])

    async def _auth(self, request: Request, verb: str, resource: str) -> JSONResponse | None:
        self.requests.append(f"{request.method} {request.url.path}?{request.url.query}")
        body = (await request.body()).decode("utf-8", "replace")
        if body:
            self.bodies.append(body)
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return _status(401, "Unauthorized", "Unauthorized")
        if (verb, resource) in self.denied:
            ns = request.path_params.get("ns", "")
            return _status(403, "Forbidden", f'{resource} is forbidden: User "alice" cannot {verb} resource '
                           f'"{resource.split(".")[0]}" in API group "{"batch" if "batch" in resource else ""}" '
                           f'in the namespace "{ns}"')
        return None

    def _list(self, kind: str, api: str, items: list[dict[str, Any]]) -> JSONResponse:
        return JSONResponse({"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": "1"}, "items": items})

    async def _jobs(self, request: Request) -> Response:
        ns = request.path_params["ns"]
        if request.method == "GET":
            if (err := await self._auth(request, "list", "jobs.batch")) is not None:
                return err
            sel = request.query_params.get("labelSelector", "")
            return self._list("JobList", "batch/v1", [j for (n, _), j in self.jobs.items() if n == ns and
                                                      _matches(j, sel)])
        if (err := await self._auth(request, "create", "jobs.batch")) is not None:
            return err
        job = await request.json()
        try:
            kubernetes_validate.validate(job, SCHEMA_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return _status(422, "Invalid", f"Job.batch is invalid: {exc.message}")
        name = job["metadata"]["name"]
        if (ns, name) in self.jobs:
            return _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
        job["metadata"] |= {"uid": f"uid-{name}", "creationTimestamp": _now_unique(len(self.jobs)),
                            "resourceVersion": "1"}
        job["status"] = {}
        self.jobs[(ns, name)] = job
        return JSONResponse(job, status_code=201)

    async def _job(self, request: Request) -> Response:
        ns, name = request.path_params["ns"], request.path_params["name"]
        verb = "get" if request.method == "GET" else "delete"
        if (err := await self._auth(request, verb, "jobs.batch")) is not None:
            return err
        if (ns, name) not in self.jobs:
            return _status(404, "NotFound", f'jobs.batch "{name}" not found')
        if request.method == "GET":
            return JSONResponse(self.jobs[(ns, name)])
        job = self.jobs.pop((ns, name))
        for key in [k for k, p in self.pods.items() if p["metadata"]["labels"].get("job-name") == name]:
            del self.pods[key]
        for key in [k for k, sec in self.secrets.items() if any(
                o.get("uid") == job["metadata"]["uid"] for o in sec["metadata"].get("ownerReferences") or [])]:
            del self.secrets[key]  # the garbage collector deletes what the Job owned
        return JSONResponse(job)

    async def _pods(self, request: Request) -> Response:
        if request.method == "POST":  # a pod the server creates itself (the PVC reader): scheduled at once
            if (err := await self._auth(request, "create", "pods")) is not None:
                return err
            pod = await request.json()
            kubernetes_validate.validate(pod, SCHEMA_VERSION, strict=True)
            key = (request.path_params["ns"], pod["metadata"]["name"])
            if key in self.pods:
                return _status(409, "AlreadyExists", f'pods "{key[1]}" already exists')
            pod["metadata"]["creationTimestamp"] = _now_unique(len(self.pods))
            pod["status"] = {"phase": "Running"}
            self.pods[key] = pod
            return JSONResponse(pod, status_code=201)
        if (err := await self._auth(request, "list", "pods")) is not None:
            return err
        ns, sel = request.path_params["ns"], request.query_params.get("labelSelector", "")
        return self._list("PodList", "v1", [p for (n, _), p in self.pods.items() if n == ns and _matches(p, sel)])

    async def _pod(self, request: Request) -> Response:
        verb = "get" if request.method == "GET" else "delete"
        if (err := await self._auth(request, verb, "pods")) is not None:
            return err
        key = (request.path_params["ns"], request.path_params["name"])
        if key not in self.pods:
            return _status(404, "NotFound", f'pods "{key[1]}" not found')
        return JSONResponse(self.pods[key] if verb == "get" else self.pods.pop(key))

    async def _exec(self, ws: WebSocket) -> None:
        """exec over the channel protocol (v5.channel.k8s.io): stdin frames until the close-stdin
        frame, then the command's stdout (1) and stderr (2), then its Status (3). The double's
        "container" is this machine: the command runs here, on the paths the test set up."""
        if ws.headers.get("authorization") != f"Bearer {TOKEN}":
            await ws.close(code=1008)
            return
        command = ws.query_params.getlist("command")
        self.execs.append(command)
        await ws.accept(subprotocol="v5.channel.k8s.io")
        stdin = bytearray()
        while True:
            frame = await ws.receive_bytes()
            if frame == bytes((255, 0)):
                break
            if frame[:1] == b"\x00":
                stdin += frame[1:]
        if command[:2] == ["bash", "-c"] and command[2].startswith("kill "):
            # A signal to "every process of the container" must not reach this machine's processes:
            # the double records it and answers as the container would.
            self.signals.append((ws.path_params["name"], command[2]))
            await ws.send_bytes(b"\x03" + json.dumps({"metadata": {}, "status": "Success"}).encode())
            await ws.close()
            return
        proc = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate(bytes(stdin))
        for i in range(0, len(out), 32768):  # the runtime's copy buffer: 32 KiB frames, as a kubelet sends
            await ws.send_bytes(b"\x01" + out[i:i + 32768])
        if err:
            await ws.send_bytes(b"\x02" + err)
        status: dict[str, Any] = {"metadata": {}, "status": "Success"}
        if proc.returncode:
            status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                      "message": f"command terminated with non-zero exit code: exit status {proc.returncode}",
                      "details": {"causes": [{"reason": "ExitCode", "message": str(proc.returncode)}]}}
        await ws.send_bytes(b"\x03" + json.dumps(status).encode())
        await ws.close()

    async def _log(self, request: Request) -> Response:
        if (err := await self._auth(request, "get", "pods/log")) is not None:
            return err
        name = request.path_params["name"]
        if (request.path_params["ns"], name) not in self.pods:
            return _status(404, "NotFound", f'pods "{name}" not found')
        data = self.logs.get(name, b"")
        if tail := request.query_params.get("tailLines"):
            data = b"".join(data.splitlines(keepends=True)[-int(tail):])
        if limit := request.query_params.get("limitBytes"):
            data = data[:int(limit)]
        return Response(data, media_type="text/plain")

    async def _secrets(self, request: Request) -> Response:
        if (err := await self._auth(request, "create", "secrets")) is not None:
            return err
        obj = await request.json()
        key = (request.path_params["ns"], obj["metadata"]["name"])
        if key in self.secrets:
            return _status(409, "AlreadyExists", f'secrets "{key[1]}" already exists')
        self.secrets[key] = obj
        shown = {**obj, "stringData": None, "data": dict.fromkeys(obj.get("stringData") or {}, "***")}
        return JSONResponse(shown, status_code=201)

    async def _secret(self, request: Request) -> Response:
        verb = "patch" if request.method == "PATCH" else "delete"
        if (err := await self._auth(request, verb, "secrets")) is not None:
            return err
        key = (request.path_params["ns"], request.path_params["name"])
        if verb == "patch":  # a merge of metadata, as a strategic merge patch does for these fields
            if key not in self.secrets:
                return _status(404, "NotFound", f'secrets "{key[1]}" not found')
            self.secrets[key]["metadata"] |= (await request.json()).get("metadata") or {}
            return JSONResponse({**self.secrets[key], "stringData": None})
        if self.secrets.pop(key, None) is None:
            return _status(404, "NotFound", f'secrets "{key[1]}" not found')
        return JSONResponse({"kind": "Status", "apiVersion": "v1", "status": "Success"})

    async def _nodes(self, request: Request) -> Response:
        if (err := await self._auth(request, "list", "nodes")) is not None:
            return err
        return self._list("NodeList", "v1", self.nodes)

    async def _quotas(self, request: Request) -> Response:
        if (err := await self._auth(request, "list", "resourcequotas")) is not None:
            return err
        return self._list("ResourceQuotaList", "v1", self.quotas)

    async def _pvc(self, request: Request) -> Response:
        if (err := await self._auth(request, "get", "persistentvolumeclaims")) is not None:
            return err
        name = request.path_params["name"]
        if name not in self.pvcs:
            return _status(404, "NotFound", f'persistentvolumeclaims "{name}" not found')
        return JSONResponse(self.pvcs[name])

    async def _namespace(self, request: Request) -> Response:
        if (err := await self._auth(request, "get", "namespaces")) is not None:
            return err
        name = request.path_params["name"]
        if name != "ml":
            return _status(404, "NotFound", f'namespaces "{name}" not found')
        return JSONResponse({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                             "status": {"phase": "Active"}})

    async def _review(self, request: Request) -> Response:
        if (err := await self._auth(request, "create", "selfsubjectaccessreviews")) is not None:
            return err
        body = await request.json()
        attrs = body["spec"]["resourceAttributes"]
        resource = attrs.get("resource", "") + (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
        if attrs.get("group"):
            resource += f".{attrs['group']}"
        allowed = (attrs.get("verb"), resource) not in self.denied
        return JSONResponse({**body, "status": {"allowed": allowed}}, status_code=201)


def _now_unique(n: int) -> str:
    """A creation time that orders objects the way they were created (seconds apart)."""
    return (dt.datetime(2026, 12, 4, 8, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
