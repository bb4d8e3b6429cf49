"""A small Kubernetes API server on loopback, for the Kubernetes adapter's tests over real HTTP.

It serves what the adapter uses — list nodes; list, get, create, JSON-Patch and delete Jobs — with
the API server's rules that matter here (a Job's pod template may change only while it is
suspended; unknown names are 404s), and plays the Job controller: unsuspending a Job starts it
(``status.startTime``, active pods), suspending clears it; ``finish()`` completes or fails one.
Every Job object it stores after a write is kept in ``written`` for schema validation.
Times come from ``clock`` so tests can move time without sleeping.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

JOBS = re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs(?:/([^/]+))?(/status)?$")
EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_node(name: str, gpus: int = 8, *, ready: bool = True, zone: str = "zone-a", **spec: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone},
        },
        "spec": dict(spec),
        "status": {
            "allocatable": {"cpu": "64", "nvidia.com/gpu": str(gpus)},
            "capacity": {"cpu": "64", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


class PatchError(ValueError):
    pass


def json_patch(document: dict, operations: list[dict]) -> dict:
    """RFC 6902 add / replace / remove (what the adapter sends)."""
    result = copy.deepcopy(document)
    for operation in operations:
        *parents, last = [
            part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]
        ]
        target = result
        for part in parents:
            if part not in target:
                raise PatchError(f"path {operation['path']} does not exist")
            target = target[part]
        if operation["op"] in ("add", "replace"):
            if operation["op"] == "replace" and last not in target:
                raise PatchError(f"cannot replace missing {operation['path']}")
            target[last] = copy.deepcopy(operation["value"])
        elif operation["op"] == "remove":
            target.pop(last)
    return result


class FakeKubernetes:
    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.nodes: dict[str, dict] = {}
        self.jobs: dict[tuple[str, str], dict] = {}
        self.written: list[dict] = []
        self.events: list[dict] = []
        self.requests: list[tuple[str, str]] = []
        self.unavailable = False
        self.deletes: list[tuple[str, dict[str, str]]] = []  # ("namespace/name", query) per Job deleted
        self.denied_patches: set[str] = set()  # Job names an admission webhook refuses to change
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FakeKubernetes:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what a user or the cluster does -------------------------------------------------------

    def add_node(self, node: dict) -> None:
        self.nodes[node["metadata"]["name"]] = node

    def create_job(self, manifest: dict) -> dict:
        """What `kubectl apply` of a researcher's manifest does."""
        with self.lock:
            return self._create(manifest)

    def finish(self, ref: str, *, succeeded: bool = True) -> None:
        with self.lock:
            job = self.jobs[tuple(ref.split("/"))]
            now = rfc3339(self.clock())
            kind = "Complete" if succeeded else "Failed"
            job["status"].update(
                active=0, conditions=[{"type": kind, "status": "True", "lastTransitionTime": now}]
            )
            if succeeded:
                job["status"]["completionTime"] = now

    def job(self, ref: str) -> dict:
        return self.jobs[tuple(ref.split("/"))]

    def suspend(self, ref: str) -> None:
        """What `kubectl patch job ... -p '{"spec":{"suspend":true}}'` by the Job's owner does."""
        with self.lock:
            key = tuple(ref.split("/"))
            self.jobs[key] = self._patch(key, [{"op": "replace", "path": "/spec/suspend", "value": True}])

    # -- the API server --------------------------------------------------------------------------

    def _create(self, manifest: dict) -> dict:
        job = copy.deepcopy(manifest)
        metadata = job.setdefault("metadata", {})
        metadata.setdefault("namespace", "default")
        key = (metadata["namespace"], metadata["name"])
        if key in self.jobs:
            raise Conflict(f'jobs.batch "{key[1]}" already exists')
        metadata.update(uid=str(uuid.uuid4()), creationTimestamp=rfc3339(self.clock()))
        job["status"] = {}
        self._control(job, was_suspended=True)
        self.jobs[key] = job
        self.written.append(copy.deepcopy(job))
        return job

    def _patch(self, key: tuple[str, str], operations: list[dict]) -> dict:
        old = self.jobs[key]
        if key[1] in self.denied_patches:
            raise Invalid(f'admission webhook "policy.example.org" denied the request: {key[1]} is frozen')
        new = json_patch(old, operations)
        was_suspended = bool(old["spec"].get("suspend"))
        if new["spec"]["template"] != old["spec"]["template"] and not was_suspended:
            raise Invalid("spec.template: field is immutable (only while the Job is suspended)")
        self._control(new, was_suspended=was_suspended)
        self.jobs[key] = new
        self.written.append(copy.deepcopy(new))
        return new

    def _control(self, job: dict, *, was_suspended: bool) -> None:
        """The Job controller's part: start pods on unsuspend, remove them on suspend."""
        status, suspended = job["status"], bool(job["spec"].get("suspend"))
        if any(c.get("type") in ("Complete", "Failed") for c in status.get("conditions") or ()):
            return
        if was_suspended and not suspended:
            status.update(startTime=rfc3339(self.clock()), active=job["spec"].get("parallelism", 1))
        elif suspended:
            status.pop("startTime", None)
            status["active"] = 0

    def handle(self, method: str, path: str, query: dict[str, str], body: object) -> tuple[int, dict]:
        self.requests.append((method, path))
        if self.unavailable:
            return 503, status_body(503, "ServiceUnavailable", "the API server is down")
        with self.lock:
            try:
                return self._route(method, path, query, body)
            except KeyError:
                return 404, status_body(404, "NotFound", f"{path} not found")
            except Conflict as error:
                return 409, status_body(409, "AlreadyExists", str(error))
            except (Invalid, PatchError) as error:
                return 422, status_body(422, "Invalid", str(error))

    def _route(self, method: str, path: str, query: dict[str, str], body: object) -> tuple[int, dict]:
        if path == "/api/v1/nodes" and method == "GET":
            return 200, {
                "kind": "NodeList",
                "apiVersion": "v1",
                "metadata": {},
                "items": list(self.nodes.values()),
            }
        events = EVENTS.match(path)
        if events is not None and method == "POST":
            event = {
                **body,
                "metadata": {
                    **body["metadata"],
                    "name": f"{body['metadata'].get('generateName', 'e.')}{len(self.events)}",
                },
            }
            self.events.append(event)
            self.written.append(copy.deepcopy(event))
            return 201, event
        match = JOBS.match(path)
        if match is None:
            raise KeyError(path)
        namespace, name, status = match.groups()
        if status and method == "PATCH":  # the status subresource: only .status changes
            key = (namespace, name)
            patched = json_patch(self.jobs[key], body)
            self.jobs[key] = {**self.jobs[key], "status": patched["status"]}
            self.written.append(copy.deepcopy(self.jobs[key]))
            return 200, self.jobs[key]
        if name is None and method == "GET":
            items = [job for (ns, _), job in sorted(self.jobs.items()) if ns == namespace]
            wanted = query.get("labelSelector", "")
            items = [job for job in items if not wanted or wanted in (job["metadata"].get("labels") or {})]
            return 200, {"kind": "JobList", "apiVersion": "batch/v1", "metadata": {}, "items": items}
        if name is None and method == "POST":
            return 201, self._create({**body, "metadata": {**body["metadata"], "namespace": namespace}})
        key = (namespace, name)
        if method == "GET":
            return 200, self.jobs[key]
        if method == "PATCH":
            return 200, self._patch(key, body)
        if method == "DELETE":
            self.deletes.append((f"{namespace}/{name}", dict(query)))
            self.jobs.pop(key)
            return 200, status_body(200, "", "deleted")
        raise KeyError(path)


class Conflict(Exception):
    pass


class Invalid(Exception):
    pass


def status_body(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure" if code >= 400 else "Success",
            "reason": reason, "message": message, "code": code}  # fmt: skip


def _handler(fake: FakeKubernetes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            path, _, query_string = self.path.partition("?")
            query = dict(parse_qsl(query_string))
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            code, answer = fake.handle(self.command, path, query, body)
            data = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass

    return Handler
