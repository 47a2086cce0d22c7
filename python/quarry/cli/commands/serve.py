"""``quarry serve ROOT... [--host H] [--allow-host NAME] [--port P] [--catalog F] [--token-file F]
[--auto-index] [--workers N] [--scan-every S]``: the data service.

Prints its URL, then serves until SIGINT or SIGTERM; either stops it cleanly
(exit 0): requests in flight are answered (for at most a few seconds), queued
index builds are cancelled and running ones finished, and the catalog is
closed. See :mod:`quarry.service`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys
from typing import Any

from quarry.cli import options
from quarry.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry serve``."""
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="directories whose files to serve")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: loopback only)"
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name clients may reach the server by (the Host header), besides the loopback "
        "names and --host's address; more than one may be given. A server on 0.0.0.0 or :: "
        "answers to any name",
    )
    parser.add_argument("--port", type=int, default=8750, help="port (default 8750; 0: any free)")
    parser.add_argument(
        "--catalog", metavar="FILE", help="the SQLite catalog (default: one per set of roots "
        "in ~/.cache/quarry)"
    )  # fmt: skip
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the bearer token that index builds and rescans need "
        "(without it, those writes are disabled)",
    )
    parser.add_argument(
        "--auto-index",
        action="store_true",
        help="build missing and stale indexes in the background after each scan",
    )
    parser.add_argument(
        "--workers", type=options.count, default=4, help="threads answering queries (default 4)"
    )
    parser.add_argument(
        "--max-rows",
        type=options.count,
        default=10_000_000,
        metavar="N",
        help="the most hits one answer of ids or values holds (default 10,000,000; more: 413)",
    )
    parser.add_argument(
        "--query-seconds",
        type=float,
        default=60.0,
        metavar="S",
        help="how long one request's work may take (default 60; after: 504)",
    )
    parser.add_argument(
        "--builds", type=options.count, default=1, help="index builds at once (default 1)"
    )
    parser.add_argument(
        "--scan-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="rescan the roots this often (default 60; 0: only on POST /api/v1/rescan)",
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from quarry.service.app import create_app
    from quarry.service.config import LOOPBACK, Config, Limits, read_token

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535, not {args.port}")
    token = read_token(args.token_file) if args.token_file else None
    if args.token_file and os.stat(args.token_file).st_mode & 0o077:
        # As ssh says of a private key others may read: the token opens the writes.
        mode = oct(os.stat(args.token_file).st_mode & 0o777)[2:]
        print(
            f"quarry: warning: the token file {args.token_file} may be read by others "
            f"(mode {mode}): chmod 600 {shlex.quote(args.token_file)}",
            file=sys.stderr,
        )
    if args.workers < 1 or args.builds < 1:
        raise UsageError("--workers and --builds take 1 or more")
    if not args.query_seconds > 0:
        raise UsageError(f"--query-seconds must be more than 0, not {args.query_seconds}")
    wildcard = args.host in ("0.0.0.0", "::", "")
    names = [*LOOPBACK, args.host.strip("[]").lower(), *(n.lower() for n in args.allow_host)]
    limits = Limits(rows=args.max_rows, query_seconds=args.query_seconds, builds=args.builds)
    config = Config.make(
        args.roots,
        args.catalog,
        token=token,
        limits=limits,
        workers=args.workers,
        auto_index=args.auto_index,
        scan_every=max(0.0, args.scan_every),
        hosts=None if wildcard else tuple(dict.fromkeys(names)),
    )
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((args.host, args.port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    listener.listen(1024)
    port = listener.getsockname()[1]
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    writes = "writes need the token" if token else "writes disabled: no --token-file"
    print(f"quarry serving {len(config.roots)} root(s) at http://{host}:{port}/ ({writes})")
    print(f"catalog: {config.catalog}", flush=True)
    server = _server(
        uvicorn.Config(
            create_app(config),
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
    )
    server.run(sockets=[listener])
    print("quarry serve: stopped", file=sys.stderr, flush=True)
    return 0


def _server(config: Any) -> Any:
    """A uvicorn server that stops on SIGINT or SIGTERM and then returns, so
    that the command exits 0 (uvicorn would raise the signal again once
    stopped, ending the process with its status)."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            self._captured_signals.clear()  # a stop asked for is a clean end

    return Server(config)
