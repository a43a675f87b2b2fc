"""A TCP proxy between probelake and moto_server that breaks chosen HTTP requests.

Requests pass through untouched unless a rule matches their request line (`PUT /lake/x/…`).
A matching request, up to `times` of them, gets the rule's fault instead:

- `"500"`, `"503"`: answered with that status by the proxy, never reaching the store;
- `"drop"`: half its body forwarded, then both connections closed (a connection lost in the
  middle of an upload);
- `"reset"`: the client's connection reset (TCP RST) before anything is forwarded;
- `"stall"`: nothing forwarded or answered for `stall` seconds, then closed (a store that hangs
  for longer than the request timeout).

`delay` slows every request body passed through (seconds per MiB): a slow store.
"""

from __future__ import annotations

import re
import socket
import socketserver
import struct
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Rule:
    pattern: re.Pattern[str]
    fault: str
    times: int | None  # None: every matching request
    stall: float = 0.0
    hits: int = 0


@dataclass
class FaultyProxy:
    upstream: tuple[str, int]
    rules: list[Rule] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    injected: list[tuple[str, str]] = field(default_factory=list)
    delay: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> str:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(
        self, fault: str, pattern: str, times: int | None = 1, stall: float = 0.0
    ) -> Rule:
        rule = Rule(re.compile(pattern), fault, times, stall)
        with self.lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.seen.clear()
            self.injected.clear()
            self.delay = 0.0

    def _match(self, line: str) -> Rule | None:
        with self.lock:
            self.seen.append(line)
            for rule in self.rules:
                if rule.pattern.search(line) and (
                    rule.times is None or rule.hits < rule.times
                ):
                    rule.hits += 1
                    self.injected.append((rule.fault, line))
                    return rule
        return None

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        relay = threading.Thread(
            target=self._relay, args=(upstream, client), daemon=True
        )
        relay.start()
        buf = b""
        try:
            while True:
                head, buf = _read_until(client, b"\r\n\r\n", buf)
                if head is None:
                    break
                body, buf = _read_exact(client, _content_length(head), buf)
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                rule = self._match(line)
                if rule is None:
                    if self.delay:
                        time.sleep(self.delay * len(body) / (1 << 20))
                    upstream.sendall(head + body)
                elif rule.fault in ("500", "503"):
                    reason = (
                        "Internal Server Error" if rule.fault == "500" else "Slow Down"
                    )
                    client.sendall(
                        f"HTTP/1.1 {rule.fault} {reason}\r\nContent-Length: 0\r\n\r\n".encode()
                    )
                elif rule.fault == "drop":
                    upstream.sendall(head + body[: len(body) // 2])
                    break
                elif rule.fault == "reset":
                    client.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    break
                elif rule.fault == "stall":
                    time.sleep(rule.stall)
                    break
                else:
                    raise ValueError(f"unknown fault {rule.fault!r}")
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.close()
                except OSError:
                    pass

    def _relay(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def _read_until(
    sock: socket.socket, end: bytes, buf: bytes
) -> tuple[bytes | None, bytes]:
    while end not in buf:
        data = sock.recv(1 << 16)
        if not data:
            return None, buf
        buf += data
    i = buf.index(end) + len(end)
    return buf[:i], buf[i:]


def _read_exact(sock: socket.socket, n: int, buf: bytes) -> tuple[bytes, bytes]:
    while len(buf) < n:
        data = sock.recv(1 << 16)
        if not data:
            break
        buf += data
    return buf[:n], buf[n:]


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0
