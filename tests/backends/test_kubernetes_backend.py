"""The Kubernetes adapter over HTTP against the loopback fake API server; every manifest it writes
is validated against the Kubernetes OpenAPI schema."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes_validate
import pytest

from scheduling.backends.base import (
    BackendUnavailable,
    CancelAction,
    JobState,
    PreemptAction,
    StartAction,
    SubmitRequest,
)
from scheduling.backends.kubernetes import KubernetesBackend, KubernetesSettings

from .kubernetes_fake import FakeKubernetes, gpu_node

SCHEMA_VERSION = kubernetes_validate.latest_version()


def assert_schema_valid(manifest: dict) -> None:
    kubernetes_validate.validate(manifest, SCHEMA_VERSION, strict=True)


def native_job(
    name: str, *, gpus: int = 8, pods: int = 1, annotations: dict | None = None, **labels: str
) -> dict:
    """A researcher's manifest, created suspended and labelled with the allocation, as they would."""
    spec = {
        "suspend": True,
        "parallelism": pods,
        "completions": pods,
        "completionMode": "Indexed" if pods > 1 else "NonIndexed",
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "train",
                        "image": "python:3.12",
                        "command": ["python", "train.py"],
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                    }
                ],  # fmt: skip
            }
        },
    }
    metadata = {"name": name, "labels": {"gpu-portal.io/allocation": "lab.language", **labels}}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


@pytest.fixture
def fake() -> Iterator[FakeKubernetes]:
    server = FakeKubernetes().start()
    for name in ("n1", "n2", "n3"):
        server.add_node(gpu_node(name))
    yield server
    server.stop()
    for manifest in server.written:
        assert_schema_valid(manifest)


@pytest.fixture
def backend(fake: FakeKubernetes) -> KubernetesBackend:
    return KubernetesBackend(KubernetesSettings(host=fake.url, timeout_s=3, default_min_runtime_s=600))


def observed(backend: KubernetesBackend, ref: str):  # noqa: ANN201 - ObservedJob
    return next(job for job in backend.observe().jobs if job.ref == ref)


def start(backend: KubernetesBackend, ref: str, *placement: tuple[str, int], attempt: int = 1) -> None:
    backend.apply([StartAction(workload_id=1, ref=ref, attempt=attempt, placement=placement)])


def test_the_schema_validator_rejects_a_broken_manifest():
    broken = native_job("x")
    broken["spec"]["suspend"] = "yes please"

    with pytest.raises(kubernetes_validate.ValidationError):
        assert_schema_valid(broken)


def test_nodes_report_gpus_and_health_from_ready_cordons_and_taints(fake, backend):
    fake.add_node(gpu_node("n4", ready=False))
    fake.add_node(gpu_node("n5", unschedulable=True))
    fake.add_node(gpu_node("n6", taints=[{"key": "maintenance", "value": "disk", "effect": "NoSchedule"}]))
    fake.add_node(gpu_node("n7", taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]))
    fake.add_node(gpu_node("cpu-only", gpus=0))
    product = gpu_node("n8")
    product["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    fake.add_node(product)

    nodes = {node.name: node for node in backend.observe().nodes}

    assert "cpu-only" not in nodes and nodes["n1"].healthy and nodes["n1"].domain == "zone-a"
    assert (nodes["n4"].healthy, nodes["n4"].reason) == (False, "NotReady")
    assert (nodes["n5"].healthy, nodes["n5"].reason) == (False, "cordoned")
    assert (nodes["n6"].healthy, nodes["n6"].reason) == (False, "taint maintenance=disk:NoSchedule")
    assert nodes["n7"].healthy  # GPU work tolerates the GPU-node taint
    assert (nodes["n1"].gpu_type, nodes["n8"].gpu_type) == ("gpu", "NVIDIA-H100-80GB-HBM3")


def test_a_natively_created_job_brings_its_allocation_and_contract_from_labels_and_annotations(fake, backend):
    fake.create_job(native_job("train", annotations={
        "gpu-portal.io/min-runtime": "2h", "gpu-portal.io/resumable": "true", "gpu-portal.io/user": "dave",
    }))  # fmt: skip
    fake.create_job(native_job("plain"))

    train, plain = observed(backend, "default/train"), observed(backend, "default/plain")

    assert (train.state, train.workload_id, train.account, train.user) == (
        JobState.WAITING,
        None,
        "lab/language",
        "dave",
    )
    assert (train.gpus, train.gpus_per_node, train.min_runtime_s, train.resumable) == (8, 8, 7200, True)
    assert (plain.min_runtime_s, plain.resumable) == (600, False)  # the cluster's defaults


def test_a_workload_submitted_through_the_portal_becomes_a_suspended_labelled_job(fake, backend):
    request = SubmitRequest(workload_id=42, account="lab/vision", user="alice", gpus=4, gpus_per_node=None,
                            name="eval", min_runtime_s=1800, resumable=True)  # fmt: skip

    ref = backend.submit(request)

    job = fake.job(ref)
    assert job["spec"]["suspend"] is True and "startTime" not in job["status"]
    assert job["metadata"]["labels"] == {
        "gpu-portal.io/allocation": "lab.vision",
        "gpu-portal.io/workload": "42",
    }
    seen = observed(backend, ref)
    assert (seen.workload_id, seen.account, seen.gpus, seen.min_runtime_s, seen.resumable) == (
        42, "lab/vision", 4, 1800, True,
    )  # fmt: skip


def test_a_multi_node_gang_is_an_indexed_job_with_one_pod_per_node(fake, backend):
    request = SubmitRequest(workload_id=7, account="lab/vision", user="alice", gpus=16, gpus_per_node=8,
                            name="big", min_runtime_s=0, resumable=False)  # fmt: skip

    job = fake.job(backend.submit(request))

    assert (job["spec"]["completionMode"], job["spec"]["parallelism"]) == ("Indexed", 2)
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}


