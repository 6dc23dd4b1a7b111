"""Shared by the contrib tests: where the checkout and the Django project are, and the
environment of a subprocess that imports the checkout."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "django_project"


def subprocess_env(extra):
    """This process's environment plus ``extra``, the checkout first on PYTHONPATH."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, **extra, "PYTHONPATH": path}
