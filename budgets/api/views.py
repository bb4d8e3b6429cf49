"""The budget API: thin viewsets over the same getters, selectors and services as the pages.

Access is checked before input is validated, so a caller who may not edit a node gets 403
whatever they send; bad input from an allowed caller gets 400 with field errors and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import django_filters
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from budgets import selectors, services
from budgets.api import serializers as s
from budgets.models import Allocation, BudgetChange, BudgetNode

T = TypeVar("T")  # what a service returns


def _valid(serializer_class: type[Serializer], data: object, **kwargs: Any) -> dict:
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _node_from_body(request: Request, field: str, action: selectors.Action) -> BudgetNode:
    """A node named by id in the request body: 403 if not allowed, 400 if missing or unknown."""
    raw = request.data.get(field)  # type: ignore[union-attr]  # the parsers give a dict or a QueryDict, never a list
    if raw in (None, ""):
        raise ValidationError({field: ["This field is required."]})
    try:
        return selectors.budget_node_for_user(user=request.user, node_id=raw, action=action)
    except Http404:
        raise ValidationError({field: [f"No budget node with id {raw!r}."]}) from None


def _call(service: Callable[..., T], **kwargs: Any) -> T:
    """Run a service, turning its field errors into a 400 with the same field names."""
    try:
        return service(**kwargs)
    except DjangoValidationError as error:
        raise ValidationError(error.message_dict) from None


class BudgetNodeViewSet(viewsets.ReadOnlyModelViewSet):
    """The budget tree's nodes. Everyone signed in reads; managers edit below the nodes they manage."""

    serializer_class = s.BudgetNodeSerializer
    filterset_fields = ["archived", "parent"]

    def get_queryset(self):  # noqa: ANN201
        return BudgetNode.objects.order_by("path", "id")

    def get_object(self) -> BudgetNode:
        return selectors.budget_node_for_user(user=self.request.user, node_id=self.kwargs["pk"])

    @extend_schema(request=s.BudgetNodeCreateSerializer, responses={201: s.BudgetNodeSerializer})
    def create(self, request: Request) -> Response:
        if request.data.get("parent") in (None, ""):  # type: ignore[union-attr]  # a dict or QueryDict, never a list
            if not request.user.is_staff:
                raise PermissionDenied("Only staff may create a root node.")
            parent = None
        else:
            parent = _node_from_body(request, "parent", "add_child")
        data = _valid(s.BudgetNodeCreateSerializer, request.data)
        node = _call(services.node_create, actor=request.user, parent=parent, name=data["name"])
        return Response(self.get_serializer(node).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.BudgetNodeUpdateSerializer, responses=s.BudgetNodeSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        """Rename (``name``) and/or move (``parent``) a node; its subtree's paths follow."""
        node = selectors.budget_node_for_user(user=request.user, node_id=pk, action="edit")
        parent = _node_from_body(request, "parent", "add_child") if "parent" in request.data else None
        data = _valid(s.BudgetNodeUpdateSerializer, request.data)
        with transaction.atomic():  # a rename and a move land together or not at all
            if "name" in data:
                _call(services.node_rename, actor=request.user, node=node, name=data["name"])
            if parent is not None:
                _call(services.node_move, actor=request.user, node=node, parent=parent)
        node.refresh_from_db()
        return Response(self.get_serializer(node).data)

    @extend_schema(request=s.ArchiveSerializer, responses=s.ArchiveResultSerializer)
    @action(detail=True, methods=["post"])
    def archive(self, request: Request, pk: str) -> Response:
        node = selectors.budget_node_for_user(user=request.user, node_id=pk, action="edit")
        data = _valid(s.ArchiveSerializer, request.data)
        count = services.node_archive(actor=request.user, node=node, reason=data["reason"])
        return Response({"archived": count})

    @extend_schema(
        parameters=[OpenApiParameter("cluster", OpenApiTypes.STR, required=True, description="cluster slug")],
        responses=s.BudgetTreeSerializer,
    )
    @action(detail=False, methods=["get"], filterset_fields=[], pagination_class=None)
    def tree(self, request: Request) -> Response:
        """The live tree on one cluster, depth-first: allocation, share, entitlement, over-commitment."""
        slug = request.query_params.get("cluster", "")
        if not slug:
            raise ValidationError({"cluster": ["Give a cluster slug, e.g. ?cluster=main."]})
        cluster = selectors.cluster_for_user(user=request.user, slug=slug)
        tree = selectors.budget_tree(cluster=cluster, user=request.user)
        return Response(s.BudgetTreeSerializer(tree).data)


class AllocationFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__slug", help_text="cluster slug")

    class Meta:
        model = Allocation
        fields = ["cluster", "node"]


class AllocationViewSet(viewsets.ReadOnlyModelViewSet):
    """Allocations: a node's budget on one cluster, in GPUs. Every change needs a reason."""

    serializer_class = s.AllocationSerializer
    filterset_class = AllocationFilter

    def get_queryset(self):  # noqa: ANN201
        return selectors.allocations()

    @extend_schema(request=s.AllocationSetSerializer, responses={200: s.AllocationSerializer})
    def create(self, request: Request) -> Response:
        """Set a node's allocation on a cluster (creating it when the node had none there)."""
        node = _node_from_body(request, "node", "edit")
        data = _valid(s.AllocationSetSerializer, request.data)
        cluster = _cluster_from_body(request, data["cluster"])
        allocation = _call(
            services.allocation_set, actor=request.user, node=node, cluster=cluster, gpus=data["gpus"],
            reason=data["reason"],
        )  # fmt: skip
        return Response(self.get_serializer(allocation).data)

    @extend_schema(request=s.AllocationUpdateSerializer, responses=s.AllocationSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        allocation = self.get_object()
        node = selectors.budget_node_for_user(user=request.user, node_id=allocation.node_id, action="edit")
        data = _valid(s.AllocationUpdateSerializer, request.data)
        allocation = _call(
            services.allocation_set, actor=request.user, node=node, cluster=allocation.cluster, **data
        )
        return Response(self.get_serializer(allocation).data)


def _cluster_from_body(request: Request, slug: str) -> object:
    try:
        return selectors.cluster_for_user(user=request.user, slug=slug)
    except Http404:
        raise ValidationError({"cluster": [f"No cluster {slug!r}."]}) from None


class BudgetChangeFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__slug", help_text="cluster slug")

    class Meta:
        model = BudgetChange
        fields = ["node", "cluster", "field"]


class BudgetChangeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The append-only budget history, newest first."""

    serializer_class = s.BudgetChangeSerializer
    filterset_class = BudgetChangeFilter

    def get_queryset(self):  # noqa: ANN201
        return selectors.budget_changes()


class ClusterViewSet(viewsets.ReadOnlyModelViewSet):
    """Clusters with node and GPU counts (installed and healthy)."""

    serializer_class = s.ClusterSerializer
    lookup_field = "slug"
    filterset_fields: list[str] = []

    def get_queryset(self):  # noqa: ANN201
        return selectors.cluster_list()
