"""The package is typed (py.typed) and passes ``mypy --strict`` and ``ruff check`` with the
pinned versions of the test extra (pyproject.toml configures both); .ci/run runs them too."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)


def test_py_typed_is_shipped():
    assert (ROOT / "orijs_sync" / "py.typed").is_file()
    assert "py.typed" in (ROOT / "setup.cfg").read_text()


def test_mypy_strict_passes():
    proc = _run("mypy")
    assert proc.returncode == 0, f"mypy --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert "strict = true" in (ROOT / "pyproject.toml").read_text()


def test_ruff_check_passes():
    proc = _run("ruff", "check", "orijs_sync", "examples")
    assert proc.returncode == 0, f"ruff check failed:\n{proc.stdout}\n{proc.stderr}"
