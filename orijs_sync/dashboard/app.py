"""``Dashboard``: the WSGI application. It dispatches to the views registered in
``web.ROUTES``, checks ``authorize`` (reads and each action), ``read_only`` and the CSRF
token of every POST, serves its static files, and turns a Redis outage into a 503
banner page and any other error into a 500 page (logged, no traceback shown)."""
from __future__ import annotations

import datetime
import inspect
import json
import logging
import mimetypes
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

import jinja2
import redis

from .. import errors
from ..base import validate as check
from ..store.connect import as_connection
from ..store.connection import ConnectionLike
from . import security, web
from .data import QueueDirectory

log = logging.getLogger("orijs_sync.dashboard")

HERE = Path(__file__).parent
OUTAGE_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                 errors.ConnectionError, errors.TimeoutError)
NAV = (("Queues", "queues"), ("Groups", "groups"), ("Schedulers", "schedulers"),
       ("Events", "events"), ("Workflows", "workflows"))
SECURITY_HEADERS = [
    ("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; "
     "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
     "frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]
Authorize = Callable[..., bool]


class Dashboard:
    """The dashboard as a WSGI application; mount it anywhere (``SCRIPT_NAME`` aware).

    ``connection``: a URL, redis-py options, a ``redis.Redis`` or ``None`` (localhost);
    ``prefix``: the BullMQ key prefix whose queues it lists. ``authorize(environ, action)``
    returns whether the request may go on: ``action`` is None for a page, the action's
    name (``"retry"``, ``"promote"``, ``"remove"``, ``"clean"``, ``"pause"``, ``"resume"``,
    ``"drain"``...) for a POST; a one-argument predicate is asked for both. ``read_only``
    hides every action and refuses its POST. ``secret`` signs the CSRF tokens (default: a
    random one kept in Redis under ``orijs_sync:dashboard:secret``, shared by every
    process serving the dashboard; a web framework's own secret key fits too).
    ``queues`` names the queues to list (default: every queue found under ``prefix`` by a
    background SCAN, repeated ``queue_list_ttl`` seconds after each pass).
    ``events_prefix`` and ``workflows_prefix`` are the OriJS providers' ``queue_prefix``
    (the Events and Workflows pages list the queues ``{events_prefix}.*`` and
    ``{workflows_prefix}.*``).
    """

    def __init__(self, connection: ConnectionLike = None, *, prefix: str = "bull",
                 read_only: bool = False, authorize: Optional[Authorize] = None,
                 secret: Union[str, bytes, None] = None, page_size: int = 25,
                 queues: Optional[Sequence[str]] = None, queue_list_ttl: float = 30.0,
                 title: str = "orijs_sync", events_prefix: str = "event",
                 workflows_prefix: str = "workflow") -> None:
        if not isinstance(prefix, str) or not prefix:
            raise errors.InvalidArgument("prefix must be a non-empty string", "prefix", prefix)
        if authorize is not None and not callable(authorize):
            raise errors.InvalidArgumentType("authorize must be a callable or None")
        if not isinstance(page_size, int) or not 1 <= page_size <= 500:
            raise errors.InvalidArgument("page_size must be 1..500", "page_size", page_size)
        self.events_prefix = check.name(events_prefix, "events_prefix")
        self.workflows_prefix = check.name(workflows_prefix, "workflows_prefix")
        self.connection = as_connection(connection)
        self._owns_connection = self.connection is not connection
        self.prefix = prefix
        self.read_only = bool(read_only)
        self.page_size = page_size
        self.title = title
        self._authorize = authorize
        self._authorize_takes_action = _takes_two_arguments(authorize)
        self.signer = security.Signer(
            secret.encode("utf-8") if isinstance(secret, str) else secret,
            load=lambda: security.shared_secret(self.connection.client))
        if queues is not None and (isinstance(queues, str) or
                                   not all(isinstance(q, str) and q for q in queues)):
            raise errors.InvalidArgument("queues must be a list of queue names", "queues",
                                         queues)
        self.queues = QueueDirectory(self.connection.client, prefix, ttl=queue_list_ttl,
                                     fixed=queues)
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True,
            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.templates.filters.update(pretty_json=pretty_json, ms_date=ms_date, clip=clip)
        self._static = {path.name: path for path in (HERE / "static").iterdir()
                        if path.is_file()}
        _load_views()

    # -- WSGI ------------------------------------------------------------------
    def __call__(self, environ: Dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        req = web.Request(environ, self)
        response = self.respond(req)
        headers = [("Content-Type", response.content_type),
                   ("Content-Length", str(len(response.body))), *response.headers]
        if response.content_type.startswith("text/html"):
            headers.extend(SECURITY_HEADERS)
        headers.extend(("Set-Cookie", value) for value in req.set_cookies)
        start_response(response.status_line, headers)
        return [b"" if req.method == "HEAD" else response.body]

    def respond(self, req: web.Request) -> web.Response:
        """The response to one request: static file, error page or a view's."""
        if req.path.startswith("/static/"):
            return self._static_file(req.path[len("/static/"):])
        self._start_session(req)
        try:
            return self._dispatch(req)
        except web.HTTPError as exc:
            return self.error_page(req, exc.status, exc.message)
        except errors.ValidationError as exc:      # a name or id in the URL the library refuses
            return self.error_page(req, 400, str(exc))
        except OUTAGE_ERRORS as exc:
            log.warning("dashboard: Redis unreachable at %s: %s", self.connection.address, exc)
            return self.error_page(req, 503, f"Redis does not answer at "
                                   f"{self.connection.address}: {type(exc).__name__}.",
                                   template="outage.html")
        except Exception:   # noqa: BLE001 - the page says so; the log has the traceback
            log.exception("dashboard: error serving %s %s", req.method, req.path)
            return self.error_page(req, 500, "The dashboard failed to render this page; "
                                   "the details are in the server's log.")

    def _dispatch(self, req: web.Request) -> web.Response:
        if not self.allows(req.environ, None):     # before routing: no page is revealed
            raise web.HTTPError(403, "You may not view this dashboard.")
        entry, params, other_method = web.match(req.method, req.path)
        if entry is None:
            if other_method:
                raise web.HTTPError(405, f"{req.method} is not allowed here")
            raise web.HTTPError(404, "No such page.")
        if entry.action is not None:
            self._check_write(req, entry.action)
        return entry.view(req, **params)

    def _check_write(self, req: web.Request, action: str) -> None:
        if self.read_only:
            raise web.HTTPError(403, "This dashboard is read-only.")
        if not self.allows(req.environ, action):
            raise web.HTTPError(403, f"You may not {action} here.")
        ok, why = security.same_origin(req.environ)
        if not ok:
            raise web.HTTPError(403, f"Refused: {why}.")
        req.read_form()
        session = req.cookies.get(security.SESSION_COOKIE)
        if not self.signer.csrf_ok(session, req.form.get(security.CSRF_FIELD)):
            raise web.HTTPError(403, "Refused: the form's CSRF token is missing or wrong "
                                "(reload the page and try again).")

    def allows(self, environ: Dict[str, Any], action: Optional[str]) -> bool:
        """What ``authorize`` says of this request (always True without one)."""
        if self._authorize is None:
            return True
        if self._authorize_takes_action:
            return bool(self._authorize(environ, action))
        return bool(self._authorize(environ))

    def _start_session(self, req: web.Request) -> None:
        session = req.cookies.get(security.SESSION_COOKIE)
        if not session:
            session = security.new_session()
            req.set_cookies.append(security.cookie_header(
                security.SESSION_COOKIE, session, req.script_name or "/",
                secure=req.environ.get("wsgi.url_scheme") == "https"))
        req.session = session

    # -- rendering -------------------------------------------------------------
    def render(self, req: web.Request, template: str, http_status: int = 200,
               **context: Any) -> web.Response:
        """A page from ``templates/`` (autoescaped) with the layout's context."""
        flash = self._flash(req)
        if req.cookies.get(security.FLASH_COOKIE):
            req.set_cookies.append(security.cookie_header(
                security.FLASH_COOKIE, "", req.script_name or "/", max_age=0))
        page = self.templates.get_template(template).render(
            req=req, board=self, flash=flash, nav=NAV, csrf_field=security.CSRF_FIELD,
            **context)
        return web.Response(page, http_status)

    def _flash(self, req: web.Request) -> Optional[Dict[str, Any]]:
        try:
            return self.signer.unpack(req.cookies.get(security.FLASH_COOKIE))
        except OUTAGE_ERRORS:      # the secret is in Redis: the outage page shows none
            return None

    def error_page(self, req: web.Request, status: int, message: str,
                   template: str = "error.html") -> web.Response:
        try:
            return self.render(req, template, status, status=status, message=message)
        except Exception:   # noqa: BLE001 - the last resort is plain text
            log.exception("dashboard: error page failed")
            return web.Response(f"{status} {message}", status,
                                content_type="text/plain; charset=utf-8")

    def _static_file(self, name: str) -> web.Response:
        path = self._static.get(name)
        if path is None:
            return web.Response(b"not found", 404, content_type="text/plain; charset=utf-8")
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind.endswith(("javascript", "json", "svg+xml")):
            kind += "; charset=utf-8"
        return web.Response(path.read_bytes(), content_type=kind,
                            headers=[("Cache-Control", "public, max-age=3600"),
                                     ("X-Content-Type-Options", "nosniff")])

    # -- mounting ---------------------------------------------------------------
    def django_urls(self, *, allow: Optional[Callable[[Any], bool]] = None) -> List[Any]:
        """URL patterns serving the dashboard in a Django project:
        ``path("jobs/", include(board.django_urls()))``. ``allow(user)`` decides who sees
        it (default: active staff users; anonymous users are sent to the login page)."""
        from .mount import django_urls
        return django_urls(self, allow=allow)

    def mount(self, app: Any, path: str = "/jobs") -> None:
        """Serve the dashboard under ``path`` of a Flask app (or any object with a
        ``wsgi_app`` attribute): werkzeug's ``DispatcherMiddleware`` around it."""
        from .mount import mount_flask
        mount_flask(app, self, path)

    # -- lifecycle -------------------------------------------------------------
    def close(self) -> None:
        """Stop the queue directory's refresh and close the connection it made."""
        self.queues.close()
        if self._owns_connection:
            self.connection.close()

    def __enter__(self) -> "Dashboard":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _takes_two_arguments(func: Optional[Callable[..., Any]]) -> bool:
    if func is None:
        return False
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


def pretty_json(value: Any) -> str:
    """A value as indented JSON text (escaped by the template like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def clip(text: str, limit: int = 100_000) -> str:
    """``text`` cut at ``limit`` characters, saying so (a job's payload may be huge)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text):,} characters; the first {limit:,} shown)"


def ms_date(value: Any) -> str:
    """A timestamp in milliseconds as a UTC date, or an empty string."""
    try:
        ms = int(value)
    except (TypeError, ValueError):
        return ""
    if ms <= 0:
        return ""
    stamp = datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


def _load_views() -> List[Any]:
    """Import every view module (each registers its routes into ``web.ROUTES`` once)."""
    from . import actions, views_groups, views_jobs, views_orijs, views_queues, views_schedulers
    return [views_queues, views_jobs, actions, views_groups, views_schedulers, views_orijs]
