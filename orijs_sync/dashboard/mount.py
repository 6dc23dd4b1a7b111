"""Mounting the dashboard (a WSGI app) in a Flask app or a Django project.

Flask::

    mount_flask(app, board, "/jobs")     # app.wsgi_app = DispatcherMiddleware(...)

Django (``urls.py``)::

    urlpatterns = [path("jobs/", include(board.django_urls()))]

The Django view lets staff users only (``request.user.is_staff``) by default: an
anonymous user is sent to the login page, a signed-in user who is not staff gets 403.
It is exempt from Django's CSRF check because the dashboard checks its own token on
every POST (a POST without it is refused whatever Django would have said).
"""
from __future__ import annotations

import io
from typing import Any, Callable, Iterable, List, Optional, Tuple

from .. import errors
from ..base import validate as check

WsgiApp = Callable[..., Iterable[bytes]]
UserCheck = Callable[[Any], bool]


def _mount_path(path: Any) -> str:
    check.string(path, "path")
    if not path.startswith("/") or path == "/" or path.endswith("/"):
        raise errors.InvalidArgument(f"path must start with '/' and not end with it "
                                     f"(e.g. '/jobs'), not {path!r}", "path")
    return str(path)


def mount_flask(app: Any, board: WsgiApp, path: str = "/jobs") -> None:
    """Serve ``board`` under ``path`` of the Flask ``app`` (werkzeug's
    ``DispatcherMiddleware`` around ``app.wsgi_app``)."""
    from werkzeug.middleware.dispatcher import DispatcherMiddleware
    prefix = _mount_path(path)
    if not callable(getattr(app, "wsgi_app", None)):
        check.bad_type("app", app, "a Flask app")
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {prefix: board})


def is_staff(user: Any) -> bool:
    """The default Django check: an active staff user."""
    return bool(getattr(user, "is_active", False) and getattr(user, "is_staff", False))


def django_urls(board: WsgiApp, *, allow: Optional[UserCheck] = None) -> List[Any]:
    """URL patterns serving ``board``, for ``path("jobs/", include(...))``. ``allow(user)``
    decides who may see it (default: active staff users); needs Django's session and
    authentication middleware."""
    from django.urls import re_path
    if allow is not None and not callable(allow):
        check.bad_type("allow", allow, "a function of the user")
    view = django_view(board, allow or is_staff)
    return [re_path(r"^(?P<rest>.*)$", view, name="orijs-dashboard")]


def django_view(board: WsgiApp, allow: UserCheck) -> Callable[..., Any]:
    from django.contrib.auth.views import redirect_to_login
    from django.http import HttpResponseForbidden
    from django.views.decorators.csrf import csrf_exempt

    # csrf_exempt: the dashboard refuses any POST without its own token (its own check)
    @csrf_exempt
    def dashboard(request: Any, rest: str = "") -> Any:
        user = getattr(request, "user", None)
        if user is None or not allow(user):
            if user is not None and not getattr(user, "is_authenticated", False):
                return redirect_to_login(request.get_full_path())
            return HttpResponseForbidden("The dashboard is for staff users only.")
        return _call_wsgi(board, request, rest)
    return dashboard


def _call_wsgi(board: WsgiApp, request: Any, rest: str) -> Any:
    from django.http import HttpResponse
    environ = dict(request.environ)
    path = "/" + rest
    full = request.path
    script = full[:len(full) - len(rest)].rstrip("/") if full.endswith(rest) else full
    body = request.body
    environ.update({"SCRIPT_NAME": _wsgi_str(script), "PATH_INFO": _wsgi_str(path),
                    "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))})
    started: List[Tuple[str, List[Tuple[str, str]]]] = []

    def start_response(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
        started[:] = [(status, headers)]
        return lambda data: None
    chunks = board(environ, start_response)
    try:
        content = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    status, headers = started[0]
    response = HttpResponse(content, status=int(status.split()[0]))
    for name, value in headers:
        if name.lower() == "set-cookie":
            response.cookies.load(value)
        else:
            response[name] = value
    return response


def _wsgi_str(text: str) -> str:
    """A path as WSGI carries it: its UTF-8 bytes as a latin-1 string (PEP 3333)."""
    return text.encode("utf-8").decode("latin-1")
