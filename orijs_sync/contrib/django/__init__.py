"""Django: the process's queues and providers from ``settings.ORIJS_SYNC``, jobs and
events sent once the transaction commits, ``manage.py orijs_worker`` and a test runner
with a throwaway Redis. See the Django recipe in the documentation.

    # settings.py
    INSTALLED_APPS = [..., "orijs_sync.contrib.django"]      # the command; checks at startup
    ORIJS_SYNC = {"connection": "redis://127.0.0.1:6379/0", "prefix": "bull"}

    # a view
    from orijs_sync.contrib.django import add_on_commit, get_queue
    with transaction.atomic():
        order = Order.objects.create(...)
        add_on_commit("orders", "charge", {"order": order.pk})   # added once committed

    $ python manage.py orijs_worker orders shop.tasks:charge --concurrency 8
"""
from ._settings import SETTING, check_settings, close, get_events, get_hub, get_queue, get_workflows
from .transactions import add_on_commit, emit_on_commit

__all__ = ["SETTING", "check_settings", "close", "get_events", "get_hub", "get_queue",
           "get_workflows", "add_on_commit", "emit_on_commit"]
