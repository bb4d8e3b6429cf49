"""Kubernetes Node and batch/v1 Job objects (the API's JSON) parsed into plain classes.

The only module that knows the API's field names on the way in. Labels and annotations the portal
reads and writes are named here too (the ``gpu-portal.io/`` prefix), so a researcher's manifest
and the adapter agree on one vocabulary:

    metadata.labels:       gpu-portal.io/allocation   the allocation as a label value ("ai2.nlp.olmo")
                           gpu-portal.io/workload     the portal's workload id (jobs created by the portal)
    metadata.annotations:  gpu-portal.io/allocation-path   the allocation's slug path ("ai2/nlp/olmo")
                           gpu-portal.io/min-runtime       "2h", "30m", "90s" (cluster default if absent)
                           gpu-portal.io/resumable         "true" / "false" (cluster default if absent)
                           gpu-portal.io/checkpoint-interval  "30m": how often it saves progress
                           gpu-portal.io/user              who submitted it
                           gpu-portal.io/attempt           written by the portal when it starts the job
                           gpu-portal.io/placement         the nodes the portal chose ("n1,n2")
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .slurm_parse import parse_duration

PREFIX = "gpu-portal.io/"
ALLOCATION_LABEL = PREFIX + "allocation"
WORKLOAD_LABEL = PREFIX + "workload"
PATH_ANNOTATION = PREFIX + "allocation-path"
MIN_RUNTIME_ANNOTATION = PREFIX + "min-runtime"
RESUMABLE_ANNOTATION = PREFIX + "resumable"
CHECKPOINT_ANNOTATION = PREFIX + "checkpoint-interval"
USER_ANNOTATION = PREFIX + "user"
ATTEMPT_ANNOTATION = PREFIX + "attempt"
PLACEMENT_ANNOTATION = PREFIX + "placement"
SUSPENDED_BY_ANNOTATION = PREFIX + "suspended-by"  # "portal" while the portal's own preemption suspends it
PENDING_CONDITION = "GPUPortalPending"  # the Job condition that carries the portal's pending reason
GPU_RESOURCE = "nvidia.com/gpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"
BLOCKING_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class KubeNode:
    name: str
    gpus: int  # allocatable nvidia.com/gpu
    labels: dict[str, str]
    ready: bool
    unschedulable: bool  # cordoned
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect)

    def problems(self, tolerated: frozenset[str]) -> tuple[str, ...]:
        """Why no new GPU work may land here, in Kubernetes' words; empty when it is healthy."""
        found = [] if self.ready else ["NotReady"]
        if self.unschedulable:
            found.append("cordoned")
        found += [
            f"taint {key}{'=' + value if value else ''}:{effect}"
            for key, value, effect in self.taints
            if effect in BLOCKING_TAINT_EFFECTS and key not in tolerated
        ]
        return tuple(found)


@dataclass(frozen=True, slots=True)
class KubeJob:
    namespace: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    suspended: bool
    pods: int  # parallelism: one pod per node of the gang
    indexed: bool
    gpus_per_pod: int
    started_at: float | None
    ended_at: float | None
    outcome: str  # "" while not finished, else "Complete" or "Failed"
    has_annotations: bool
    created_at: float | None = None
    deadline_s: float | None = None  # spec.activeDeadlineSeconds: the declared maximum runtime
    uid: str = ""
    conditions: tuple[dict, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def checkpoint_interval(annotations: dict[str, str]) -> float | None:
    """The ``gpu-portal.io/checkpoint-interval`` annotation ("30m", "1h", "900s"): how often the
    Job saves its progress, so a preemption loses at most that much. None when absent, unreadable
    or not positive."""
    declared = parse_duration(annotations.get(CHECKPOINT_ANNOTATION, ""))
    return declared if declared is not None and declared > 0 else None


def parse_time(text: str | None) -> float | None:
    """RFC 3339 ("2026-11-29T10:00:00Z") to Unix seconds."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def quantity(text: object) -> int:
    """An integer resource quantity ("8", 8); GPUs are never fractional."""
    try:
        return int(str(text))
    except ValueError:
        return 0


def node_from_json(data: dict) -> KubeNode:
    status, spec = data.get("status") or {}, data.get("spec") or {}
    conditions = {item.get("type"): item.get("status") for item in status.get("conditions") or ()}
    taints = tuple(
        (taint.get("key", ""), taint.get("value") or "", taint.get("effect", ""))
        for taint in spec.get("taints") or ()
    )
    return KubeNode(
        name=data["metadata"]["name"],
        gpus=quantity((status.get("allocatable") or {}).get(GPU_RESOURCE, 0)),
        labels=dict(data["metadata"].get("labels") or {}),
        ready=conditions.get("Ready") == "True",
        unschedulable=bool(spec.get("unschedulable")),
        taints=taints,
    )


def _gpus_per_pod(template_spec: dict) -> int:
    total = 0
    for container in template_spec.get("containers") or ():
        resources = container.get("resources") or {}
        wanted = (resources.get("limits") or {}).get(GPU_RESOURCE) or (resources.get("requests") or {}).get(
            GPU_RESOURCE
        )
        total += quantity(wanted or 0)
    return total


def _finished(status: dict) -> tuple[str, float | None]:
    for condition in status.get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            ended = status.get("completionTime") or condition.get("lastTransitionTime")
            return condition["type"], parse_time(ended)
    return "", None


def job_from_json(data: dict) -> KubeJob:
    metadata, spec, status = data["metadata"], data.get("spec") or {}, data.get("status") or {}
    outcome, ended_at = _finished(status)
    return KubeJob(
        namespace=metadata.get("namespace", "default"),
        name=metadata["name"],
        labels=dict(metadata.get("labels") or {}),
        annotations=dict(metadata.get("annotations") or {}),
        suspended=bool(spec.get("suspend")),
        pods=int(spec.get("parallelism") or 1),
        indexed=spec.get("completionMode") == "Indexed",
        gpus_per_pod=_gpus_per_pod(((spec.get("template") or {}).get("spec")) or {}),
        started_at=parse_time(status.get("startTime")),
        ended_at=ended_at,
        outcome=outcome,
        has_annotations="annotations" in metadata and metadata["annotations"] is not None,
        created_at=parse_time(metadata.get("creationTimestamp")),
        deadline_s=float(spec["activeDeadlineSeconds"]) if spec.get("activeDeadlineSeconds") else None,
        uid=metadata.get("uid") or "",
        conditions=tuple(status.get("conditions") or ()),
    )


def parse_nodes(document: dict) -> tuple[KubeNode, ...]:
    """A NodeList into nodes sorted by name."""
    return tuple(sorted(map(node_from_json, document.get("items") or ()), key=lambda node: node.name))


def parse_jobs(document: dict) -> tuple[KubeJob, ...]:
    """A JobList into jobs sorted by namespace and name."""
    return tuple(sorted(map(job_from_json, document.get("items") or ()), key=lambda job: job.ref))
