"""A TCP forwarder, run as its own process: ``python tcp_proxy.py LISTEN_PORT TARGET_PORT``.

The network between a search and a server it needs: a test kills this process to cut it and
starts it again on the same port to mend it, while the server behind it keeps its state (a
restarted ``moto_server`` would come back empty).
"""

from __future__ import annotations

import socket
import sys
import threading


def pipe(source: socket.socket, target: socket.socket) -> None:
    """Copy ``source`` to ``target`` until either side closes."""
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listen_port: int, target_port: int) -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(64)
    while True:
        client, _ = server.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", target_port), timeout=5)
        except OSError:
            client.close()
            continue
        upstream.settimeout(None)
        for ends in ((client, upstream), (upstream, client)):
            threading.Thread(target=pipe, args=ends, daemon=True).start()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
