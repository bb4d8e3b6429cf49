from django.apps import AppConfig
from django.db.models.signals import post_save


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        from portal.rollups import after_pass_saved

        post_save.connect(after_pass_saved, sender="scheduling.SchedulingPass", dispatch_uid="portal-rollups")
