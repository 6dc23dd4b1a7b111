"""Shared by the contrib tests: where the checkout and the Django project are, and the
environment of a subprocess that imports the checkout."""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "django_project"


def subprocess_env(extra):
    """This process's environment plus ``extra``, the checkout first on PYTHONPATH."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, **extra, "PYTHONPATH": path}


def setup_django(redis_url, sqlite_path):
    """Point the project at this Redis and SQLite file, set Django up, apply the
    migrations; returns the environment set (the caller restores it with
    ``restore_env``). Once per process: where Django is set up already (by another test
    folder's fixture), its environment is returned as it is, nothing to restore."""
    from django.apps import apps
    if apps.ready and os.environ.get("DJANGO_SETTINGS_MODULE") == "djsite.settings":
        keys = ("DJANGO_SETTINGS_MODULE", "ORIJS_TEST_REDIS_URL", "ORIJS_TEST_SQLITE")
        return {key: os.environ[key] for key in keys}, {}
    env = {"DJANGO_SETTINGS_MODULE": "djsite.settings", "ORIJS_TEST_REDIS_URL": redis_url,
           "ORIJS_TEST_SQLITE": str(sqlite_path)}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    if str(PROJECT) not in sys.path:
        sys.path.insert(0, str(PROJECT))
    import django
    from django.core.management import call_command
    django.setup()
    call_command("migrate", verbosity=0)
    return env, saved


def restore_env(saved):
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
