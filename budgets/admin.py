from django.contrib import admin

from budgets.models import Allocation, BudgetChange, BudgetNode, Membership


@admin.register(BudgetNode)
class BudgetNodeAdmin(admin.ModelAdmin):
    list_display = ["path", "name", "archived"]
    list_filter = ["archived"]
    search_fields = ["path", "name"]
    # Structure changes go through the tree editor so they are recorded in the history.
    readonly_fields = ["path", "slug", "parent", "name", "archived", "created_at"]


@admin.register(Allocation)
class AllocationAdmin(admin.ModelAdmin):
    list_display = ["node", "cluster", "gpus", "updated_at"]
    list_filter = ["cluster"]
    search_fields = ["node__path"]
    readonly_fields = ["node", "cluster", "gpus", "effective_from", "updated_at"]


@admin.register(BudgetChange)
class BudgetChangeAdmin(admin.ModelAdmin):
    list_display = ["at", "node", "field", "old_value", "new_value", "actor", "cluster"]
    list_filter = ["field", "cluster"]
    search_fields = ["node__path", "reason"]

    def has_change_permission(self, request, obj=None) -> bool:  # noqa: ANN001
        return False  # append-only

    def has_delete_permission(self, request, obj=None) -> bool:  # noqa: ANN001
        return False


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "node", "role"]
    list_filter = ["role"]
    search_fields = ["user__username", "node__path"]
    autocomplete_fields = ["user", "node"]
