from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig, apps

if TYPE_CHECKING:
    from scheduling.reports import OptionsMemory


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"
    options_memory: OptionsMemory  # this process's, made in ready(): see options_memory()

    def ready(self) -> None:
        """A change to the budget tree queues the Slurm account mirror when it commits; the
        process's memory for the start options is made."""
        from django.db.models.signals import post_delete, post_save

        from budgets.models import Allocation, BudgetNode, Membership
        from scheduling.reports import OptionsMemory

        for model in (Allocation, BudgetNode, Membership):
            for signal in (post_save, post_delete):
                signal.connect(
                    _tree_changed, sender=model, dispatch_uid=f"slurm-mirror-{model.__name__}-{signal}"
                )
        self.options_memory = OptionsMemory()


def options_memory() -> OptionsMemory:
    """What this process remembers between the start options it answers (pages and API): the app
    config, which Django makes once per process, keeps it, and the views pass it in."""
    config = apps.get_app_config("scheduling")
    assert isinstance(config, SchedulingConfig)
    return config.options_memory


def _tree_changed(**kwargs: object) -> None:
    from scheduling.services.slurm_mirror import slurm_mirror_request

    slurm_mirror_request()
