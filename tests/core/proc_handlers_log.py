"""A handler the logging test runs in a child process, imported there by name."""
from __future__ import annotations

from typing import Any


def fails(job: Any) -> None:
    raise KeyError("no such template")
