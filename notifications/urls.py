from django.urls import path

from notifications import views

app_name = "notifications"
urlpatterns = [
    path("", views.notification_list, name="list"),
    path("bell/", views.bell, name="bell"),
    path("read/", views.mark_read, name="read"),
    path("preferences/", views.preferences, name="preferences"),
]
