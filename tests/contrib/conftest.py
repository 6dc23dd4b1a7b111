"""The Django test project (django_project/) set up once per session: its settings point
at the session's Redis and at SQLite in a temp dir, its migrations applied."""
from __future__ import annotations

import pytest
from contrib_helpers import restore_env, setup_django


@pytest.fixture(scope="session")
def django_env(redis_url, tmp_path_factory):
    """The environment of the project (this process's, and its manage.py subprocesses')."""
    pytest.importorskip("django")
    env, saved = setup_django(redis_url, tmp_path_factory.mktemp("django") / "db.sqlite3")
    yield env
    restore_env(saved)
