"""Run a function in a child process made by ``os.fork()``, or by ``multiprocessing``
with the ``fork`` or ``spawn`` start method, and get back what it returned.

The function returns something JSON-able; an exception in the child comes back as an
``AssertionError`` carrying the child's traceback. Every wait is bounded; a child that
does not answer in time is killed (by its PID) and the test fails.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import time
import traceback
from typing import Any, Callable

MODES = ("os.fork", "fork", "spawn")


def _outcome(fn: Callable[..., Any], args: Any) -> str:
    try:
        return json.dumps({"ok": fn(*args)})
    except BaseException:  # noqa: BLE001 - reported to the parent
        return json.dumps({"error": traceback.format_exc()})


def _mp_child(conn: Any, fn: Callable[..., Any], args: Any) -> None:
    conn.send(_outcome(fn, args))
    conn.close()


def _decode(text: str) -> Any:
    out = json.loads(text)
    if "error" in out:
        raise AssertionError(f"child failed:\n{out['error']}")
    return out["ok"]


def _os_fork(fn: Callable[..., Any], args: Any, timeout: float) -> Any:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:      # the child: answer, then leave without running the parent's cleanup
        code = 1
        try:
            os.close(read_fd)
            data = _outcome(fn, args).encode()
            while data:
                data = data[os.write(write_fd, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([read_fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"os.fork child {pid} gave no answer within {timeout}s")
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    return _decode(b"".join(chunks).decode())


def _multiprocessing(mode: str, fn: Callable[..., Any], args: Any, timeout: float) -> Any:
    ctx = multiprocessing.get_context(mode)
    parent_end, child_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_mp_child, args=(child_end, fn, args), daemon=True)
    proc.start()
    child_end.close()
    try:
        if not parent_end.poll(timeout):
            raise AssertionError(f"{mode} child {proc.pid} gave no answer within {timeout}s")
        return _decode(parent_end.recv())
    finally:
        parent_end.close()
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join(10)


def run_in_child(mode: str, fn: Callable[..., Any], *args: Any, timeout: float = 60.0) -> Any:
    """``fn(*args)`` in a child made by ``mode`` (one of :data:`MODES`); its return value."""
    if mode == "os.fork":
        return _os_fork(fn, args, timeout)
    return _multiprocessing(mode, fn, args, timeout)


def start_child(fn: Callable[..., Any], *args: Any) -> int:
    """``fn(*args)`` in an ``os.fork()`` child running beside the test (which coordinates
    with it through Redis); its PID. The child leaves by ``os._exit``, never running the
    parent's cleanup; the test ends it with :func:`end_child`."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn(*args)
            code = 0
        finally:
            os._exit(code)
    return pid


def end_child(pid: int, timeout: float = 20.0) -> None:
    """Wait for a child of :func:`start_child`; SIGKILL it (by its PID) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
