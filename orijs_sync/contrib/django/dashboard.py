"""The dashboard in a Django project, on the ``ORIJS_SYNC`` setting's Redis and prefixes::

    # urls.py
    from orijs_sync.contrib.django.dashboard import dashboard_urls
    urlpatterns = [path("jobs/", include(dashboard_urls()))]

Staff users only by default (``allow=`` a function of the user to change that); needs
Django's session and authentication middleware. The dashboard has its own connection pool
(made from the setting when the URLconf is loaded) and its own CSRF token.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from django.conf import settings

from ._settings import SETTING, get_hub


def dashboard_urls(*, allow: Optional[Callable[[Any], bool]] = None, **options: Any) -> List[Any]:
    """URL patterns for ``include()``; ``options`` are the Dashboard's keyword options
    (``read_only``, ``secret``, ``authorize``...) over those the setting gives."""
    from ...dashboard import Dashboard
    given = {**get_hub().dashboard_options(), **options}
    board = Dashboard((getattr(settings, SETTING, None) or {}).get("connection"), **given)
    return board.django_urls(allow=allow)
