"""A non-editable install ships the Lua scripts: build the wheel, install it in a
fresh venv, add and process a job from there."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(cmd, **kw):
    # The installed wheel, not a checkout on PYTHONPATH, is what the venv must import.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300,
                          env=env, **kw)


def test_wheel_ships_lua_and_processes_a_job(tmp_path, redis_url, namespace):
    run([sys.executable, "-m", "pip", "wheel", "--no-deps",
         "-w", str(tmp_path / "dist"), str(ROOT)])
    wheel = next((tmp_path / "dist").glob("orijs_sync-*.whl"))
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    run([str(py), "-m", "pip", "install", "-q", str(wheel)])
    script = tmp_path / "use_it.py"
    script.write_text(textwrap.dedent(f"""
        import orijs_sync, pathlib
        assert "site-packages" in orijs_sync.__file__, orijs_sync.__file__
        from orijs_sync import Queue, QueueEvents, Worker
        q = Queue("pkg-{namespace}", connection={redis_url!r})
        ev = QueueEvents("pkg-{namespace}", connection={redis_url!r})
        job = q.add("x", {{"n": 20}})
        with Worker("pkg-{namespace}", lambda j: j.data["n"] + 1, connection={redis_url!r}):
            print(job.wait_until_finished(ev, timeout=20))
        ev.close()
        from orijs_sync.groups import GroupQueue, GroupWorker      # lua/groups/ is shipped too
        gq = GroupQueue("pkg-g-{namespace}", connection={redis_url!r}, keep_completed=1)
        gjob = gq.add(group_id="g", data={{"n": 1}})
        with GroupWorker(gq, lambda j: j.data["n"] + 1):
            assert gq.wait_for_empty(20)
        print(gq.get_job(gjob.id).returnvalue)
    """))
    out = run([str(py), str(script)], cwd=str(tmp_path))
    assert out.stdout.split() == ["21", "2"]
