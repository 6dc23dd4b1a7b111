"""Flask: the ``OrijsSync`` extension (the ``init_app`` pattern).

    from orijs_sync.contrib.flask import OrijsSync

    orijs = OrijsSync()

    def create_app() -> Flask:
        app = Flask(__name__)
        app.config["ORIJS_SYNC_URL"] = "redis://127.0.0.1:6379/0"
        orijs.init_app(app)
        return app

    @app.post("/signup/<email>")
    def signup(email):
        job = orijs.queue("emails").add("welcome", {"to": email})
        answer = orijs.events.emit("user.created", {"email": email}).result(timeout=5)

Configuration (checked by ``init_app``; any other ``ORIJS_SYNC_*`` key is refused):
``ORIJS_SYNC_URL`` (a Redis URL) or ``ORIJS_SYNC_CONNECTION`` (anything ``Queue`` takes:
a dict of options, a ``redis.Redis``...), ``ORIJS_SYNC_PREFIX``,
``ORIJS_SYNC_DEFAULT_JOB_OPTIONS``, ``ORIJS_SYNC_EVENTS`` and ``ORIJS_SYNC_WORKFLOWS`` (the
providers' options, see ``orijs_sync.contrib.hub.Hub``). Queues and providers are
made on first use, shared by the app's threads, fork-safe under gunicorn ``--preload``,
and stopped at exit (or by ``OrijsSync.close``).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from flask import Flask, current_app, has_app_context

from .. import errors
from ..base import validate as check
from ..events import BullMQEventProvider
from ..queue import Queue
from ..workflows import BullMQWorkflowProvider
from .hub import Hub

__all__ = ["OrijsSync", "CONFIG_KEYS", "EXTENSION"]

EXTENSION = "orijs_sync"        # the key of app.extensions
# app.config key -> the hub setting it gives
CONFIG_KEYS = {"ORIJS_SYNC_URL": "connection", "ORIJS_SYNC_CONNECTION": "connection",
               "ORIJS_SYNC_PREFIX": "prefix",
               "ORIJS_SYNC_DEFAULT_JOB_OPTIONS": "default_job_options",
               "ORIJS_SYNC_EVENTS": "events", "ORIJS_SYNC_WORKFLOWS": "workflows"}


def _ours(key: Any) -> bool:
    return isinstance(key, str) and (key == "ORIJS_SYNC" or key.startswith("ORIJS_SYNC_"))


def hub_settings(config: Mapping[str, Any]) -> Dict[str, Any]:
    """The hub settings an app's config gives; an unknown ``ORIJS_SYNC*`` key, or both
    ways of giving the connection, refused."""
    given = {key: value for key, value in config.items() if _ours(key)}
    check.known_keys(given, CONFIG_KEYS, "app.config")
    if "ORIJS_SYNC_URL" in given:
        if "ORIJS_SYNC_CONNECTION" in given:
            raise errors.InvalidArgument("app.config has ORIJS_SYNC_URL and "
                                         "ORIJS_SYNC_CONNECTION: give one of them",
                                         "app.config['ORIJS_SYNC_URL']")
        check.string(given["ORIJS_SYNC_URL"], "app.config['ORIJS_SYNC_URL']")
    return {CONFIG_KEYS[key]: value for key, value in given.items()}


def _config_names(config: Mapping[str, Any]) -> Dict[str, str]:
    """How errors name each hub setting: the config key that gives it."""
    names = {setting: f"app.config[{key!r}]" for key, setting in CONFIG_KEYS.items()}
    if "ORIJS_SYNC_CONNECTION" not in config:
        names["connection"] = "app.config['ORIJS_SYNC_URL']"
    return names


class OrijsSync:
    """The extension: ``OrijsSync(app)``, or ``OrijsSync()`` then ``init_app(app)`` for each
    app. ``queue``, ``events`` and ``workflows`` serve the current app (in a request, a
    CLI command or ``with app.app_context()``), else the app given to the constructor."""

    def __init__(self, app: Optional[Flask] = None) -> None:
        self._app: Optional[Flask] = None
        if app is not None:
            self.init_app(app)
            self._app = app

    def init_app(self, app: Flask) -> None:
        """Check the app's ``ORIJS_SYNC_*`` config and give it its hub (nothing connects)."""
        if not isinstance(app, Flask):
            check.bad_type("app", app, "a Flask app")
        if EXTENSION in app.extensions:
            raise errors.InvalidStateError(f"orijs_sync is already set up on app {app.name!r}")
        app.extensions[EXTENSION] = Hub(hub_settings(app.config), where="app.config",
                                        names=_config_names(app.config))

    def hub(self, app: Optional[Flask] = None) -> Hub:
        """The hub of ``app`` (default: the current app, else the constructor's)."""
        if app is not None and not isinstance(app, Flask):
            check.bad_type("app", app, "a Flask app")
        app = app or self._current_app()
        hub = app.extensions.get(EXTENSION)
        if not isinstance(hub, Hub):
            raise errors.InvalidStateError(f"orijs_sync is not set up on app {app.name!r}: "
                                           "call init_app(app)")
        return hub

    def _current_app(self) -> Flask:
        if has_app_context():
            return current_app._get_current_object()  # type: ignore[attr-defined,no-any-return]
        if self._app is not None:
            return self._app
        raise errors.InvalidStateError("no Flask app here: use it in a request or inside "
                                       "`with app.app_context():`, or pass the app")

    def queue(self, name: str) -> Queue:
        """The app's queue ``name`` (one per process, made on first use)."""
        return self.hub().queue(name)

    @property
    def events(self) -> BullMQEventProvider:
        """The app's event provider, started on first use, stopped at exit."""
        return self.hub().events

    @property
    def workflows(self) -> BullMQWorkflowProvider:
        """The app's workflow provider, started on first use, stopped at exit."""
        return self.hub().workflows

    def mount_dashboard(self, app: Flask, path: str = "/jobs", **options: Any) -> Any:
        """Serve the dashboard (``orijs_sync.dashboard.Dashboard``) under ``path`` of
        ``app``, on the app's Redis connection and prefix; ``options`` are the Dashboard's
        other keyword options (``authorize``, ``read_only``, ``secret``...). The events and
        workflows pages follow ``ORIJS_SYNC_EVENTS``/``ORIJS_SYNC_WORKFLOWS``'s
        ``queue_prefix``. Returns the Dashboard."""
        from ..dashboard import Dashboard
        hub = self.hub(app)
        board = Dashboard(hub.connection, **{**hub.dashboard_options(), **options})
        board.mount(app, path)
        return board

    def close(self, app: Optional[Flask] = None, timeout: Optional[float] = None) -> None:
        """Stop the app's providers and close its queues now (else at exit); the
        extension refuses calls for it afterwards."""
        self.hub(app).close(timeout=timeout)
