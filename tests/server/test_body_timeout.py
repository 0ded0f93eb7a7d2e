"""A request whose body stalls: answered 408 after ``serve --body-timeout`` seconds, and
503 at once when the server is stopping, so one stalled upload neither holds a
connection for ever nor makes a SIGTERM wait the whole shutdown timeout. Real servers,
and raw sockets that send the headers and half of the body, then nothing."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from srvutil import Server, add_key, start_server

BODY = json.dumps({"query": "I adopted a beagle", "response": "Nice!"}).encode()
#: Seconds a client waits for an answer before the test fails (a liveness guard).
ANSWER_WAIT_S = 60.0


def _stalled_upload(server: Server, key: str) -> socket.socket:
    """A connection that has sent a turn's headers and half its body, and then stalls;
    returned once the server has read them (it answered a request sent after them)."""
    port = int(server.base_url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WAIT_S)
    head = (
        "POST /v1/users/ann/turns HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    )
    sock.sendall(head.encode() + BODY[: len(BODY) // 2])
    with server.client() as c:
        assert c.get("/healthz").status_code == 200
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read the answer on ``sock`` until the server closes the connection: ``(status,
    headers, body)``."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def _server(tmp_path: Path, *extra: str) -> tuple[Server, str]:
    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")
    return start_server(tmp_path, tmp_path / "data", keys, *extra), key


def test_a_body_that_stalls_is_answered_408_after_the_body_timeout(tmp_path: Path) -> None:
    server, key = _server(tmp_path, "--body-timeout", "1")
    try:
        with _stalled_upload(server, key) as sock:
            status, headers, body = _answer(sock)  # the server closes the connection
        assert status == 408, body
        assert json.loads(body)["error"] == {
            "type": "RequestTimeout",
            "message": "the request body did not arrive within 1 s",
        }
        assert headers["connection"] == "close"
        with server.client(key) as c:  # nothing was stored; the server serves on
            assert c.get("/v1/users/ann/memories").status_code == 404
            r = c.post(
                "/v1/users/ann/turns", content=BODY, headers={"Content-Type": "application/json"}
            )
            assert r.status_code == 201, r.text
            metrics = c.get("/metrics").text
        assert 'memoryos_http_rejected_requests_total{reason="body_timeout"} 1.0' in metrics
    finally:
        assert server.stop() == 0
    assert "Traceback" not in server.log_text()


def test_sigterm_answers_a_stalled_body_503_and_exits_without_waiting(tmp_path: Path) -> None:
    # Timeouts far longer than the test waits: the stop must not wait for either.
    server, key = _server(tmp_path, "--shutdown-timeout", "120", "--body-timeout", "120")
    with _stalled_upload(server, key) as sock:
        assert server.stop() == 0  # fails the test if it takes STOP_TIMEOUT_S (< 120 s)
        status, headers, body = _answer(sock)
    assert status == 503, body
    assert json.loads(body)["error"]["type"] == "SystemClosed"
    assert headers["retry-after"] == "1"
    log = server.log_text()
    assert "Traceback" not in log and "Cancel" not in log, log
