"""A free TCP port for a server a test starts, drawn below the kernel's ephemeral range.

A port the kernel hands out (``bind`` to port 0) is free only until someone else draws it: Ray's
daemons, an MLflow server's client sockets and every outgoing connection on the machine draw from
the same ephemeral range, so the port could be taken again before the server binds it (a Ray head
once failed in CI: "Failed to bind to 127.0.0.1:42061 because it's already occupied"). A port
below that range is never handed out by the kernel, so only another test that draws the same
number (one in 10,000s) could take it.
"""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 20_000
"""Above the fixed ports servers default to (Ray 6379, 8265 and 10001; MLflow 5000)."""
_handed_out: set[int] = set()  # a port drawn for a server not yet started is free, not ours


def ephemeral_low() -> int:
    """The lowest port the kernel hands out (32768 where Linux does not say otherwise)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A port in [``LOWEST_PORT``, the ephemeral range) that nothing holds now and that this
    process has not handed out before."""
    high = ephemeral_low()
    if high <= LOWEST_PORT + 1_000:
        raise RuntimeError(f"ephemeral ports start at {high}: no room below it for test servers")
    for _ in range(100):
        port = LOWEST_PORT + secrets.randbelow(high - LOWEST_PORT)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in [{LOWEST_PORT}, {high}) after 100 draws")
