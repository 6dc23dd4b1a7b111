"""The Django app: ``INSTALLED_APPS = [..., "orijs_sync.contrib.django"]`` brings the
``orijs_worker`` command and checks ``settings.ORIJS_SYNC`` at startup."""
from __future__ import annotations

from django.apps import AppConfig


class OrijsSyncConfig(AppConfig):
    name = "orijs_sync.contrib.django"
    label = "orijs_sync"
    verbose_name = "orijs_sync"

    def ready(self) -> None:
        from ._settings import check_settings
        check_settings()
