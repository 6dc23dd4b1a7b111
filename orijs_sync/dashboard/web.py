"""The request a view gets, the response it returns, and the routing table the view
modules register into (``@route("GET", "/queues/{queue}")``)."""
from __future__ import annotations

import re
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Pattern, Tuple
from urllib.parse import parse_qs, quote, unquote, urlencode

from . import security

if TYPE_CHECKING:
    from .app import Dashboard

MAX_FORM_BYTES = 64 * 1024
STATUS_TEXT = {200: "OK", 302: "Found", 303: "See Other", 304: "Not Modified",
               400: "Bad Request", 403: "Forbidden", 404: "Not Found",
               405: "Method Not Allowed", 413: "Payload Too Large",
               500: "Internal Server Error", 503: "Service Unavailable"}


class Response:
    """What a view returns: a status, a body and headers (``content_type`` apart)."""

    def __init__(self, body: "str | bytes" = b"", status: int = 200, *,
                 content_type: str = "text/html; charset=utf-8",
                 headers: Optional[List[Tuple[str, str]]] = None) -> None:
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.status = status
        self.content_type = content_type
        self.headers: List[Tuple[str, str]] = list(headers or [])

    @classmethod
    def redirect(cls, location: str) -> "Response":
        """A 303 to ``location`` (a URL made by ``Request.url``)."""
        return cls(b"", 303, headers=[("Location", location)])

    @property
    def status_line(self) -> str:
        return f"{self.status} {STATUS_TEXT.get(self.status, 'Unknown')}"


class HTTPError(Exception):
    """Raised by a view to answer with an error page: ``status`` and a message shown."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Request:
    """One request: ``method``, ``path`` (below the mount point), ``query`` and ``form``
    (first value of each field), ``cookies``, ``environ``, the ``dashboard`` (its
    Redis client, prefix and templates) and the ``csrf_token`` its forms carry."""

    def __init__(self, environ: Dict[str, Any], dashboard: "Dashboard") -> None:
        self.environ = environ
        self.dashboard = dashboard
        self.method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        self.script_name = _wsgi_text(environ.get("SCRIPT_NAME", "")).rstrip("/")
        self.path = _wsgi_text(environ.get("PATH_INFO", "")) or "/"
        self.query = _first_values(parse_qs(str(environ.get("QUERY_STRING", ""))))
        cookie = SimpleCookie()
        try:
            cookie.load(str(environ.get("HTTP_COOKIE", "")))
        except Exception:   # noqa: BLE001 - a malformed Cookie header counts as none
            cookie = SimpleCookie()
        self.cookies = {key: morsel.value for key, morsel in cookie.items()}
        self.form: Dict[str, str] = {}
        self.csrf_token = ""
        self.set_cookies: List[str] = []    # Set-Cookie values added to the response

    def read_form(self) -> None:
        """Parse an urlencoded POST body (at most ``MAX_FORM_BYTES``)."""
        try:
            length = int(self.environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise HTTPError(400, "bad Content-Length") from None
        if length > MAX_FORM_BYTES:
            raise HTTPError(413, "form too large")
        body = self.environ["wsgi.input"].read(length) if length > 0 else b""
        self.form = _first_values(parse_qs(body.decode("utf-8", "replace")))

    def url(self, *segments: Any, **query: Any) -> str:
        """The URL of a page under the mount point: each segment quoted twice (a queue
        name or a job id may hold any character, "/" too: the server unquotes the path
        once, ``match`` once more), ``query`` added (None and "" values left out)."""
        path = "/".join(quote(quote(str(segment), safe=""), safe="") for segment in segments)
        url = f"{self.script_name}/{path}"
        params = {k: v for k, v in query.items() if v is not None and v != ""}
        return f"{url}?{urlencode(params)}" if params else url

    def flash(self, message: str, kind: str = "ok") -> None:
        """A message shown on the next page (a signed cookie): ``kind`` "ok" or "error"."""
        value = self.dashboard.signer.pack({"message": message, "kind": kind})
        self.set_cookies.append(security.cookie_header(
            security.FLASH_COOKIE, value, self.script_name or "/"))

    def can(self, action: str) -> bool:
        """Whether this request may run ``action`` (not read-only, and ``authorize`` says
        yes): templates show an action's form only then."""
        return not self.dashboard.read_only and self.dashboard.allows(self.environ, action)

    @property
    def prefix(self) -> str:
        return self.dashboard.prefix

    @property
    def client(self) -> Any:
        return self.dashboard.connection.client

    def int_param(self, name: str, default: int, minimum: int = 0,
                  maximum: int = 10 ** 9) -> int:
        """A whole number from the query string, clamped to ``minimum..maximum``."""
        try:
            value = int(self.query.get(name, default))
        except ValueError:
            value = default
        return max(minimum, min(maximum, value))


View = Callable[..., Response]


class Route:
    """One entry of the routing table: ``action`` names a write (``authorize``'s second
    argument); None for a read."""

    def __init__(self, method: str, pattern: str, view: View, action: Optional[str]) -> None:
        self.method = method
        self.pattern = pattern
        self.regex: Pattern[str] = re.compile(
            "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(pattern)) + "/?$")
        self.view = view
        self.action = action


ROUTES: List[Route] = []


def route(method: str, pattern: str, *, action: Optional[str] = None) -> Callable[[View], View]:
    """Register a view: ``pattern`` like ``/queues/{queue}/jobs/{job_id}``; a POST view
    names its ``action``."""
    if method == "POST" and not action:
        raise ValueError(f"{pattern}: a POST route names its action")

    def register(view: View) -> View:
        ROUTES.append(Route(method, pattern, view, action))
        return view
    return register


def match(method: str, path: str) -> Tuple[Optional[Route], Dict[str, str], bool]:
    """(route, url params, whether the path exists under another method)."""
    other_method = False
    for entry in ROUTES:
        found = entry.regex.match(path)
        if found:
            if entry.method == method or (method == "HEAD" and entry.method == "GET"):
                return entry, {k: unquote(v) for k, v in found.groupdict().items()}, False
            other_method = True
    return None, {}, other_method


def _wsgi_text(value: Any) -> str:
    """A WSGI environ string (bytes as latin-1) as the UTF-8 text it carries."""
    text = str(value)
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


def _first_values(parsed: Mapping[str, Iterable[str]]) -> Dict[str, str]:
    return {key: next(iter(values), "") for key, values in parsed.items()}
