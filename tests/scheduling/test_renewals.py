"""A busy interactive session renews its protection (issue 17 point 4): the API, the page, the cap."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.models import Cluster, ProtectionRenewal, Run, UtilisationSample, Workload, WorkloadState
from scheduling.services import RenewalRefused, workload_renew_protection
from scheduling.services.runs import run_open


def session(
    lab,
    user,
    allocation,
    *,
    klass: str = "interactive",
    state: str = WorkloadState.RUNNING,
    ran_min: int = 120,
    protected_min: int = 5,
    max_runtime_s: int | None = None,
) -> Workload:  # noqa: ANN001
    """A session running for ``ran_min`` minutes until now, protected ``protected_min`` more."""
    now = timezone.now()
    started = now - timedelta(minutes=ran_min)
    workload = Workload.objects.create(
        cluster=lab.main, allocation=allocation, owner=user, user_name=user.username, gpus=1, workload_class=klass,
        state=state, attempt=1 if state == WorkloadState.RUNNING else 0, max_runtime_s=max_runtime_s,
        state_changed_at=started, submitted_at=started, queued_at=started,
    )  # fmt: skip
    if state == WorkloadState.RUNNING:
        run_open(workload=workload, attempt=1, placement=[["n0", 1]], started_at=started,
                 protected_until=now + timedelta(minutes=protected_min), funded=allocation != lab.sandbox)  # fmt: skip
    return workload


def api(user) -> APIClient:  # noqa: ANN001
    client = APIClient()
    client.force_authenticate(user)
    return client


def renew_url(workload: Workload) -> str:
    return f"/api/v1/workloads/{workload.pk}/renew-protection/"


def test_a_busy_session_renews_for_the_clusters_cap_from_now_a_bounded_number_of_times(lab):
    mine = session(lab, lab.bob, lab.perception)
    client = api(lab.bob)
    before = timezone.now()

    first = client.post(renew_url(mine))

    assert first.status_code == 200, first.content
    run = Run.objects.get(workload=mine)
    cap = timedelta(seconds=lab.main.min_runtime_cap_s)  # 8 h
    assert before + cap <= run.protected_until <= timezone.now() + cap
    assert first.json()["renewals_left"] == 1
    assert client.post(renew_url(mine)).status_code == 200  # the second of two a day

    third = client.post(renew_url(mine))

    assert third.status_code == 400
    assert "Already renewed 2 times in the last 24 hours" in third.json()["renewals"][0]
    assert ProtectionRenewal.objects.filter(workload=mine).count() == 2


def test_a_renewal_never_protects_past_the_declared_maximum_runtime(lab):
    mine = session(lab, lab.bob, lab.perception, ran_min=60, max_runtime_s=3 * 3600)

    renewed = workload_renew_protection(workload=mine, actor=lab.bob)

    run = Run.objects.get(workload=mine)
    assert renewed.protected_until == run.protected_until == run.started_at + timedelta(hours=3)
    with pytest.raises(RenewalRefused) as again:  # nothing more to give
        workload_renew_protection(workload=mine, actor=lab.bob)
    assert set(again.value.errors) == {"protected_until"}


@pytest.mark.parametrize(
    ("case", "field", "words"),
    [
        ("batch", "workload_class", "Only interactive sessions can renew"),
        ("pending", "state", "Only a running session can renew"),
        ("unfunded", "allocation", "Unfunded work is never protected"),
        ("idle", "utilisation", "The session is idle: its GPUs were 3% busy"),
        ("no renewals here", "renewals", "Sessions cannot renew their protection on main"),
    ],
)
def test_a_refused_renewal_is_a_400_naming_the_field_not_a_500(lab, case, field, words):
    allocation = lab.sandbox if case == "unfunded" else lab.language
    mine = session(lab, lab.dave, allocation, klass="batch" if case == "batch" else "interactive",
                   state=WorkloadState.PENDING if case == "pending" else WorkloadState.RUNNING)  # fmt: skip
    if case == "idle":
        for minutes in (25, 15, 5):
            UtilisationSample.objects.create(workload=mine, cluster=lab.main, gpus=1, gpu_utilisation=3.0,
                                             at=timezone.now() - timedelta(minutes=minutes))  # fmt: skip
    if case == "no renewals here":
        Cluster.objects.filter(pk=lab.main.pk).update(session_renewals_per_day=0)
    protected = Run.objects.filter(workload=mine).values_list("protected_until", flat=True).first()

    answer = api(lab.dave).post(renew_url(mine))

    assert answer.status_code == 400
    assert list(answer.json()) == [field] and words in answer.json()[field][0]
    assert Run.objects.filter(workload=mine).values_list("protected_until", flat=True).first() == protected


def test_only_the_owner_a_manager_or_staff_may_renew(lab):
    mine = session(lab, lab.bob, lab.perception)

    assert api(lab.charlie).post(renew_url(mine)).status_code == 403  # a viewer
    assert api(lab.alice).post(renew_url(mine)).status_code == 200  # manager of vision


def test_the_workload_page_renews_and_says_until_when_or_why_not(lab):
    mine = session(lab, lab.bob, lab.perception)
    page = Client()
    page.force_login(lab.bob)

    shown = page.get(f"/scheduling/workloads/{mine.pk}/")
    assert 'data-action="renew"' in shown.content.decode()
    answer = page.post(f"/scheduling/workloads/{mine.pk}/renew/", HTTP_HX_REQUEST="true")

    assert answer.status_code == 200
    assert (
        "Protection renewed until" in answer.content.decode() and "1 renewal left" in answer.content.decode()
    )
    page.post(f"/scheduling/workloads/{mine.pk}/renew/", HTTP_HX_REQUEST="true")
    refused = page.post(f"/scheduling/workloads/{mine.pk}/renew/", HTTP_HX_REQUEST="true").content.decode()
    assert "Not renewed: Already renewed 2 times" in refused
