"""Forms of the tree editor. They only parse input; the services hold the rules and their errors
are put back on the form's fields with ``apply_service_errors``."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from budgets.selectors import TreeRow


class PanelForm(forms.Form):
    """The panel shows several forms at once: each gets its own id prefix so ids stay unique."""

    id_prefix = "id"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", f"{self.id_prefix}_%s")
        super().__init__(*args, **kwargs)


class RenameForm(PanelForm):
    id_prefix = "rename"
    name = forms.CharField(max_length=100, strip=True)


class ChildForm(PanelForm):
    id_prefix = "child"
    name = forms.CharField(max_length=100, strip=True)


class AllocationForm(PanelForm):
    # A CharField so the service gives the same message on a page as on the API for "abc" or "-3".
    gpus = forms.CharField(
        label="GPUs", max_length=20, widget=forms.TextInput(attrs={"inputmode": "decimal"})
    )
    reason = forms.CharField(
        max_length=500, required=False, widget=forms.TextInput(attrs={"placeholder": "Why? e.g. new 70B run"})
    )


class MoveForm(PanelForm):
    # The select offers only valid targets, but a crafted id is still checked by the access getter
    # (403) and the service (cycle), so the field is a plain integer.
    id_prefix = "move"
    parent = forms.IntegerField(label="New parent", widget=forms.Select)

    def __init__(self, *args: Any, targets: list[TreeRow], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["parent"].widget.choices = [("", "Choose a parent…")] + [
            (row.node.pk, "\u2003" * row.depth + row.node.name) for row in targets
        ]


class ArchiveForm(PanelForm):
    id_prefix = "archive"

    reason = forms.CharField(max_length=500, required=False)


def apply_service_errors(form: forms.Form, error: ValidationError) -> None:
    """Attach a service's field errors to the form (unknown fields become non-field errors)."""
    for field, messages in error.message_dict.items():
        form.add_error(field if field in form.fields else None, messages)
