"""A man in the middle for TLS tests: a fake MySQL server that offers TLS with a certificate of
its own choosing and asks for ``caching_sha2_password`` full authentication -- which a client
answers with the password in clear text, protected by TLS alone. It records every byte the
client sends after the handshake, so a test can assert that a verifying client never gives it
the password.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading


CLIENT_SSL = 0x800
# LONG_PASSWORD | FOUND_ROWS | LONG_FLAG | CONNECT_WITH_DB | PROTOCOL_41 | TRANSACTIONS |
# SECURE_CONNECTION | MULTI_STATEMENTS | MULTI_RESULTS | PLUGIN_AUTH | CONNECT_ATTRS |
# PLUGIN_AUTH_LENENC_CLIENT_DATA, and SSL
CAPS = (0x1 | 0x2 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x10000 | 0x20000 | 0x80000
        | 0x100000 | 0x200000 | CLIENT_SSL)


class Mitm:
    """Listens on 127.0.0.1; every connection: handshake (TLS offered, caching_sha2_password),
    TLS with *cert*/*key* when the client asks, full authentication (the client's next packet
    is the clear-text password), then ERR 1045. ``received``: every payload the client sent
    after its SSL request (or its first one, without TLS); ``tls_refused``: handshakes the
    client broke off."""

    def __init__(self, cert: str, key: str):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.received: list[bytes] = []
        self.tls_refused = 0
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="mitm")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._thread.join(5)

    def all_bytes(self) -> bytes:
        return b"".join(self.received)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    @staticmethod
    def _send(sock, seq: int, payload: bytes) -> None:
        sock.sendall(len(payload).to_bytes(3, "little") + bytes((seq & 0xFF,)) + payload)

    @staticmethod
    def _recv(sock) -> tuple[int, bytes]:
        def exact(n):
            out = b""
            while len(out) < n:
                chunk = sock.recv(n - len(out))
                if not chunk:
                    raise ConnectionError("client went away")
                out += chunk
            return out
        head = exact(4)
        return head[3], exact(int.from_bytes(head[:3], "little"))

    def _serve(self, sock) -> None:
        sock.settimeout(10)
        try:
            salt = bytes(range(65, 85))
            hs = (b"\x0a" + b"8.4.0\0" + struct.pack("<I", 7) + salt[:8] + b"\0"
                  + struct.pack("<H", CAPS & 0xFFFF) + bytes((255,))
                  + struct.pack("<HH", 0x0002, CAPS >> 16) + bytes((21,)) + b"\0" * 10
                  + salt[8:] + b"\0" + b"caching_sha2_password\0")
            self._send(sock, 0, hs)
            seq, pkt = self._recv(sock)
            flags = int.from_bytes(pkt[:4], "little")
            if len(pkt) == 32 and flags & CLIENT_SSL:     # an SSL request: TLS first
                try:
                    sock = self.ctx.wrap_socket(sock, server_side=True)
                except (ssl.SSLError, OSError):
                    self.tls_refused += 1
                    return
                seq, pkt = self._recv(sock)
            self.received.append(pkt)                     # the handshake response
            self._send(sock, seq + 1, b"\x01\x04")        # perform full authentication
            seq, pkt = self._recv(sock)
            self.received.append(pkt)                     # the password (clear text over TLS)
            self._send(sock, seq + 1, b"\xff" + struct.pack("<H", 1045) + b"#28000"
                       + b"Access denied for user (MITM)")
        except (ConnectionError, OSError, ValueError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass
