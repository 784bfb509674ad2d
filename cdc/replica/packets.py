"""MySQL client/server packet framing over a socket we own.

A MySQL packet is a 3-byte little-endian payload length, a 1-byte sequence number and the
payload. A payload of 16 MiB - 1 (``0xffffff``) bytes or more is split into packets of exactly
``0xffffff`` bytes followed by a shorter one (an empty one when the length is an exact
multiple); :class:`PacketReader` joins them back into one payload.

The replica client logs in with PyMySQL and then takes the socket over for the binlog dump
(:func:`take_over`): PyMySQL reads through a buffered file object (``conn._rfile``), so any bytes
it has already pulled off the socket are drained into our reader first. The reader works the
same over an ``ssl.SSLSocket`` (it only calls ``recv``/``sendall``; it never ``select()``s, which
would miss bytes OpenSSL has already decrypted).

Timeouts are resumable: when the socket times out, :meth:`PacketReader.read_payload` raises
:class:`TimeoutError` with every byte received so far kept, so the caller can look at the clock
(idle limit, dead-connection detection, ``close()`` from another thread) and call it again.
"""

from __future__ import annotations

import socket
import ssl
from typing import NamedTuple

from cdc.errors import ConnectionLost, PacketTooLargeError, ProtocolError

MAX_PAYLOAD = 0xFFFFFF          # a packet of this length is continued by the next one
HEADER_LEN = 4
#: The default cap on a reassembled payload: MySQL's largest max_allowed_packet (1 GiB).
MAX_REASSEMBLED = 1 << 30


class ErrPacket(NamedTuple):
    """A decoded ERR packet (first payload byte 0xff)."""

    code: int
    sqlstate: str
    message: str


def parse_err(payload: bytes) -> ErrPacket:
    """Decode an ERR packet: 0xff, error code (2), ``#`` + SQLSTATE (5, protocol 4.1), message."""
    if not payload or payload[0] != 0xFF:
        raise ValueError("not an ERR packet")
    code = int.from_bytes(payload[1:3], "little") if len(payload) >= 3 else 0
    rest = payload[3:]
    state = ""
    if rest[:1] == b"#":
        state = rest[1:6].decode("ascii", "replace")
        rest = rest[6:]
    return ErrPacket(code, state, rest.decode("utf-8", "replace"))


def is_eof(payload: bytes) -> bool:
    """In a binlog dump: the end of the stream (non-blocking mode). Event packets start with
    0x00 and errors with 0xff; EOF starts with 0xfe (5 bytes, or a longer OK-as-EOF packet under
    CLIENT_DEPRECATE_EOF -- never an event, whatever its length)."""
    return bool(payload) and payload[0] == 0xFE


def frame(payload: bytes, seq: int = 0) -> bytes:
    """The packets carrying *payload*, starting at sequence number *seq* (splits at 16 MiB)."""
    out = bytearray()
    view = memoryview(payload)
    while True:
        chunk = view[:MAX_PAYLOAD]
        view = view[MAX_PAYLOAD:]
        out += len(chunk).to_bytes(3, "little") + bytes((seq & 0xFF,)) + chunk
        seq += 1
        if len(chunk) < MAX_PAYLOAD:
            return bytes(out)


