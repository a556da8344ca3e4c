"""The lab's services process: the Hub (API + CDN) and the Debian package source.

Started by `noderig lab up` inside the lab's services network namespace, so it listens on
the lab bridge only. It prints one line, ``ready``, once every listener accepts.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .hub import start_hub


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # apt's requests would flood the services log
        pass


def serve_directory(directory: Path, bind: str, port: int) -> ThreadingHTTPServer:
    handler = functools.partial(_QuietFiles, directory=str(directory))
    server = ThreadingHTTPServer((bind, port), handler)
    threading.Thread(target=server.serve_forever, name=f"files:{port}", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="noderig-lab-services")
    p.add_argument("--bind", required=True)
    p.add_argument("--packages", type=Path, required=True)
    p.add_argument("--packages-port", type=int, required=True)
    p.add_argument("--hub-root", type=Path, required=True)
    p.add_argument("--hub-port", type=int, required=True)
    p.add_argument("--cdn-port", type=int, required=True)
    p.add_argument("--tokens-file", type=Path, required=True)
    p.add_argument("--gated", action="append", default=[])
    args = p.parse_args(argv)

    packages = serve_directory(args.packages, args.bind, args.packages_port)
    hub = start_hub(
        root=args.hub_root, bind=args.bind, port=args.hub_port, cdn_port=args.cdn_port,
        tokens_file=args.tokens_file, gated=args.gated,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print("ready", flush=True)
    stop.wait()
    hub.stop()
    packages.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
