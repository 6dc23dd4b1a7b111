"""The dashboard: a WSGI application showing queues, jobs, group queues, job schedulers
and OriJS events and workflows, with actions (retry, promote, remove, clean, pause,
resume, drain) behind an ``authorize`` hook and a CSRF token.

- ``app``: ``Dashboard``, the WSGI callable (dispatch, CSRF, authorization, error pages,
  static files); ``web``: the request, the response, the routing table; ``security``:
  tokens and signed cookies; ``data``: the queue directory and the Redis reads the pages
  share; ``charts``: server-side SVG; ``views_*`` and ``actions``: the pages and the POSTs.

Needs Jinja2 (``pip install orijs-sync[dashboard]``). May import: the public classes and
anything below them; nothing in the package imports this folder.
"""
from __future__ import annotations

try:
    import jinja2  # noqa: F401 - checked here so the error names the extra
except ImportError as exc:  # pragma: no cover - the test extra installs it
    raise ImportError("orijs_sync.dashboard needs Jinja2: pip install orijs-sync[dashboard]"
                      ) from exc

from .app import Dashboard

__all__ = ["Dashboard"]