class PacketReader:
    """Reads whole (reassembled) payloads from a socket; see the module docstring.

    :param sock: a connected socket (plain or SSL), already in the desired timeout mode.
    :param initial: bytes already read off the socket by someone else (they come first).
    :param seq: the sequence number the next packet must carry (None: do not check the first).
    :param max_payload: the largest reassembled payload accepted; a server announcing more
        (e.g. endless continuation packets) is a :class:`ProtocolError`, not a MemoryError.
    """

    def __init__(self, sock, initial: bytes = b"", *, seq: int | None = None,
                 recv_size: int = 1 << 18, max_payload: int = MAX_REASSEMBLED):
        self.sock = sock
        self.max_payload = max_payload
        self._buf = bytearray(initial)
        self._pos = 0
        self.seq = seq
        self.recv_size = recv_size
        self.bytes_received = len(initial)
        self.packets = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as payloads."""
        return len(self._buf) - self._pos

    def read_payload(self) -> bytes:
        """The next payload (continuation packets joined). Raises :class:`ConnectionLost` on EOF
        or socket errors, :class:`ProtocolError` on a sequence gap, and :class:`TimeoutError`
        (nothing lost) when the socket times out first."""
        while True:
            payload = self._take()
            if payload is not None:
                return payload
            self._recv()

    def ready(self) -> list[bytes]:
        """Every whole payload already received, in order, without waiting (none: call
        :meth:`read_payload`). One receive of 256 KiB holds hundreds of binlog events; taking
        them in one call costs less per event than one :meth:`read_payload` each. Stops before
        a payload of 16 MiB or more, or one that breaks the rules: :meth:`read_payload`
        reassembles the one and raises for the other."""
        buf, p, end = self._buf, self._pos, len(self._buf)
        out: list[bytes] = []
        limit = min(self.max_payload, MAX_PAYLOAD - 1)
        while end - p >= HEADER_LEN:
            length = buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16)
            stop = p + HEADER_LEN + length
            if length > limit or stop > end:
                break
            try:
                self._check_seq(buf[p + 3], buf[p + 4] if length else None)
            except ProtocolError:
                if not out:
                    raise
                break
            out.append(bytes(buf[p + HEADER_LEN:stop]))
            p = stop
        if out:
            self._advance(p)
        return out

    def _take(self) -> bytes | None:
        buf, p, end = self._buf, self._pos, len(self._buf)
        if end - p < HEADER_LEN:
            return None
        length = buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16)
        if length < MAX_PAYLOAD:  # the common case: one packet
            if length > self.max_payload:
                raise self._too_large()
            stop = p + HEADER_LEN + length
            if stop > end:
                return None
            self._check_seq(buf[p + 3], buf[p + 4] if length else None)
            payload = bytes(buf[p + HEADER_LEN:stop])
            self._advance(stop)
            return payload
        # A payload of >= 16 MiB: scan the continuation headers without consuming anything
        # until the whole logical payload is here.
        spans = []
        q = p
        total = 0
        while True:
            if end - q < HEADER_LEN:
                return None
            length = buf[q] | (buf[q + 1] << 8) | (buf[q + 2] << 16)
            total += length
            if total > self.max_payload:
                raise self._too_large()
            if end - q - HEADER_LEN < length:
                return None
            spans.append((q, length))
            q += HEADER_LEN + length
            if length < MAX_PAYLOAD:
                break
        first = spans[0][0]
        for i, (h, _) in enumerate(spans):
            self._check_seq(buf[h + 3], buf[first + 4] if i == 0 else None)
        payload = b"".join(bytes(buf[h + HEADER_LEN:h + HEADER_LEN + n]) for h, n in spans)
        self._advance(q)
        return payload

    def _too_large(self) -> PacketTooLargeError:
        return PacketTooLargeError(
            f"the server is sending a payload of more than {self.max_payload} bytes (the "
            f"client's max_packet_size): a broken or hostile server, or an event larger than "
            f"that (raise ReplicaConfig.max_packet_size to accept it)")

    def _check_seq(self, got: int, first_byte: int | None) -> None:
        want = self.seq
        if want is not None and got != want and first_byte != 0xFF:
            # (An ERR packet may come with any number: MariaDB sends 0 when shutting down.)
            raise ProtocolError(f"packet sequence number {got} where {want} was expected: the "
                                f"connection is out of step with the server")
        self.seq = (got + 1) & 0xFF
        self.packets += 1

    def _advance(self, stop: int) -> None:
        if stop == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif stop > (1 << 20) and stop > len(self._buf) // 2:
            del self._buf[:stop]
            self._pos = 0
        else:
            self._pos = stop

    def _recv(self) -> None:
        try:
            data = self.sock.recv(self.recv_size)
        except (socket.timeout, ssl.SSLWantReadError):
            raise TimeoutError("no data from the server before the socket timeout") from None
        except ssl.SSLError as e:
            raise ConnectionLost(f"TLS error on the replication connection: {e}") from e
        except OSError as e:
            raise ConnectionLost(f"lost the replication connection: {e}") from e
        if not data:
            if self.buffered:
                raise ConnectionLost(f"the server closed the connection in the middle of a "
                                     f"packet ({self.buffered} bytes of it received)")
            raise ConnectionLost("the server closed the connection")
        self.bytes_received += len(data)
        self._buf += data


def drain_buffered(rfile, sock) -> bytes:
    """Everything a buffered reader (PyMySQL's ``_rfile``) holds, without blocking.

    ``read1`` returns buffered bytes first and only then tries the socket; with the socket made
    non-blocking that try returns nothing (or raises ``SSLWantReadError`` / ``BlockingIOError``)
    instead of waiting. Bytes it does pull off the socket are in order, so they are kept too.
    """
    if rfile is None:
        return b""
    chunks = []
    old = sock.gettimeout()
    sock.settimeout(0.0)
    try:
        while True:
            try:
                chunk = rfile.read1(1 << 16)
            except (BlockingIOError, ssl.SSLWantReadError, InterruptedError):
                break
            except (OSError, ValueError):
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        sock.settimeout(old)
    return b"".join(chunks)


def take_over(conn, *, seq: int | None = None, recv_size: int = 1 << 18,
              max_payload: int = MAX_REASSEMBLED) -> PacketReader:
    """A :class:`PacketReader` on a logged-in PyMySQL connection's socket (TLS included).

    PyMySQL must not read from the connection afterwards; keep *conn* referenced (its
    ``__del__`` closes the socket) and close it with ``conn._force_close()``.
    """
    sock = conn._sock
    if sock is None:
        raise ConnectionLost("the connection is already closed")
    initial = drain_buffered(getattr(conn, "_rfile", None), sock)
    return PacketReader(sock, initial, seq=seq, recv_size=recv_size, max_payload=max_payload)
