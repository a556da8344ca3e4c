"""The fan-out's peer file server: Debian's nginx, run as a transient unit, serving verified
checkpoint files to the fleet's peers only, for the duration of the fan-out. Pure text.

What it serves is a directory tree of names the deploy chose, never the Hub's:

    /run/noderig-peers/www/                       0711 root: nobody else can list it
        <secret>/<checkpoint key> -> <dest>/.noderig/peer/
    <dest>/.noderig/peer/<digest>                 hard links to files hashed against the Hub,
                                                  made by node/peer_links.py (0711 directory)

so ``GET /<secret>/<key>/<digest>`` is a verified file and everything else is 404. The secret
(one per run and node) is a directory name, not part of the configuration; nginx's own
``allow``/``deny`` admits the fleet's peers only, on top of noderig's firewall table; it
listens on the node's cluster address only; GET and HEAD only, Range as nginx does it.
"""

from __future__ import annotations

from .server_settings import ip_address, ip_network

PACKAGE = "nginx-light"
NGINX = "/usr/sbin/nginx"
# The package's own unit would serve Debian's default site on port 80: masked before the
# package is installed (its postinst then starts nothing), and left masked.
DEBIAN_UNIT = "nginx.service"
SERVICE = "noderig-peers"
RUN_DIR = f"/run/{SERVICE}"
CONF = f"{RUN_DIR}/nginx.conf"
WWW = f"{RUN_DIR}/www"
LINK_DIR = ".noderig/peer"  # inside the checkpoint directory: hard links need the same filesystem
LINKS_SCRIPT = "/usr/local/lib/noderig/peer_links.py"


def _listen(address: str, port: int) -> str:
    ip = ip_address(address)  # ValueError: an address, never a name (nor a zone's text), reaches the text
    return f"[{ip}]:{int(port)}" if ip.version == 6 else f"{ip}:{int(port)}"


def nginx_conf(address: str, port: int, peers: list[str], workers: int = 2) -> str:
    """nginx's whole configuration (``nginx -c``), in the foreground under systemd, logging
    errors to the journal and no access log (each line would name the secret path)."""
    if not peers:
        raise ValueError("a peer server with no peer to serve")
    allow = "".join(f"        allow {ip_network(p)};\n" for p in sorted(set(peers)))
    return (
        "# Written by noderig (noderig.peer_server) for one fan-out; removed when it ends.\n"
        "daemon off;\n"
        "user www-data;\n"
        f"worker_processes {int(workers)};\n"
        f"pid {RUN_DIR}/nginx.pid;\n"
        "error_log stderr warn;\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        "    access_log off;\n"
        "    server_tokens off;\n"
        "    sendfile on;\n"
        "    tcp_nopush on;\n"
        "    types { }\n"
        "    default_type application/octet-stream;\n"
        f"    client_body_temp_path {RUN_DIR}/tmp;\n"
        "    server {\n"
        f"        listen {_listen(address, port)};\n"
        f"{allow}"
        "        deny all;\n"
        f"        root {WWW};\n"
        "        autoindex off;\n"
        "        location / {\n"
        "            limit_except GET { deny all; }\n"
        "        }\n"
        "    }\n"
        "}\n"
    )
