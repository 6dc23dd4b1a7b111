"""``orijs-sync dashboard``: serve the dashboard from a threaded wsgiref server until
SIGINT/SIGTERM (loopback unless ``--host`` says otherwise)."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from socketserver import ThreadingMixIn
from typing import Any, Optional
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

log = logging.getLogger("orijs_sync.dashboard")


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _LoggingHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - stdlib's name
        log.info("%s %s", self.address_string(), format % args)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - stdlib's name
        pass


def threaded_server(app: Any, host: str = "127.0.0.1", port: int = 0, *,
                    log_requests: bool = True) -> WSGIServer:
    """A wsgiref server answering each request on a thread of its own (``port=0``: a
    free one, read back from ``server.server_port``); the caller runs ``serve_forever``
    and, to stop, ``shutdown`` and ``server_close``. Also used by the tests and the
    benchmark."""
    return make_server(host, port, app, server_class=_ThreadingServer,
                       handler_class=_LoggingHandler if log_requests else _QuietHandler)


def add_command(sub: Any) -> None:
    """Add the ``dashboard`` subcommand to the ``orijs-sync`` parser's subparsers."""
    p = sub.add_parser("dashboard", help="serve the web dashboard (loopback by default)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default: 127.0.0.1; anything else exposes the "
                        "actions to the network: add --read-only or put auth in front)")
    p.add_argument("--port", type=int, default=8080, help="port (default: 8080)")
    p.add_argument("--read-only", action="store_true", help="show no action, refuse them")
    p.set_defaults(run=run, queue=None)


def run(args: argparse.Namespace, _queue: Optional[Any] = None) -> int:
    """Serve until SIGINT/SIGTERM, then stop the server and join its thread."""
    from ..dashboard import Dashboard  # needs Jinja2: only this command pays the import

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    with Dashboard(args.url, prefix=args.prefix, read_only=args.read_only) as board:
        server = threaded_server(board, args.host, args.port)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                  name="orijs-dashboard-server")
        previous = {sig: signal.signal(sig, lambda *_: stop.set())
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            thread.start()
            print(f"orijs-sync dashboard on http://{args.host}:{server.server_port}/ (prefix {args.prefix!r}"
                  f"{', read-only' if args.read_only else ''}); Ctrl-C stops it",
                  file=sys.stderr, flush=True)
            while not stop.wait(0.5):
                pass
        finally:
            server.shutdown()
            server.server_close()
            thread.join(10)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    print("orijs-sync dashboard stopped", file=sys.stderr, flush=True)
    return 0
