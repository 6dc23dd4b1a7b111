"""The dashboard under /jobs/ (staff only), and Django's login page for the others."""
from django.contrib.auth import views as auth_views
from django.urls import include, path

from orijs_sync.contrib.django.dashboard import dashboard_urls

urlpatterns: list = [
    path("jobs/", include(dashboard_urls(secret="only-for-tests"))),
    path("accounts/login/", auth_views.LoginView.as_view(template_name="login.html"),
         name="login"),
]
