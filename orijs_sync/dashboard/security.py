"""CSRF tokens and signed cookies.

Each browser gets a random session cookie (HttpOnly, SameSite=Strict); the CSRF token
its forms carry is the HMAC of that cookie under the dashboard's secret, so a POST is
accepted only with the token of the cookie it carries (a page of another site can make
the browser send the cookie, never read the token). The flash message shown after an
action travels in a cookie signed the same way, so no link can show a forged one.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlsplit

SESSION_COOKIE = "orijs_dashboard_session"
FLASH_COOKIE = "orijs_dashboard_flash"
CSRF_FIELD = "csrf_token"


class Signer:
    """HMAC-SHA256 under one secret (the dashboard's)."""

    def __init__(self, secret: Optional[bytes]) -> None:
        self.secret = secret or secrets.token_bytes(32)

    def sign(self, value: str) -> str:
        digest = hmac.new(self.secret, value.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def csrf_token(self, session: str) -> str:
        return self.sign("csrf:" + session)

    def csrf_ok(self, session: Optional[str], token: Optional[str]) -> bool:
        if not session or not token:
            return False
        return hmac.compare_digest(self.csrf_token(session), token)

    def pack(self, payload: Dict[str, Any]) -> str:
        """``payload`` as a signed cookie value (base64 JSON, a dot, its signature)."""
        body = base64.urlsafe_b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")
        return f"{body}.{self.sign('flash:' + body)}"

    def unpack(self, value: Optional[str]) -> Optional[Dict[str, Any]]:
        if not value or "." not in value:
            return None
        body, signature = value.rsplit(".", 1)
        if not hmac.compare_digest(self.sign("flash:" + body), signature):
            return None
        try:
            payload = json.loads(base64.urlsafe_b64decode(body.encode("ascii")))
        except ValueError:
            return None
        return payload if isinstance(payload, dict) else None


def new_session() -> str:
    return secrets.token_urlsafe(32)


def cookie_header(name: str, value: str, path: str, *, max_age: Optional[int] = None,
                  secure: bool = False) -> str:
    parts = [f"{name}={value}", f"Path={path or '/'}", "HttpOnly", "SameSite=Strict"]
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def same_origin(environ: Dict[str, Any]) -> Tuple[bool, str]:
    """Whether the Origin (else the Referer) header, when there is one, names this host."""
    host = str(environ.get("HTTP_HOST") or "")
    if not host:
        name, port = environ.get("SERVER_NAME", ""), str(environ.get("SERVER_PORT", ""))
        host = f"{name}:{port}" if port not in ("", "80", "443") else str(name)
    for header in ("HTTP_ORIGIN", "HTTP_REFERER"):
        value = environ.get(header)
        if value:
            if value == "null":
                return False, f"{header[5:].title()} is null"
            if urlsplit(str(value)).netloc.lower() != host.lower():
                return False, f"{header[5:].title()} {value!r} is not this site"
            return True, ""
    return True, ""
