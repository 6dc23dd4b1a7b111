"""A small HTTP client for the dashboard tests: keeps cookies, never raises on 4xx/5xx,
follows no redirect unless asked, and reads the CSRF token off a page."""
from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, Optional, Tuple


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


class Client:
    def __init__(self, base: str, follow: bool = False) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        handlers = [urllib.request.HTTPCookieProcessor(self.jar)]
        if not follow:
            handlers.append(_NoRedirect())
        self.opener = urllib.request.build_opener(*handlers)

    def request(self, path: str, form: Optional[Dict[str, str]] = None,
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], str]:
        body = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(self.base + path, data=body, headers=headers or {})
        try:
            with self.opener.open(req, timeout=15) as reply:
                return reply.status, dict(reply.headers), reply.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode("utf-8")

    def get(self, path: str) -> Tuple[int, Dict[str, str], str]:
        return self.request(path)

    def post(self, path: str, form: Dict[str, str],
             headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], str]:
        return self.request(path, form, headers)


def csrf_token(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "no CSRF token on the page"
    return found.group(1)
