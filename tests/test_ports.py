"""The test servers' port helper: below the kernel's ephemeral range, never one held, never
the same twice in a process."""

from __future__ import annotations

import socket

import ports
import pytest


def test_ports_are_below_the_ephemeral_range_and_never_repeat():
    drawn = [ports.free_port() for _ in range(500)]
    assert all(ports.LOWEST_PORT <= p < ports.ephemeral_low() for p in drawn)
    assert len(set(drawn)) == len(drawn)


def _unused_offsets(count: int) -> list[int]:
    """Offsets above ``LOWEST_PORT`` of ports nothing holds now and the helper has not drawn."""
    found = []
    for offset in range(1_000, ports.ephemeral_low() - ports.LOWEST_PORT):
        port = ports.LOWEST_PORT + offset
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports._handed_out:
            found.append(offset)
        if len(found) == count:
            return found
    raise AssertionError("no unused ports below the ephemeral range")


def test_a_port_a_server_listens_on_is_passed_over(monkeypatch: pytest.MonkeyPatch):
    held, free = _unused_offsets(2)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", ports.LOWEST_PORT + held))
        listener.listen()
        draws = iter([held, free])
        monkeypatch.setattr(ports.secrets, "randbelow", lambda _n: next(draws))
        assert ports.free_port() == ports.LOWEST_PORT + free