def test_starting_pins_the_job_to_its_node_and_unsuspends_it(fake, backend):
    fake.create_job(native_job("train"))

    start(backend, "default/train", ("n2", 8))

    job = fake.job("default/train")
    assert job["spec"]["suspend"] is False
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n2"}
    seen = observed(backend, "default/train")
    assert (seen.state, seen.nodes, seen.attempt) == (JobState.RUNNING, ("n2",), 1) and seen.started_at


def test_starting_a_gang_restricts_it_to_the_chosen_nodes_one_pod_each(fake, backend):
    fake.create_job(native_job("gang", pods=2))

    start(backend, "default/gang", ("n3", 8), ("n1", 8))

    affinity = fake.job("default/gang")["spec"]["template"]["spec"]["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["n1", "n3"]
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "topologyKey"
    ] == ("kubernetes.io/hostname")
    assert observed(backend, "default/gang").nodes == ("n1", "n3")


def test_starting_twice_sends_one_patch(fake, backend):
    fake.create_job(native_job("train"))

    start(backend, "default/train", ("n1", 8))
    start(backend, "default/train", ("n2", 8))

    assert [method for method, _ in fake.requests].count("PATCH") == 1
    assert observed(backend, "default/train").nodes == ("n1",)


def test_preempting_resumable_work_suspends_it_and_a_later_start_moves_it(fake, backend):
    fake.create_job(native_job("train", annotations={"gpu-portal.io/resumable": "true"}))
    start(backend, "default/train", ("n1", 8))

    backend.apply([PreemptAction(workload_id=1, ref="default/train", attempt=1, requeue=True)])

    job = fake.job("default/train")
    assert job["spec"]["suspend"] is True and job["status"]["active"] == 0
    assert observed(backend, "default/train").state is JobState.WAITING
    start(backend, "default/train", ("n3", 8), attempt=2)
    seen = observed(backend, "default/train")
    assert (seen.state, seen.nodes, seen.attempt) == (JobState.RUNNING, ("n3",), 2)


@pytest.mark.parametrize(
    "action",
    [
        PreemptAction(workload_id=1, ref="default/train", attempt=1, requeue=False),
        CancelAction(workload_id=1, ref="default/train"),
    ],  # fmt: skip
    ids=["preempting work that cannot resume", "cancelling"],
)
def test_stopping_for_good_deletes_the_job(fake, backend, action):
    fake.create_job(native_job("train"))
    start(backend, "default/train", ("n1", 8))

    backend.apply([action])

    assert ("default", "train") not in fake.jobs


def test_finished_jobs_are_observed_as_completed_or_failed_with_their_run(fake, backend):
    for name in ("good", "bad"):
        fake.create_job(native_job(name))
        start(backend, f"default/{name}", ("n1", 8))
    fake.finish("default/good")
    fake.finish("default/bad", succeeded=False)

    good, bad = observed(backend, "default/good"), observed(backend, "default/bad")

    assert (good.state, good.nodes) == (JobState.COMPLETED, ("n1",)) and good.ended_at >= good.started_at
    assert bad.state is JobState.FAILED and bad.ended_at is not None


def test_jobs_without_the_allocation_label_are_not_the_portals(fake, backend):
    unlabelled = native_job("other")
    del unlabelled["metadata"]["labels"]["gpu-portal.io/allocation"]
    fake.create_job(unlabelled)

    assert backend.observe().jobs == ()


@pytest.mark.parametrize("how", ["answers 503", "refuses connections"])
def test_an_api_server_that_does_not_answer_is_backend_unavailable(fake, backend, how):
    if how == "answers 503":
        fake.unavailable = True
    else:
        backend.api.configuration.host = "http://127.0.0.1:9"

    with pytest.raises(BackendUnavailable):
        backend.observe()


def test_a_clusters_backend_settings_configure_the_adapter_it_gets():
    from scheduling.backends.registry import backend_for
    from scheduling.models import Cluster

    cluster = Cluster(name="k", slug="k", backend_kind="kubernetes", gpu_type="H100",
                      backend_settings={"host": "http://127.0.0.1:9", "namespace": "ml", "default_resumable": True,
                                        "tolerated_taints": ["gpu"], "unknown": 1})  # fmt: skip

    adapter = backend_for(cluster)

    assert isinstance(adapter, KubernetesBackend)
    assert (adapter.settings.namespace, adapter.settings.gpu_type, adapter.settings.default_resumable) == (
        "ml", "H100", True,
    )  # fmt: skip
    assert adapter.settings.tolerated_taints == ("gpu",)


def test_a_start_the_api_server_refuses_is_reported_and_the_other_actions_still_apply(fake, backend):
    from scheduling.backends.base import ActionsRefused

    fake.create_job(native_job("frozen"))
    fake.create_job(native_job("fine"))
    fake.denied_patches.add("frozen")

    with pytest.raises(ActionsRefused) as refused:
        backend.apply([
            StartAction(workload_id=7, ref="default/frozen", attempt=1, placement=(("n1", 8),)),
            StartAction(workload_id=8, ref="default/fine", attempt=1, placement=(("n2", 8),)),
        ])  # fmt: skip

    assert list(refused.value.refused) == [7]
    assert "422" in refused.value.refused[7] and "default/frozen" in refused.value.refused[7]
    assert observed(backend, "default/frozen").state is JobState.WAITING
    assert observed(backend, "default/fine").state is JobState.RUNNING
