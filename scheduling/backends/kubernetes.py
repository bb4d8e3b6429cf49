"""The Kubernetes backend: the Kueue mechanism without Kueue, through the official client. No policy here.

- Jobs (batch/v1) are created suspended and labelled with their allocation (``gpu-portal.io/...``,
  see kubernetes_parse); minimum runtime and resumability are annotations. A suspended Job has no
  pods, so it cannot start before the portal admits it.
- start: one JSON Patch that injects the placement (a nodeSelector on the node's hostname for one
  pod; for a gang, an Indexed Job, a required node affinity over the chosen nodes plus anti-affinity
  so each pod gets its own node), records the attempt and placement, and sets ``suspend: false``.
  Kubernetes allows scheduling directives to change exactly while a Job is suspended.
- preempt, resumable: ``suspend: true`` (the Job controller deletes the pods; the Job waits again);
  preempt, not resumable, and cancel: delete the Job (background propagation). Either way the
  kubelet sends SIGTERM and kills after the pod's ``terminationGracePeriodSeconds``: the portal
  sets it to the cluster's ``preemption_grace_s`` on Jobs it creates (a native Job keeps its own).
- nodes: allocatable ``nvidia.com/gpu``, the Ready condition, cordons and NoSchedule/NoExecute taints.
An API server that does not answer (connection refused, timeout, 5xx) raises BackendUnavailable.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from .base import (
    Action,
    ActionsRefused,
    BackendUnavailable,
    CancelAction,
    ClusterState,
    JobState,
    ObservedJob,
    ObservedNode,
    PreemptAction,
    StartAction,
    SubmitRequest,
)
from .kubernetes_parse import (
    ALLOCATION_LABEL,
    ATTEMPT_ANNOTATION,
    CHECKPOINT_ANNOTATION,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    MIN_RUNTIME_ANNOTATION,
    PATH_ANNOTATION,
    PENDING_CONDITION,
    PLACEMENT_ANNOTATION,
    RESUMABLE_ANNOTATION,
    SUSPENDED_BY_ANNOTATION,
    USER_ANNOTATION,
    WORKLOAD_LABEL,
    KubeJob,
    KubeNode,
    checkpoint_interval,
    parse_jobs,
    parse_nodes,
)
from .slurm_accounts import account_name, path_for_account
from .slurm_parse import parse_bool, parse_duration

if TYPE_CHECKING:
    from scheduling.models import Cluster

logger = logging.getLogger(__name__)
NOTE_UPDATES_PER_PASS = 100  # Jobs whose pending-reason condition and Event a pass writes


@dataclass(frozen=True, slots=True)
class KubernetesSettings:
    """What a cluster's ``backend_settings`` may say about its Kubernetes (all optional)."""

    namespace: str = "default"
    host: str | None = None  # an API server URL without credentials (tests); else the kubeconfig
    kubeconfig: str | None = None  # unset: $KUBECONFIG / ~/.kube/config, or in-cluster config
    context: str | None = None
    timeout_s: float = 10.0
    gpu_type: str = "gpu"  # for nodes without the GPU product label
    gpu_type_label: str = "nvidia.com/gpu.product"
    domain_label: str = "topology.kubernetes.io/zone"
    tolerated_taints: tuple[str, ...] = (GPU_RESOURCE,)  # GPU work tolerates the usual GPU-node taint
    default_min_runtime_s: float | None = None
    default_resumable: bool = False
    image: str = "busybox:1.36"  # for workloads submitted through the API without an image

    @classmethod
    def from_mapping(cls, settings: dict, *, gpu_type: str = "gpu") -> KubernetesSettings:
        known = {name: settings[name] for name in cls.__slots__ if name in settings}
        if "tolerated_taints" in known:
            known["tolerated_taints"] = tuple(known["tolerated_taints"])
        return cls(**{"gpu_type": gpu_type, **known})


def api_client(settings: KubernetesSettings) -> client.ApiClient:
    if settings.host:
        configuration = client.Configuration()
        configuration.host = settings.host
        return client.ApiClient(configuration)
    try:
        return config.new_client_from_config(config_file=settings.kubeconfig, context=settings.context)
    except config.ConfigException:
        config.load_incluster_config()
        return client.ApiClient()


