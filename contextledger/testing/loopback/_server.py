"""``LoopbackProvider``: the loopback core served over HTTP/1.1 on 127.0.0.1.

The server runs on threads of its own (the standard library's HTTP parsing, one thread per
connection, keep-alive), so it serves any event loop in the process, or none: a trio test,
an asyncio application embedding the runtime, a plain script. Starting binds an ephemeral
port and returns at once; stopping closes the listener and every open connection and joins
every thread before it returns, so nothing outlives the ``with`` block. The core is called
under one lock: requests are handled one at a time, in arrival order; delays (``Fault.hang``)
are waited outside it.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any, Final, Self

import msgspec

from contextledger.prices._tables import ModelPrice
from contextledger.testing.loopback._core import DEFAULT_MODELS, Exchange, LoopbackCore, Reaction
from contextledger.testing.loopback._faults import Fault
from contextledger.testing.loopback._script import Script, ToolCall
from contextledger.vocabulary._models import Model

#: Only the loopback interface: the server is for tests on this machine.
HOST: Final = "127.0.0.1"
#: Seconds ``stop`` waits for each thread before it reports the thread as stuck.
JOIN_TIMEOUT: Final = 5.0
#: Pending connections the listener queues (a test opens a few dozen at most).
BACKLOG: Final = 128


class LoopbackServerError(RuntimeError):
    """The server could not stop cleanly (a thread did not finish)."""


class LoopbackProvider:
    """A provider you can run an agent loop against: Anthropic Messages at
    ``POST /v1/messages`` and OpenAI Chat Completions at ``POST /v1/chat/completions``, on
    ``url`` (``http://127.0.0.1:<port>``), while the ``with`` / ``async with`` block runs.

    ``script``, ``models``, ``prices``, ``api_key`` and ``require_user_first`` are described
    at ``LoopbackCore``. ``clock`` (seconds) times each request for the prompt cache's TTLs;
    give a fake one to expire caches without waiting.
    """

    def __init__(
        self,
        script: Script | Callable[[str], Script] | None = None,
        *,
        models: Sequence[Model] = DEFAULT_MODELS,
        prices: Mapping[str, ModelPrice] | None = None,
        api_key: str | None = None,
        require_user_first: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._core = LoopbackCore(
            script,
            models=models,
            prices=prices,
            api_key=api_key,
            require_user_first=require_user_first,
        )
        self._clock = clock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._wake_reader: socket.socket | None = None
        self._wake_writer: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._connections: dict[threading.Thread, socket.socket] = {}
        self._errors: list[str] = []
        self.port = 0

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to give a client (``ProviderClient(wire, provider.url)``)."""
        if not self.port:
            raise RuntimeError("the loopback provider is not running")
        return f"http://{HOST}:{self.port}"

    def start(self) -> Self:
        """Listen on an ephemeral port of 127.0.0.1 and serve on background threads."""
        if self._listener is not None:
            raise RuntimeError("the loopback provider is running already")
        self._stopping.clear()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((HOST, 0))
        listener.listen(BACKLOG)
        listener.setblocking(False)
        self._listener = listener
        self._wake_reader, self._wake_writer = socket.socketpair()
        self.port = listener.getsockname()[1]
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"loopback-provider-{self.port}", daemon=True
        )
        self._acceptor.start()
        return self

    def stop(self) -> None:
        """Stop serving: close the listener and every connection (a request in progress gets
        no answer) and join every thread. Raises ``LoopbackServerError`` if a thread does
        not finish within ``JOIN_TIMEOUT`` seconds."""
        if self._listener is None:
            return
        self._stopping.set()
        assert self._wake_writer is not None and self._acceptor is not None
        self._wake_writer.send(b"x")
        self._acceptor.join(JOIN_TIMEOUT)
        stuck = [self._acceptor] if self._acceptor.is_alive() else []
        with self._lock:
            connections = dict(self._connections)
        for sock in connections.values():
            _shutdown(sock)
        for thread in connections:
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                stuck.append(thread)
        for own in (self._listener, self._wake_reader, self._wake_writer):
            if own is not None:
                own.close()
        self._listener = self._wake_reader = self._wake_writer = None
        self._acceptor = None
        self.port = 0
        if stuck:
            names = ", ".join(t.name for t in stuck)
            raise LoopbackServerError(f"loopback provider threads did not stop: {names}")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        """Start (binding and starting a thread return at once: no event loop is needed)."""
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop (closing sockets and joining threads that exit at once)."""
        self.stop()

    # --- what the test drives and reads -------------------------------------------------------

    def inject(self, *faults: Fault, times: int = 1, conversation: str | None = None) -> None:
        """Answer the next requests with ``faults``, one each, in order (the sequence
        ``times`` times: ``inject(Fault.overloaded(), times=3)`` is a burst of three).
        With ``conversation``, only that conversation's requests take them."""
        with self._lock:
            self._core.inject(faults, times=times, conversation=conversation)

    def random_faults(self, rate: float, faults: Sequence[Fault], *, seed: int = 0) -> None:
        """Give each later request without a queued fault one of ``faults`` with probability
        ``rate``, drawn from a generator seeded with ``seed``; ``rate=0`` stops it."""
        with self._lock:
            self._core.random_faults(rate, faults, seed)

    @property
    def queued_faults(self) -> int:
        """Faults injected and not yet taken."""
        with self._lock:
            return self._core.queued_faults

    @property
    def received(self) -> list[Exchange]:
        """Every request received so far, in arrival order, with what was answered."""
        with self._lock:
            return list(self._core.exchanges)

    @property
    def mismatches(self) -> list[str]:
        """Why requests were rejected for tool outputs that differ from the script."""
        with self._lock:
            return list(self._core.mismatches)

    @property
    def errors(self) -> list[str]:
        """Tracebacks of requests the server failed on (each answered with a 500): empty
        unless the loopback provider itself has a bug."""
        with self._lock:
            return list(self._errors)

    def expected_output(self, call_id: str) -> str | None:
        """The output the script expects back for the tool call issued as ``call_id``: what
        a test's fake tool returns."""
        with self._lock:
            return self._core.expected_output(call_id)

    def tool_call(self, call_id: str) -> ToolCall | None:
        """The scripted call issued as ``call_id`` (None for an id the server never
        issued)."""
        with self._lock:
            return self._core.tool_call(call_id)

    # --- serving ------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None and self._wake_reader is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_reader, selectors.EVENT_READ)
            while not self._stopping.is_set():
                selector.select()
                if self._stopping.is_set():
                    return
                try:
                    conn, address = self._listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                conn.setblocking(True)
                thread = threading.Thread(
                    target=self._serve_connection,
                    args=(conn, address),
                    name=f"loopback-provider-{self.port}-{address[1]}",
                    daemon=True,
                )
                with self._lock:
                    self._connections[thread] = conn
                thread.start()

    def _serve_connection(self, conn: socket.socket, address: Any) -> None:
        try:
            _Handler(conn, address, self)  # type: ignore[arg-type]
        except OSError:
            pass  # the client went away, or stop() closed the connection
        finally:
            _shutdown(conn)
            conn.close()
            with self._lock:
                self._connections.pop(threading.current_thread(), None)

    def _react(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reaction:
        at = self._clock()
        with self._lock:
            try:
                return self._core.handle(method, path, headers, body, at)
            except Exception:
                self._errors.append(traceback.format_exc())
                message = {"type": "error", "error": {"type": "api_error", "message": "loopback"}}
                return Reaction(
                    status=500,
                    headers={"content-type": "application/json"},
                    body=msgspec.json.encode(message),
                )

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds`` unless the server stops first; whether it is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()


class _Handler(BaseHTTPRequestHandler):
    """One connection: HTTP/1.1 with keep-alive; every request goes to the core."""

    protocol_version = "HTTP/1.1"
    server_version = "loopback-provider"
    sys_version = ""
    server: LoopbackProvider  # type: ignore[assignment]

    def do_POST(self) -> None:
        self._respond()

    def do_GET(self) -> None:
        self._respond()

    def _respond(self) -> None:
        body = self._read_body()
        if body is None:
            self.close_connection = True
            return
        reaction = self.server._react(self.command, self.path, dict(self.headers.items()), body)
        stopping = self.server._wait(reaction.delay)
        if reaction.drop or stopping:
            self.close_connection = True
            return
        self.send_response(reaction.status)
        for name, value in reaction.headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(reaction.body)))
        self.end_headers()
        self.wfile.write(reaction.body)

    def _read_body(self) -> bytes | None:
        """The request body (``Content-Length`` or chunked); None if the client went away."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size_line = self.rfile.readline()
                if not size_line:
                    return None
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        return body if len(body) == length else None

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the record (``received``) is the log."""


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
