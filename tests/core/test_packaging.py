"""The package as a user gets it, outside the checkout.

- ``python -m build`` (the dev extra brings ``build``) makes an sdist and a wheel that ship
  every file tracked under orijs_sync/ (Python, py.typed, the Lua scripts, any templates/
  or static/ of a subpackage) with LICENSE and README.md.
- Each of them, installed (not editable) in a clean venv, runs examples/demo.py and
  examples/groups_demo.py copied to a folder outside the checkout (each starts its own
  redis-server), and the example of docs/quickstart.md against the test Redis.
- A plain ``pip install -e .`` (no flag) writes a path entry that ``mypy --strict`` follows.

The venvs take the dependencies from the package index pip is configured with (CI has
network); nothing here reads the checkout through PYTHONPATH.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART_URL = '"redis://127.0.0.1:6379/0"'
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _env() -> Dict[str, str]:
    # The installed package, never a checkout on a path or a Redis from the caller.
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "MYPYPATH", "REDIS_URL", "PYTHONHOME")}


def run(cmd: List[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=_env(), text=True,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def venv(path: Path) -> Path:
    """A venv without the machine's site-packages; its python."""
    run([sys.executable, "-m", "venv", path], cwd=path.parent)
    return path / "bin" / "python"


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=out)
    (sdist,), (wheel,) = out.glob("orijs_sync-*.tar.gz"), out.glob("orijs_sync-*.whl")
    return sdist, wheel


def _tracked_package_files() -> Set[str]:
    listed = run(["git", "ls-files", "orijs_sync"], cwd=ROOT, timeout=60).stdout.split()
    return {name for name in listed if (ROOT / name).is_file()}


def test_sdist_and_wheel_ship_every_package_file(dists: Tuple[Path, Path]) -> None:
    sdist, wheel = dists
    with tarfile.open(sdist) as tar:
        in_sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    with zipfile.ZipFile(wheel) as whl:
        in_wheel = set(whl.namelist())
    tracked = _tracked_package_files()
    assert {"orijs_sync/py.typed", "orijs_sync/lua/moveToActive.lua",
            "orijs_sync/lua/includes/metrics.lua", "orijs_sync/lua/groups/reserve.lua"} <= tracked
    assert sorted(tracked - in_sdist) == []
    assert sorted(tracked - in_wheel) == []
    assert {"LICENSE", "README.md", "setup.cfg", "pyproject.toml"} <= in_sdist
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in in_wheel), in_wheel
    # Nothing from outside the package: tests, bench, examples stay in the repository.
    assert {name.split("/")[0] for name in in_wheel} == {
        "orijs_sync", wheel.name.split("-py3")[0] + ".dist-info"}


def _check_installed(py: Path, work: Path, redis_url: str, namespace: str) -> None:
    where = run([py, "-c", "import orijs_sync; print(orijs_sync.__file__)"], cwd=work).stdout
    assert str(py.parents[1]) in where and "site-packages" in where, where
    for demo in ("demo.py", "groups_demo.py"):
        (work / demo).write_text((ROOT / "examples" / demo).read_text())
    out = run([py, "demo.py"], cwd=work, timeout=120).stdout
    assert "'completed': 20, 'failed': 1" in out.splitlines()[-1], out
    out = run([py, "groups_demo.py"], cwd=work, timeout=120).stdout
    assert "every customer's orders ran in order" in out, out
    code = "\n".join(PYTHON_BLOCK.findall((ROOT / "docs" / "quickstart.md").read_text()))
    assert QUICKSTART_URL in code and '"emails"' in code
    code = code.replace(QUICKSTART_URL, repr(redis_url)).replace('"emails"',
                                                                 repr(f"emails-{namespace}"))
    (work / "quickstart.py").write_text(code)
    out = run([py, "quickstart.py"], cwd=work, timeout=120).stdout
    assert "{'sent': 'a@example.com'}" in out, out


def test_wheel_then_sdist_installed_run_the_demos_and_the_quickstart(
        dists: Tuple[Path, Path], tmp_path: Path, redis_url: str, namespace: str) -> None:
    sdist, wheel = dists
    py = venv(tmp_path / "venv")
    work = tmp_path / "elsewhere"
    work.mkdir()
    run([py, "-m", "pip", "install", "-q", wheel], cwd=work)
    _check_installed(py, work, redis_url, namespace)
    # The sdist builds its own wheel: what it lacks, that wheel lacks.
    run([py, "-m", "pip", "uninstall", "-q", "-y", "orijs_sync"], cwd=work)
    run([py, "-m", "pip", "install", "-q", "--no-deps", sdist], cwd=work)
    _check_installed(py, work, redis_url, namespace)


USER_CODE = """\
from orijs_sync import Job, Queue


def handle(job: Job) -> str:
    return str(job.data)


queue: int = Queue("emails", connection="redis://127.0.0.1:6379/0")  # the deliberate error
"""


def test_a_plain_editable_install_is_followed_by_mypy(tmp_path: Path) -> None:
    # A clean venv (not --system-site-packages: the machine may have orijs_sync installed
    # itself, and finding that one would prove nothing) and `pip install --no-deps -e`:
    # where orijs_sync resolves from needs none of its dependencies. find_spec locates the
    # package without importing it, and mypy reads its source; what it imports and the venv
    # lacks (redis, ...) is silenced, as behind any installed package. This mypy (the dev
    # extra's) checks for that venv's interpreter, through its site-packages only.
    py = venv(tmp_path / "venv")
    user = tmp_path / "user"
    user.mkdir()
    run([py, "-m", "pip", "install", "-q", "--no-deps", "-e", ROOT], cwd=user)
    site = Path(run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                    cwd=user).stdout.strip())
    assert not list(site.glob("__editable__*finder*")), "an import hook mypy cannot follow"
    (pth,) = site.glob("__editable__.orijs_sync-*.pth")
    assert Path(pth.read_text().strip()).resolve() == ROOT
    origin = run([py, "-c", "import importlib.util as u; print(u.find_spec('orijs_sync').origin)"],
                 cwd=user).stdout.strip()
    assert Path(origin) == ROOT / "orijs_sync" / "__init__.py"
    (user / "user.py").write_text(USER_CODE)
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-executable", str(py),
                           "--cache-dir", str(tmp_path / "cache"), "user.py"], cwd=str(user),
                          env=_env(), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.stdout.splitlines() == [
        'user.py:8: error: Incompatible types in assignment (expression has type "Queue", '
        'variable has type "int")  [assignment]',
        "Found 1 error in 1 file (checked 1 source file)"], proc.stdout + proc.stderr