class KubernetesBackend:
    """observe / apply / submit against one Kubernetes cluster (see the module docstring)."""

    name = "Kubernetes"

    def __init__(
        self, settings: KubernetesSettings | None = None, *, api: client.ApiClient | None = None
    ) -> None:
        self.settings = settings or KubernetesSettings()
        self.api = api or api_client(self.settings)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> KubernetesBackend:
        settings = cluster.backend_settings or {}
        return cls(KubernetesSettings.from_mapping(settings, gpu_type=cluster.gpu_type))

    def _call(self, method: Callable[..., Any], *args: object, **kwargs: object) -> dict:
        """One API call with the timeout; JSON in, plain dict out; unreachable -> BackendUnavailable."""
        try:
            response = method(
                *args, _request_timeout=self.settings.timeout_s, _preload_content=False, **kwargs
            )
        except ApiException as error:
            if error.status in (429,) or (error.status or 0) >= 500:
                raise BackendUnavailable(
                    f"the Kubernetes API answered {error.status}: {error.reason}"
                ) from error
            raise
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise BackendUnavailable(f"the Kubernetes API did not answer: {error}") from error
        return json.loads(response.data or b"{}")

    # -- reading ---------------------------------------------------------------------------------

    def nodes(self) -> tuple[KubeNode, ...]:
        return parse_nodes(self._call(self.core.list_node))

    def jobs(self) -> tuple[KubeJob, ...]:
        """Every Job in the namespace that carries an allocation label."""
        document = self._call(
            self.batch.list_namespaced_job, self.settings.namespace, label_selector=ALLOCATION_LABEL
        )
        return parse_jobs(document)

    def observe(self) -> ClusterState:
        nodes = tuple(self.observed_node(node) for node in self.nodes() if node.gpus > 0)
        jobs = tuple(self.observed_job(job) for job in self.jobs())
        return ClusterState(observed_at=time.time(), nodes=nodes, jobs=jobs)

    def observed_node(self, node: KubeNode) -> ObservedNode:
        problems = node.problems(frozenset(self.settings.tolerated_taints))
        return ObservedNode(
            name=node.name,
            gpus=node.gpus,
            gpu_type=node.labels.get(self.settings.gpu_type_label) or self.settings.gpu_type,
            domain=node.labels.get(self.settings.domain_label) or "default",
            healthy=not problems,
            reason=", ".join(problems),
        )

    def observed_job(self, job: KubeJob) -> ObservedJob:
        state = observed_state(job)
        ran = state is JobState.RUNNING or (state in ENDED and job.started_at is not None)
        annotations, workload = job.annotations, job.labels.get(WORKLOAD_LABEL, "")
        return ObservedJob(
            ref=job.ref,
            state=state,
            workload_id=int(workload) if workload.isdigit() else None,
            attempt=attempt(job),
            nodes=placement_nodes(job) if ran else (),
            started_at=job.started_at if ran else None,
            ended_at=job.ended_at if state in ENDED else None,
            account=annotations.get(PATH_ANNOTATION)
            or path_for_account(job.labels.get(ALLOCATION_LABEL, "")),
            user=annotations.get(USER_ANNOTATION, ""),
            gpus=job.gpus_per_pod * job.pods,
            gpus_per_node=job.gpus_per_pod or None,
            min_runtime_s=self.min_runtime_s(job),
            resumable=self.resumable(job),
            name=job.name,
            submitted_at=job.created_at,
            max_runtime_s=job.deadline_s,
            held_by=suspended_by_user(job),
            checkpoint_interval_s=checkpoint_interval(annotations),
        )

    def min_runtime_s(self, job: KubeJob) -> float | None:
        declared = parse_duration(job.annotations.get(MIN_RUNTIME_ANNOTATION, ""))
        return declared if declared is not None else self.settings.default_min_runtime_s

    def resumable(self, job: KubeJob) -> bool:
        declared = parse_bool(job.annotations.get(RESUMABLE_ANNOTATION, ""))
        return declared if declared is not None else self.settings.default_resumable

    # -- writing ---------------------------------------------------------------------------------

    def apply(self, actions: list[Action]) -> None:
        """Push actions in order; each checks the Job's current state first (idempotent)."""
        if not actions:
            return
        current = {job.ref: job for job in self.jobs()}
        refused: dict[int, str] = {}
        for action in actions:
            job = current.get(action.ref)
            if job is None:
                logger.warning("Kubernetes Job %s is gone; skipping %s", action.ref, type(action).__name__)
                continue
            try:
                self._apply_one(action, job)
            except ApiException as error:
                logger.warning(
                    "Kubernetes refused %s on %s: %s", type(action).__name__, action.ref, error.reason
                )
                refused[action.workload_id] = (
                    f"Kubernetes refused Job {action.ref}: {error.status} {error.reason}"
                )
            except SuspendedByUser as error:
                refused[action.workload_id] = str(error)
        if refused:
            raise ActionsRefused(refused)

    def _apply_one(self, action: Action, job: KubeJob) -> None:
        state = observed_state(job)
        if state in ENDED:
            return
        if isinstance(action, StartAction):
            if suspended_by_user(job):
                raise SuspendedByUser(f"Job {job.ref} was suspended by {suspended_by_user(job)}; it stays so")
            if state is JobState.WAITING:
                self._patch(job, start_patch(job, action.placement, attempt=action.attempt))
        elif isinstance(action, PreemptAction) and action.requeue:
            if state is JobState.RUNNING:
                mark = {"op": "add", "path": f"/metadata/annotations/{_escape(SUSPENDED_BY_ANNOTATION)}",
                        "value": "portal"}  # fmt: skip
                self._patch(job, [mark, {"op": "replace", "path": "/spec/suspend", "value": True}])
        elif isinstance(action, PreemptAction):  # the pods get their terminationGracePeriodSeconds
            grace = {"grace_period_seconds": action.grace_s} if action.grace_s > 0 else {}
            self._call(
                self.batch.delete_namespaced_job,
                job.name,
                job.namespace,
                propagation_policy="Background",
                **grace,
            )
        elif isinstance(action, CancelAction):
            self._call(
                self.batch.delete_namespaced_job, job.name, job.namespace, propagation_policy="Background"
            )

    def _patch(self, job: KubeJob, operations: list[dict]) -> None:
        self._call(
            self.batch.patch_namespaced_job, job.name, job.namespace, operations,
            _content_type="application/json-patch+json",
        )  # fmt: skip

    def annotate(self, notes: dict[str, str]) -> int:
        """Put each waiting Job's pending reason where `kubectl describe job` shows it, as Kueue does:
        a ``GPUPortalPending`` condition in the Job's status and an Event on the Job. Only notes that
        differ from the Job's current condition are written. Returns how many Jobs changed."""
        jobs = {job.ref: job for job in self.jobs()}
        written = 0
        for ref, note in notes.items():  # in queue order: the first in line are told first
            job = jobs.get(ref)
            if job is None or observed_state(job) is not JobState.WAITING:
                continue
            mine = next((c for c in job.conditions if c.get("type") == PENDING_CONDITION), None)
            if mine is not None and mine.get("message") == note:
                continue
            code = note.split(" ", 1)[0].rstrip(":")
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            condition = {"type": PENDING_CONDITION, "status": "True", "reason": _camel(code),
                         "message": note, "lastProbeTime": now, "lastTransitionTime": now}  # fmt: skip
            others = [c for c in job.conditions if c.get("type") != PENDING_CONDITION]
            patch = [{"op": "add", "path": "/status/conditions", "value": [*others, condition]}]
            self._call(
                self.batch.patch_namespaced_job_status, job.name, job.namespace, patch,
                _content_type="application/json-patch+json",
            )  # fmt: skip
            self._call(self.core.create_namespaced_event, job.namespace, pending_event(job, condition))
            written += 1
            if written >= NOTE_UPDATES_PER_PASS:  # the rest follow in later passes
                break
        return written

    def submit(self, request: SubmitRequest) -> str:
        """Create a suspended Job for a workload submitted through the portal's API; returns its ref."""
        manifest = job_manifest(request, namespace=self.settings.namespace, image=self.settings.image)
        self._call(self.batch.create_namespaced_job, self.settings.namespace, manifest)
        return f"{self.settings.namespace}/{manifest['metadata']['name']}"


