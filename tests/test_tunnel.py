"""pyinfra's SSH connection to each node (operations/tunnel.py), fast tier: the socket sends
at once, and a local port forwarded through the connection reaches the node's loopback. The
lab measures what no_delay saves (README, bench/noop.py and bench/fanout.py)."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

from operations.tunnel import LoopbackForward, no_delay


def ssh_host(sock, connected=True):
    transport = SimpleNamespace(sock=sock)
    return SimpleNamespace(connected=connected, connector=SimpleNamespace(client=SimpleNamespace(
        get_transport=lambda: transport)))


def nodelay(sock) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_every_connected_hosts_ssh_socket_sends_at_once_once_per_run():
    tcp = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(3)]
    try:
        pipe = socket.socketpair(socket.AF_UNIX)[0]  # a proxy command's pipe: no TCP options
        hosts = [ssh_host(tcp[0]), ssh_host(tcp[1]), ssh_host(tcp[2], connected=False), ssh_host(pipe),
                 SimpleNamespace(connected=True, connector=SimpleNamespace())]  # the local connector
        state = SimpleNamespace(inventory=hosts)
        assert [nodelay(s) for s in tcp] == [0, 0, 0]
        assert no_delay(state) == 2
        assert [nodelay(s) for s in tcp] == [1, 1, 0], "a host that did not connect is left alone"
        assert no_delay(state) == 0, "once per run"
    finally:
        for s in tcp:
            s.close()


class _DirectTransport:
    """A paramiko transport stand-in whose direct-tcpip channel is a plain TCP connection."""

    def open_channel(self, kind, dest, origin):
        assert kind == "direct-tcpip"
        return socket.create_connection(dest)


def test_a_forwarded_port_reaches_the_remote_loopback_port():
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=lambda: (lambda c: (c.sendall(c.recv(64).upper()), c.close()))(server.accept()[0]),
                     daemon=True).start()
    host = SimpleNamespace(connector=SimpleNamespace(client=SimpleNamespace(get_transport=_DirectTransport)))
    with LoopbackForward(host, server.getsockname()[1]) as fwd:
        with socket.create_connection(("127.0.0.1", fwd.port), timeout=5) as c:
            c.sendall(b"rpc")
            assert c.recv(64) == b"RPC"
    server.close()
