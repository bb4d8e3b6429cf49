"""The Kubernetes scenario against a real cluster (kind, k3s, ...), when KUBECONFIG is set.

    KUBECONFIG=~/.kube/config PORTAL_K8S_FAKE_GPUS=8 \\
        .venv/bin/python -m pytest tests/backends/test_kubernetes_live.py -m kubernetes_live

Without GPU nodes, PORTAL_K8S_FAKE_GPUS=N advertises N ``nvidia.com/gpu`` on every node as an
extended resource (a status patch, Kubernetes' documented way; the scheduler counts them, nothing
uses them). Everything runs in a fresh namespace that is deleted afterwards. Skips without
KUBECONFIG, in CI too (the kubernetes_live marker is exempt from the no-skip rule).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal

import pytest

from scheduling.backends.base import CancelAction, JobState, PreemptAction, StartAction, SubmitRequest

pytestmark = [
    pytest.mark.kubernetes_live,
    pytest.mark.skipif(
        not os.environ.get("KUBECONFIG"), reason="KUBECONFIG is not set: no real cluster to use"
    ),
]


def wait_for(predicate: Callable[[], object], *, timeout: float = 120, what: str = "") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


@pytest.fixture
def live() -> Iterator[object]:
    from kubernetes import client

    from scheduling.backends.kubernetes import KubernetesBackend, KubernetesSettings, api_client

    namespace = f"gpu-portal-test-{uuid.uuid4().hex[:6]}"
    settings = KubernetesSettings(kubeconfig=os.environ["KUBECONFIG"], namespace=namespace, timeout_s=30)
    api = api_client(settings)
    core = client.CoreV1Api(api)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    advertise_fake_gpus(core)
    backend = KubernetesBackend(settings, api=api)
    try:
        yield type(
            "Live", (), {"backend": backend, "core": core, "namespace": namespace, "settings": settings}
        )
    finally:
        core.delete_namespace(namespace)


def advertise_fake_gpus(core) -> None:  # noqa: ANN001 - CoreV1Api
    count = os.environ.get("PORTAL_K8S_FAKE_GPUS")
    if not count:
        return
    patch = [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": count}]
    for node in core.list_node().items:
        core.patch_node_status(node.metadata.name, patch, _content_type="application/json-patch+json")


def healthy_gpu_node(live) -> str:  # noqa: ANN001
    nodes = wait_for(
        lambda: [node for node in live.backend.observe().nodes if node.healthy], what="a GPU node"
    )
    return nodes[0].name


def pods_on(live, job_name: str) -> list[tuple[str, str]]:  # noqa: ANN001
    pods = live.core.list_namespaced_pod(live.namespace, label_selector=f"job-name={job_name}").items
    return [
        (pod.spec.node_name or "", pod.status.phase) for pod in pods if not pod.metadata.deletion_timestamp
    ]


def test_a_portal_job_waits_suspended_runs_on_the_chosen_node_is_suspended_and_restarts(live):
    node = healthy_gpu_node(live)
    request = SubmitRequest(workload_id=1, account="lab/vision", user="alice", gpus=1, gpus_per_node=None,
                            name="live", min_runtime_s=0, resumable=True,
                            metadata={"command": "sleep 600"})  # fmt: skip
    ref = live.backend.submit(request)
    name = ref.split("/")[1]
    time.sleep(3)
    assert pods_on(live, name) == []  # suspended: no pods at all

    live.backend.apply([StartAction(workload_id=1, ref=ref, attempt=1, placement=((node, 1),))])
    wait_for(lambda: pods_on(live, name) == [(node, "Running")], what="the pod running on the chosen node")

    live.backend.apply([PreemptAction(workload_id=1, ref=ref, attempt=1, requeue=True)])
    wait_for(lambda: pods_on(live, name) == [], what="the suspended job's pod to go")
    assert next(job for job in live.backend.observe().jobs if job.ref == ref).state is JobState.WAITING

    live.backend.apply([StartAction(workload_id=1, ref=ref, attempt=2, placement=((node, 1),))])
    wait_for(lambda: pods_on(live, name) == [(node, "Running")], what="the pod to run again")

    live.backend.apply([CancelAction(workload_id=1, ref=ref)])
    wait_for(lambda: all(job.ref != ref for job in live.backend.observe().jobs), what="the job to be deleted")


@pytest.mark.django_db
def test_the_pass_adopts_a_labelled_job_and_runs_it_where_it_decided(live):
    from budgets.models import Allocation, BudgetNode
    from scheduling.models import Cluster, Run
    from scheduling.passes import run_pass

    healthy_gpu_node(live)  # there is somewhere to run
    cluster = Cluster.objects.create(name="live", slug="live", backend_kind="kubernetes", gpu_type="gpu",
                                     backend_settings={"kubeconfig": os.environ["KUBECONFIG"],
                                                       "namespace": live.namespace})  # fmt: skip
    vision = BudgetNode.objects.create(name="Vision", slug="vision", path="vision")
    Allocation.objects.create(node=vision, cluster=cluster, gpus=Decimal(8))
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "native", "labels": {"gpu-portal.io/allocation": "vision"},
                     "annotations": {"gpu-portal.io/min-runtime": "10m"}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": live.settings.image, "command": ["sleep", "600"],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
    }  # fmt: skip
    live.backend.batch.create_namespaced_job(live.namespace, manifest)

    outcome = run_pass(cluster_id=cluster.pk)

    run = Run.objects.get(workload__backend_ref=f"{live.namespace}/native")
    assert outcome.ran and run.placement[0][0] in {node.name for node in live.backend.observe().nodes}
    wait_for(
        lambda: pods_on(live, "native") == [(run.placement[0][0], "Running")],
        what="the pod on the chosen node",
    )
