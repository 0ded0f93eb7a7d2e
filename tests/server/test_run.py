"""How the server binds its socket."""

from __future__ import annotations

import socket

import pytest

from memoryos_actors import InvalidInput
from memoryos_actors.server.run import _bind


def test_listening_socket_is_tcp_so_responses_are_not_delayed_by_nagle() -> None:
    # asyncio turns on TCP_NODELAY only for sockets whose proto is IPPROTO_TCP.
    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP and sock.getsockname()[1] > 0
    finally:
        sock.close()


def test_a_port_in_use_is_a_clear_error() -> None:
    sock = _bind("127.0.0.1", 0)
    try:
        with pytest.raises(InvalidInput, match="cannot listen"):
            _bind("127.0.0.1", sock.getsockname()[1])
    finally:
        sock.close()
