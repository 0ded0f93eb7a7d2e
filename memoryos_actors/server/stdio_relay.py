"""A relay between the process's stdin/stdout and the MCP SDK's stdio transport, so that a
stop signal can end the input at a message boundary and still answer the requests in flight.

The SDK reads stdin in a worker thread that a cancellation cannot interrupt: a server told
to stop while its client keeps the pipe open would wait for the client's next line. The
relay puts a pipe of its own at file descriptors 0 and 1 for the SDK to claim, and copies
whole lines between those pipes and the real stdin and stdout, noting the JSON-RPC ids of
the requests handed over and of the responses written back. :meth:`StdioRelay.stop_input`
(safe to call from a signal handler) makes it hand over nothing more, answer each request
that arrives from then on with an error, and close the SDK's input (end of file) once every
request handed over has its response, or after ``grace`` seconds, or at once on
:meth:`StdioRelay.end_input`.
"""

from __future__ import annotations

import json
import os
import select
import threading
import time
from typing import Any

__all__ = ["StdioRelay"]

_END = b'{"memoryos-relay": "end"}\n'
"""Written by :meth:`StdioRelay.finish` to the SDK's stdout pipe, after the SDK is done with
it: everything before it has been copied out when the output thread reads it."""

_CHUNK = 65536


def _messages(line: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of one line (a batch is a list); [] if it is not JSON."""
    try:
        doc = json.loads(line)
    except ValueError:
        return []
    items = doc if isinstance(doc, list) else [doc]
    return [m for m in items if isinstance(m, dict)]


def _is_request(msg: dict[str, Any]) -> bool:
    return "method" in msg and msg.get("id") is not None


def _is_response(msg: dict[str, Any]) -> bool:
    return "method" not in msg and msg.get("id") is not None and ("result" in msg or "error" in msg)


class StdioRelay:
    """See the module docstring. Use: :meth:`start`, run the SDK's stdio server, then
    :meth:`finish` (which puts the real stdin and stdout back). POSIX only.

    ``grace`` is how long, in seconds, a stop waits for the answers of the requests in
    flight; ``refusal`` is the error message a request arriving after a stop gets.
    """

    def __init__(self, grace: float, refusal: str) -> None:
        self.grace = grace
        self.refusal = refusal
        self._pending: set[Any] = set()  # ids of requests handed over and not yet answered
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stopping = False
        self._started = False

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Put the relay's pipes at descriptors 0 and 1 and start copying."""
        import sys

        sys.stdout.flush()
        self._real_in = os.dup(0)
        self._real_out = os.dup(1)
        sdk_in, self._to_sdk = os.pipe()
        self._from_sdk, sdk_out = os.pipe()
        self._wake_r, self._wake_w = os.pipe()
        os.dup2(sdk_in, 0)
        os.dup2(sdk_out, 1)
        os.close(sdk_in)
        os.close(sdk_out)
        self._started = True
        self._in_thread = threading.Thread(
            target=self._copy_in, name="memoryos-stdio-in", daemon=True
        )
        self._out_thread = threading.Thread(
            target=self._copy_out, name="memoryos-stdio-out", daemon=True
        )
        self._in_thread.start()
        self._out_thread.start()

    def stop_input(self) -> None:
        """Hand nothing more to the SDK, from a line read after this call on; end its input
        once the requests in flight have their answers (or after ``grace`` seconds). Safe in
        a signal handler."""
        self._stopping = True
        self._wake(b"s")

    def end_input(self) -> None:
        """End the SDK's input now, without waiting for answers. Safe in a signal handler."""
        self._stopping = True
        self._wake(b"e")

    def finish(self, timeout: float = 5.0) -> None:
        """After the SDK's server returned: copy out what it wrote, put the real stdin and
        stdout back at descriptors 0 and 1, and stop the relay's threads."""
        if not self._started:
            return
        self._started = False
        self.end_input()
        try:
            os.write(1, _END)
        except OSError:
            pass
        self._out_thread.join(timeout)
        os.dup2(self._real_in, 0)
        os.dup2(self._real_out, 1)
        # The duplicates stay open: the input thread may still wait on the real stdin (a
        # client that keeps it open) and refuse a request on the real stdout; it is a
        # daemon thread, and a descriptor closed under it could be reused by another file.

    # -- the threads ----------------------------------------------------------------------------

    def _wake(self, what: bytes) -> None:
        try:
            os.write(self._wake_w, what)
        except (OSError, AttributeError):
            pass

    def _copy_in(self) -> None:
        """Real stdin -> the SDK, line by line; the only thread that closes the SDK's input."""
        buf = b""
        client_open = True
        sdk_open = True
        deadline: float | None = None
        while client_open or sdk_open:
            wait = None
            if deadline is not None and sdk_open:
                wait = max(0.0, deadline - time.monotonic())
            watch = [self._wake_r] + ([self._real_in] if client_open else [])
            try:
                ready, _, _ = select.select(watch, [], [], wait)
            except OSError:
                break
            if self._wake_r in ready:
                for what in os.read(self._wake_r, 64):
                    if what == ord("s") and deadline is None:
                        deadline = time.monotonic() + self.grace
                    elif what == ord("e"):
                        deadline = time.monotonic()
            if self._real_in in ready:
                data = os.read(self._real_in, _CHUNK)
                if not data:
                    client_open = False  # the client closed stdin: so does the SDK's input
                    if buf and sdk_open and not self._stopping:
                        self._hand_over(buf)
                    buf = b""
                    deadline = time.monotonic()
                else:
                    buf += data
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        if self._stopping or not sdk_open:
                            self._refuse(line)
                        else:
                            self._hand_over(line + b"\n")
            if sdk_open and deadline is not None:
                with self._lock:
                    answered = not self._pending
                if (answered and self._stopping) or time.monotonic() >= deadline:
                    os.close(self._to_sdk)
                    sdk_open = False

    def _hand_over(self, line: bytes) -> None:
        with self._lock:
            for msg in _messages(line):
                if _is_request(msg):
                    self._pending.add(_key(msg["id"]))
        _write_all(self._to_sdk, line)

    def _refuse(self, line: bytes) -> None:
        for msg in _messages(line):
            if _is_request(msg):
                answer = {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "error": {"code": -32000, "message": self.refusal},
                }
                self._write_out(json.dumps(answer).encode() + b"\n")

    def _copy_out(self) -> None:
        """The SDK -> real stdout, line by line, noting the answers."""
        buf = b""
        while True:
            try:
                data = os.read(self._from_sdk, _CHUNK)
            except OSError:
                return
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                raw = line + b"\n"
                if raw == _END:
                    if buf:
                        self._write_out(buf)
                    return
                answered = False
                for msg in _messages(line):
                    if _is_response(msg):
                        with self._lock:
                            self._pending.discard(_key(msg["id"]))
                            answered = not self._pending
                self._write_out(raw)
                if answered and self._stopping:
                    self._wake(b"a")  # the input thread may close the SDK's input now

    def _write_out(self, data: bytes) -> None:
        with self._write_lock:
            _write_all(self._real_out, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except OSError:
            return  # the reader is gone
        view = view[n:]


def _key(request_id: Any) -> Any:
    # JSON-RPC ids are strings or numbers; 1 and 1.0 are the same id, "1" is not.
    if isinstance(request_id, str):
        return request_id
    if isinstance(request_id, (int, float)) and not isinstance(request_id, bool):
        return ("n", float(request_id))
    return ("other", repr(request_id))
