from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        """A change to the budget tree queues the Slurm account mirror when it commits."""
        from django.db.models.signals import post_delete, post_save

        from budgets.models import Allocation, BudgetNode, Membership

        for model in (Allocation, BudgetNode, Membership):
            for signal in (post_save, post_delete):
                signal.connect(
                    _tree_changed, sender=model, dispatch_uid=f"slurm-mirror-{model.__name__}-{signal}"
                )


def _tree_changed(**kwargs: object) -> None:
    from scheduling.services.slurm_mirror import slurm_mirror_request

    slurm_mirror_request()