ENDED = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.NODE_FAILURE})


class SuspendedByUser(RuntimeError):
    """A start refused because someone else than the portal suspended the Job after it ran."""


def suspended_by_user(job: KubeJob) -> str:
    """Who suspended a Job the portal had started, when the portal did not (its own preemption
    marks the Job); "" otherwise. Such a Job is the user's hold: the portal never unsuspends it."""
    if not job.suspended or job.outcome or PLACEMENT_ANNOTATION not in job.annotations:
        return ""
    if job.annotations.get(SUSPENDED_BY_ANNOTATION) == "portal":
        return ""
    return job.annotations.get(USER_ANNOTATION) or "a Kubernetes user"


def _camel(code: str) -> str:
    """FAIR_SHARE -> FairShare (Kubernetes reasons are CamelCase)."""
    return "".join(part.capitalize() for part in code.split("_")) or "Pending"


def pending_event(job: KubeJob, condition: dict) -> dict:
    """A core/v1 Event on the Job, as `kubectl describe job` lists it."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{job.name}.", "namespace": job.namespace},
        "involvedObject": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job.name,
            "namespace": job.namespace,
            "uid": job.uid,
        },  # fmt: skip
        "reason": condition["reason"],
        "message": condition["message"],
        "type": "Normal",
        "source": {"component": "gpu-portal"},
        "firstTimestamp": condition["lastTransitionTime"],
        "lastTimestamp": condition["lastTransitionTime"],
        "count": 1,
    }


def observed_state(job: KubeJob) -> JobState:
    """Finished Jobs by their condition; a suspended one waits; an unsuspended one was admitted."""
    if job.outcome:
        return JobState.COMPLETED if job.outcome == "Complete" else JobState.FAILED
    return JobState.WAITING if job.suspended else JobState.RUNNING


def attempt(job: KubeJob) -> int:
    written = job.annotations.get(ATTEMPT_ANNOTATION, "")
    return int(written) if written.isdigit() else 1


def placement_nodes(job: KubeJob) -> tuple[str, ...]:
    written = job.annotations.get(PLACEMENT_ANNOTATION, "")
    return tuple(sorted(node for node in written.split(",") if node))


def _escape(key: str) -> str:
    """A map key as a JSON Pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def start_patch(job: KubeJob, placement: tuple[tuple[str, int], ...], *, attempt: int) -> list[dict]:
    """The JSON Patch that admits a suspended Job on the chosen nodes."""
    nodes = sorted(node for node, _gpus in placement)
    operations = [] if job.has_annotations else [{"op": "add", "path": "/metadata/annotations", "value": {}}]
    for key, value in ((PLACEMENT_ANNOTATION, ",".join(nodes)), (ATTEMPT_ANNOTATION, str(attempt))):
        operations.append({"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value})
    if SUSPENDED_BY_ANNOTATION in job.annotations:  # running again: the portal's suspension is over
        operations.append(
            {"op": "remove", "path": f"/metadata/annotations/{_escape(SUSPENDED_BY_ANNOTATION)}"}
        )
    if job.pods == 1:
        selector = {
            "op": "add",
            "path": "/spec/template/spec/nodeSelector",
            "value": {HOSTNAME_LABEL: nodes[0]},
        }
        operations.append(selector)
    else:
        operations.append(
            {"op": "add", "path": "/spec/template/spec/affinity", "value": gang_affinity(job, nodes)}
        )
    return [*operations, {"op": "replace", "path": "/spec/suspend", "value": False}]


def gang_affinity(job: KubeJob, nodes: list[str]) -> dict:
    """Pods only on the chosen nodes, and never two of the gang's pods on one node."""
    on_chosen_nodes = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": nodes}]}
    own_pods = {"matchLabels": {"batch.kubernetes.io/job-name": job.name}}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [on_chosen_nodes]}
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": own_pods, "topologyKey": HOSTNAME_LABEL}
            ]
        },
    }


