from django.contrib import admin

from notifications.models import Delivery, Event, Webhook


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ("url", "user", "node", "kinds", "active")


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("key", "kind", "created_at", "fanned_out_at")
    search_fields = ("key",)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("event", "channel", "target", "status", "attempts", "last_error")
    list_filter = ("status", "channel")
