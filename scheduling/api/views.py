"""``/api/v1/workloads/``: thin entry points over the workload selectors and services."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from scheduling.api.serializers import (
    HoldSerializer,
    RenewalSerializer,
    WorkloadDetailSerializer,
    WorkloadSerializer,
    WorkloadSubmitSerializer,
)
from scheduling.models import Cluster
from scheduling.selectors import workload_get_for_user, workload_list
from scheduling.services import (
    IllegalTransition,
    RenewalRefused,
    SubmissionRefused,
    workload_cancel,
    workload_hold,
    workload_release,
    workload_renew_protection,
    workload_submit,
)


class WorkloadViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Submit, list (filters: cluster, allocation, user, state, class), detail, cancel, hold, release,
    renew-protection (interactive sessions)."""

    serializer_class = WorkloadSerializer
    filter_backends: list = []

    def get_queryset(self):  # noqa: ANN201
        filters = dict(self.request.query_params.items())
        if filters.pop("mine", "").lower() in {"1", "true", "yes"}:
            filters["user"] = self.request.user.username
        return workload_list(filters=filters)

    @extend_schema(
        parameters=[
            OpenApiParameter("mine", bool, description="only the caller's workloads"),
            *[OpenApiParameter(key, str) for key in ("cluster", "allocation", "user", "state", "class")],
        ]
    )
    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().list(request, *args, **kwargs)

    def get_object(self):  # noqa: ANN201
        return workload_get_for_user(user=self.request.user, workload_id=self.kwargs["pk"])

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(WorkloadDetailSerializer(self.get_object(), context={"request": request}).data)

    @extend_schema(request=WorkloadSubmitSerializer, responses={201: WorkloadSerializer})
    def create(self, request: Request) -> Response:
        submission = WorkloadSubmitSerializer(data=request.data)
        submission.is_valid(raise_exception=True)
        data = dict(submission.validated_data)
        cluster = Cluster.objects.filter(slug=data.pop("cluster")).first()
        if cluster is None:
            raise serializers.ValidationError({"cluster": ["There is no cluster with that name."]})
        metadata = {**data.pop("metadata"), "command": data.pop("command"), "image": data.pop("image")}
        try:
            with transaction.atomic():
                result = workload_submit(
                    actor=request.user,
                    cluster=cluster,
                    allocation_path=data.pop("allocation"),
                    metadata=metadata,
                    **data,
                )
        except SubmissionRefused as refused:
            raise serializers.ValidationError(refused.errors) from None
        body = {
            **WorkloadSerializer(result.workload, context={"request": request}).data,
            "warnings": result.warnings,
        }
        return Response(body, status=status.HTTP_201_CREATED)

    def _act(self, request: Request, pk: str, service, **extra: object) -> Response:  # noqa: ANN001
        workload = workload_get_for_user(user=request.user, workload_id=pk, act=True)
        try:
            workload = service(workload=workload, actor=request.user, **extra)
        except IllegalTransition as refused:
            return Response({"detail": str(refused)}, status=status.HTTP_409_CONFLICT)
        workload = workload_get_for_user(user=request.user, workload_id=workload.pk)
        return Response(WorkloadSerializer(workload, context={"request": request}).data)

    @extend_schema(request=None, responses={200: WorkloadSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        return self._act(request, pk, workload_cancel)

    @extend_schema(request=HoldSerializer, responses={200: WorkloadSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, pk: str) -> Response:
        note = HoldSerializer(data=request.data)
        note.is_valid(raise_exception=True)
        return self._act(request, pk, workload_hold, note=note.validated_data["note"])

    @extend_schema(request=None, responses={200: WorkloadSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str) -> Response:
        return self._act(request, pk, workload_release)

    @extend_schema(request=None, responses={200: RenewalSerializer})
    @action(detail=True, methods=["post"], url_path="renew-protection")
    def renew_protection(self, request: Request, pk: str) -> Response:
        """Renew a busy interactive session's protection (docs/policy.md "Interactive sessions");
        400 with the field the rules refuse it on (state, workload_class, allocation, utilisation,
        renewals, protected_until)."""
        workload = workload_get_for_user(user=request.user, workload_id=pk, act=True)
        try:
            renewed = workload_renew_protection(workload=workload, actor=request.user)
        except RenewalRefused as refused:
            raise serializers.ValidationError(refused.errors) from None
        body = {"id": renewed.workload.pk, "protected_until": renewed.protected_until,
                "renewals_left": renewed.renewals_left}  # fmt: skip
        return Response(RenewalSerializer(body).data)