def job_manifest(request: SubmitRequest, *, namespace: str, image: str) -> dict:
    """A suspended batch/v1 Job for a workload; a gang (GPUs over several nodes) is an Indexed Job."""
    per_pod = (
        request.gpus_per_node
        if request.gpus_per_node and request.gpus > request.gpus_per_node
        else request.gpus
    )
    pods = request.gpus // per_pod
    labels = {ALLOCATION_LABEL: account_name(request.account), WORKLOAD_LABEL: str(request.workload_id)}
    annotations = {
        PATH_ANNOTATION: request.account,
        MIN_RUNTIME_ANNOTATION: f"{int(request.min_runtime_s)}s",
        RESUMABLE_ANNOTATION: "true" if request.resumable else "false",
        USER_ANNOTATION: request.user,
    }
    if request.checkpoint_interval_s:
        annotations[CHECKPOINT_ANNOTATION] = f"{int(request.checkpoint_interval_s)}s"
    spec = {
        "suspend": True,
        "parallelism": pods,
        "completions": pods,
        "completionMode": "Indexed" if pods > 1 else "NonIndexed",
        "backoffLimit": 0,
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": pod_spec(request, per_pod=per_pod, image=image),
        },
    }
    if request.max_runtime_s:
        spec["activeDeadlineSeconds"] = int(request.max_runtime_s)
    metadata = {"name": f"workload-{request.workload_id}", "namespace": namespace, "labels": labels}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**metadata, "annotations": annotations},
        "spec": spec,
    }


def pod_spec(request: SubmitRequest, *, per_pod: int, image: str) -> dict:
    command = request.metadata.get("command", "sleep infinity")
    container = {
        "name": "main",
        "image": request.metadata.get("image", image),
        "command": ["sh", "-c", command],
        "resources": {"limits": {GPU_RESOURCE: str(per_pod)}},
    }
    toleration = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
    spec: dict = {"restartPolicy": "Never", "containers": [container], "tolerations": [toleration]}
    if request.grace_s > 0:  # a preemption (suspend or delete) signals, then kills after this
        spec["terminationGracePeriodSeconds"] = int(request.grace_s)
    return spec
