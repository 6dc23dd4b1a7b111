"""The Django test project (django_project/) set up once per session: its settings point
at the session's Redis and at SQLite in a temp dir, its migrations applied."""
from __future__ import annotations

import os
import sys

import pytest
from contrib_helpers import PROJECT


@pytest.fixture(scope="session")
def django_env(redis_url, tmp_path_factory):
    """The environment of the project (this process's, and its manage.py subprocesses')."""
    pytest.importorskip("django")
    env = {"DJANGO_SETTINGS_MODULE": "djsite.settings", "ORIJS_TEST_REDIS_URL": redis_url,
           "ORIJS_TEST_SQLITE": str(tmp_path_factory.mktemp("django") / "db.sqlite3")}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    sys.path.insert(0, str(PROJECT))
    import django
    from django.core.management import call_command
    django.setup()
    call_command("migrate", verbosity=0)
    yield env
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value

