"""A scripted HTTP/1.1 server on 127.0.0.1 for testing the provider client over real sockets.

It runs in the test's own trio loop (``Loopback.start(nursery)``), so a ``MockClock`` drives
its delays too. Each connection carries one request: the server reads it, records it, waits
the scripted reply's ``delay``, answers and closes the connection.
"""

from __future__ import annotations

import socket
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from http import HTTPStatus
from typing import Self

import trio

_NO_REPLY = b'{"error":{"message":"the loopback server has no scripted reply left"}}'


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``delay`` (seconds, on the trio clock) passes before it is sent:
    longer than the client's read timeout, it provokes a timeout."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Received:
    """One request as the server read it; header names are lower-cased."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


class Loopback:
    """The server: ``script`` queues replies, ``received`` lists the requests in order.
    Without a scripted reply left it answers 500."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.received: list[Received] = []
        self.port = 0

    @classmethod
    async def start(cls, nursery: trio.Nursery) -> Self:
        """A server listening on a free port, served until ``nursery`` is cancelled."""
        server = cls()
        listeners: list[trio.SocketListener] = await nursery.start(
            partial(trio.serve_tcp, server._serve, 0, host="127.0.0.1")
        )
        server.port = listeners[0].socket.getsockname()[1]
        return server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def _serve(self, stream: trio.SocketStream) -> None:
        try:
            request = await _read_request(stream)
            if request is None:
                return
            self.received.append(request)
            reply = self.replies.popleft() if self.replies else Reply(500, _NO_REPLY)
            await trio.sleep(reply.delay)
            await stream.send_all(_response(reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await stream.aclose()


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connecting to it is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def _read_request(stream: trio.SocketStream) -> Received | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    assert "transfer-encoding" not in headers, "the client must send a Content-Length body"
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        body += chunk
    return Received(method, target, headers, body)


def _response(reply: Reply) -> bytes:
    try:
        reason = HTTPStatus(reply.status).phrase
    except ValueError:
        reason = "Unknown"
    headers = {"content-type": "application/json", **reply.headers}
    headers["content-length"] = str(len(reply.body))
    headers["connection"] = "close"
    lines = [f"HTTP/1.1 {reply.status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body
