"""The package is typed (py.typed) and passes ``mypy --strict`` and ``ruff check`` with the
pinned versions of the test extra (pyproject.toml configures both); .ci/run runs them too.
Its imports go one way, down the layers of docs/architecture.md, with no cycle at run time."""
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


# The package's layers, bottom up (docs/architecture.md draws them). A module may import,
# at run time (deferred imports inside functions included), only modules of its own layer
# or of lower ones; an import under ``if TYPE_CHECKING:`` may point up (annotations only).
# A name is matched as a module or the package above it; the bare "orijs_sync" is the
# package's own ``__init__`` alone.
LAYERS = (
    ("errors", ("orijs_sync.errors",)),
    ("base", ("orijs_sync.base",)),                   # plumbing: no Redis, no jobs
    ("store", ("orijs_sync.store",)),                 # the Redis layer
    ("model", ("orijs_sync.keys", "orijs_sync.options", "orijs_sync.job", "orijs_sync._job_actions",
               "orijs_sync._job_flow", "orijs_sync._job_manual", "orijs_sync._job_children",
               "orijs_sync._job_state",
               "orijs_sync.job_scheduler")),   # what the engine moves
    ("engine", ("orijs_sync.engine",)),
    ("waits", ("orijs_sync.waits",)),
    ("public", ("orijs_sync", "orijs_sync.queue", "orijs_sync._queue_control",
                "orijs_sync._queue_schedulers", "orijs_sync._queue_getters",
                "orijs_sync._queue_writes", "orijs_sync._queue_repeatable",
                "orijs_sync.metrics", "orijs_sync.worker",
                "orijs_sync.worker_group", "orijs_sync.queue_events", "orijs_sync.flow_producer",
                "orijs_sync.testing", "orijs_sync.connection", "orijs_sync._processes",
                "orijs_sync._worker_run", "orijs_sync._worker_cancel", "orijs_sync._worker_events",
                "orijs_sync._worker_manual", "orijs_sync._worker_options", "orijs_sync.tasks",
                "orijs_sync._queue_bulk", "orijs_sync._queue_limits", "orijs_sync._worker_limits",
                "orijs_sync._flow_options")),
    ("orijs", ("orijs_sync.groups", "orijs_sync.events", "orijs_sync.workflows")),
    ("edges", ("orijs_sync.integrations", "orijs_sync.prometheus", "orijs_sync.otel",
               "orijs_sync.cli", "orijs_sync.contrib", "orijs_sync.dashboard")),
)

# The imports that point up, for annotations only (each would be a cycle at run time): the
# engine serves Workers (it reads their state, they own their queue's) and settles the
# waiters of this process's QueueEvents; an events thread hands what it reads to its
# QueueEvents; a job waits through a QueueEvents; a scheduler's methods take its Queue.
TYPE_ONLY_UP = {
    ("orijs_sync.engine.engine", "orijs_sync.worker"),
    ("orijs_sync.engine.engine_roles", "orijs_sync.worker"),
    ("orijs_sync.engine.local", "orijs_sync.queue_events"),
    ("orijs_sync.engine.local", "orijs_sync.worker"),
    ("orijs_sync.engine.locks", "orijs_sync.worker"),
    ("orijs_sync.engine.processing", "orijs_sync.worker"),
    ("orijs_sync.job", "orijs_sync.queue_events"),
    ("orijs_sync.job_scheduler", "orijs_sync.queue"),
    ("orijs_sync.waits.event_tailer", "orijs_sync.queue_events"),
}


def _layer_of(module: str) -> int:
    best, found = -1, None
    for rank, (_, names) in enumerate(LAYERS):
        for name in names:
            if module == name or (name != "orijs_sync" and module.startswith(name + ".")):
                if len(name) > best:
                    best, found = len(name), rank
    assert found is not None, f"{module} is in no layer: add it to LAYERS"
    return found


def _package_imports():
    """(module, imported module, under TYPE_CHECKING, line) for every import of the package
    by the package, deferred ones included."""
    import ast
    modules = {}
    for path in sorted((ROOT / "orijs_sync").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    found = []
    for name, (path, is_pkg) in modules.items():
        def visit(node, typing_only):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    for sub in child.body:
                        visit_one(sub, True)
                    for sub in child.orelse:
                        visit_one(sub, typing_only)
                else:
                    visit_one(child, typing_only)

        def visit_one(node, typing_only):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    package = name.split(".") if is_pkg else name.split(".")[:-1]
                    package = package[:len(package) - (node.level - 1)]
                    base = ".".join(package + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            for target in targets:
                if target == "orijs_sync" or target.startswith("orijs_sync."):
                    found.append((name, target, typing_only, node.lineno))
            visit(node, typing_only)

        visit(ast.parse(path.read_text()), False)
    return modules, found


def test_imports_go_one_way():
    _, imports = _package_imports()
    up, allowed = [], set()
    for module, target, typing_only, line in imports:
        if _layer_of(target) <= _layer_of(module):
            continue
        if typing_only and (module, target) in TYPE_ONLY_UP:
            allowed.add((module, target))
            continue
        kind = "under TYPE_CHECKING (add it to TYPE_ONLY_UP, with its reason)" if typing_only \
            else "at run time"
        up.append(f"{module}:{line} imports {target} {kind}: "
                  f"{LAYERS[_layer_of(module)][0]} < {LAYERS[_layer_of(target)][0]}")
    assert up == [], "\n".join(up)
    assert allowed == TYPE_ONLY_UP, f"no longer imported, drop: {TYPE_ONLY_UP - allowed}"


def test_no_import_cycle_at_run_time():
    modules, imports = _package_imports()
    graph = {name: set() for name in modules}
    for module, target, typing_only, _ in imports:
        # a submodule's import of the package itself (``from .. import errors``) names
        # the module it takes; the package's own __init__ is not a dependency of it
        if not typing_only and target in modules and target != module:
            graph[module].add(target)
    cycles = []
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == [], "\n".join(cycles)
