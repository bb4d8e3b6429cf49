"""The budget tree editor. Thin views: fetch through the access-checked getters, call one service,
render. With htmx a view answers with the node panel fragment (plus the tree, out of band, when
the tree changed); without it, the same actions work with plain forms and redirects."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.forms import Form
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from budgets import selectors, services
from budgets.forms import AllocationForm, ArchiveForm, ChildForm, MoveForm, RenameForm, apply_service_errors
from budgets.models import BudgetNode
from portal.requests import HtmxHttpRequest
from scheduling.models import Cluster

FORM_NAMES = ("allocation_form", "rename_form", "move_form", "child_form", "archive_form")


@login_required
@require_GET
def tree_index(request: HtmxHttpRequest) -> HttpResponse:
    cluster = selectors.cluster_list().first()
    if cluster is None:
        return render(request, "budgets/tree_page.html", {"clusters": []})
    return redirect("budgets:tree", cluster_slug=cluster.slug)


@login_required
@require_GET
def tree_page(request: HtmxHttpRequest, cluster_slug: str) -> HttpResponse:
    cluster = selectors.cluster_for_user(user=request.user, slug=cluster_slug)
    node = None
    if request.GET.get("node"):
        node = selectors.budget_node_for_user(user=request.user, node_id=request.GET["node"])
    return _render_page(request, cluster, node, {})


@login_required
@require_GET
def node_panel(request: HtmxHttpRequest, cluster_slug: str, node_id: int) -> HttpResponse:
    cluster = selectors.cluster_for_user(user=request.user, slug=cluster_slug)
    node = selectors.budget_node_for_user(user=request.user, node_id=node_id)
    if not request.htmx:
        return redirect(_page_url(cluster, node))
    return _render_panel(request, cluster, node, {}, with_tree=True)


@login_required
@require_POST
def allocation_set(request: HtmxHttpRequest, cluster_slug: str, node_id: int) -> HttpResponse:
    def apply(node: BudgetNode, form: Form, cluster: Cluster) -> BudgetNode:
        services.allocation_set(actor=request.user, node=node, cluster=cluster, **form.cleaned_data)
        return node

    return _edit(request, cluster_slug, node_id, "allocation_form", AllocationForm, apply)


@login_required
@require_POST
def node_rename(request: HtmxHttpRequest, cluster_slug: str, node_id: int) -> HttpResponse:
    def apply(node: BudgetNode, form: Form, cluster: Cluster) -> BudgetNode:
        return services.node_rename(actor=request.user, node=node, name=form.cleaned_data["name"])

    return _edit(request, cluster_slug, node_id, "rename_form", RenameForm, apply)


@login_required
@require_POST
def node_add_child(request: HtmxHttpRequest, cluster_slug: str, node_id: int) -> HttpResponse:
    def apply(node: BudgetNode, form: Form, cluster: Cluster) -> BudgetNode:
        return services.node_create(actor=request.user, parent=node, name=form.cleaned_data["name"])

    return _edit(request, cluster_slug, node_id, "child_form", ChildForm, apply, action="add_child")


@login_required
@require_POST
def node_move(request: HtmxHttpRequest, cluster_slug: str, node_id: int) -> HttpResponse:
    def apply(node: BudgetNode, form: Form, cluster: Cluster) -> BudgetNode:
        try:
            parent = selectors.budget_node_for_user(
                user=request.user, node_id=form.cleaned_data["parent"], action="add_child"
            )
        except Http404:
            raise ValidationError({"parent": "There is no such node."}) from None
        return services.node_move(actor=request.user, node=node, parent=parent)

    return _edit(request, cluster_slug, node_id, "move_form", MoveForm, apply)


@login_required
@require_POST
def node_archive(request: HtmxHttpRequest, cluster_slug: str, node_id: int) -> HttpResponse:
    def apply(node: BudgetNode, form: Form, cluster: Cluster) -> BudgetNode:
        services.node_archive(actor=request.user, node=node, reason=form.cleaned_data["reason"])
        return node

    return _edit(request, cluster_slug, node_id, "archive_form", ArchiveForm, apply)


# --- shared flow ------------------------------------------------------------------------------

Apply = Callable[[BudgetNode, Form, Cluster], BudgetNode]


def _edit(
    request: HtmxHttpRequest,
    cluster_slug: str,
    node_id: int,
    form_name: str,
    form_class: type[Form],
    apply: Apply,
    action: selectors.Action = "edit",
) -> HttpResponse:
    """Check access first (403 whatever was sent), then parse, then call the service."""
    cluster = selectors.cluster_for_user(user=request.user, slug=cluster_slug)
    node = selectors.budget_node_for_user(user=request.user, node_id=node_id, action=action)
    tree = selectors.budget_tree(cluster=cluster, user=request.user)
    form = _bind(form_class, request.POST, tree, node)
    if form.is_valid():
        try:
            shown = apply(node, form, cluster)
        except ValidationError as error:
            apply_service_errors(form, error)
        else:
            if not request.htmx:
                return redirect(_page_url(cluster, shown))
            return _render_panel(request, cluster, shown, {}, with_tree=True)
    forms = {form_name: form}
    if not request.htmx:
        return _render_page(request, cluster, node, forms, tree=tree)
    return _render_panel(request, cluster, node, forms, tree=tree, with_tree=False)


def _bind(form_class: type[Form], data: QueryDict, tree: selectors.BudgetTree, node: BudgetNode) -> Form:
    if form_class is MoveForm:
        return MoveForm(data, targets=selectors.move_targets(tree=tree, node=node))
    return form_class(data)


def _page_url(cluster: Cluster, node: BudgetNode) -> str:
    return f"{reverse('budgets:tree', args=[cluster.slug])}?node={node.pk}"


def _render_page(
    request: HtmxHttpRequest,
    cluster: Cluster,
    node: BudgetNode | None,
    forms: dict[str, Form],
    tree: selectors.BudgetTree | None = None,
) -> HttpResponse:
    tree = tree or selectors.budget_tree(cluster=cluster, user=request.user)
    context = {"clusters": list(selectors.cluster_list()), "cluster": cluster, "tree": tree}
    if node is not None:
        context.update(_panel_context(cluster, node, tree, forms))
    return render(request, "budgets/tree_page.html", context)


def _render_panel(
    request: HtmxHttpRequest,
    cluster: Cluster,
    node: BudgetNode,
    forms: dict[str, Form],
    *,
    with_tree: bool,
    tree: selectors.BudgetTree | None = None,
) -> HttpResponse:
    """The panel fragment; with ``with_tree`` the tree follows out of band so its numbers refresh."""
    node.refresh_from_db()
    if with_tree or tree is None:
        tree = selectors.budget_tree(cluster=cluster, user=request.user)
    context = {
        "cluster": cluster,
        "tree": tree,
        "with_tree": with_tree,
        **_panel_context(cluster, node, tree, forms),
    }
    return render(request, "budgets/_node_panel_response.html", context)


def _panel_context(
    cluster: Cluster, node: BudgetNode, tree: selectors.BudgetTree, forms: dict[str, Form]
) -> dict[str, object]:
    row = tree.row_for(node.pk)
    targets = selectors.move_targets(tree=tree, node=node)
    defaults = {
        "allocation_form": AllocationForm(initial={"gpus": _plain(row.gpus) if row else "0"}),
        "rename_form": RenameForm(initial={"name": node.name}),
        "move_form": MoveForm(targets=targets),
        "child_form": ChildForm(),
        "archive_form": ArchiveForm(),
    }
    return {
        "node": node,
        "row": row,
        "selected_id": node.pk,
        "open_form": next(iter(forms), ""),
        "move_targets": targets,
        "history": selectors.node_history(node=node),
        **defaults,
        **forms,
    }


def _plain(gpus: Decimal) -> str:
    """123.00 -> "123", 12.50 -> "12.5": what a person would type."""
    return f"{gpus.normalize():f}" if gpus else "0"
