"""Reading a PyMySQL unbuffered result's rows straight from the connection's stream: the text
protocol's row packets parsed by one generated function per column count, instead of PyMySQL's
per-row packet objects and per-value method calls (about half the CPU of a chunk read with
PyMySQL, the default install's client).

The rows are exactly what ``cursor.fetchmany`` returns on a connection made with
:func:`cdc.snapshot.values.raw_connect_kwargs` (no converters, no text decoding): tuples of the
values' ``bytes``, None for NULL. The reader keeps PyMySQL's state as PyMySQL would (packet
sequence, the result's end, warnings); it reads ahead, so a read stopped before the result's end
drains the rest (as PyMySQL does) or, when that fails, closes the connection.
:func:`pymysql_batches` returns None where the connection is not the PyMySQL this was written
against (its private attributes), and the caller reads with ``fetchmany``.
"""

from __future__ import annotations

import errno
from typing import Callable, Iterator

from cdc.cache import BoundedCache

__all__ = ["pymysql_batches", "row_parser"]

_MAX_PACKET = 0xFFFFFF
_READ = 1 << 17          # bytes asked of the stream at a time
_MORE_RESULTS = 8        # SERVER_STATUS.SERVER_MORE_RESULTS_EXISTS
_PARSERS = BoundedCache(64)


def _value(buf, p: int):
    """A length-coded string at *p* that is not the one-byte-length case: (value, next p)."""
    c = buf[p]
    if c == 0xFB:
        return None, p + 1
    if c == 0xFC:
        n, p = buf[p + 1] | buf[p + 2] << 8, p + 3
    elif c == 0xFD:
        n, p = buf[p + 1] | buf[p + 2] << 8 | buf[p + 3] << 16, p + 4
    elif c == 0xFE:
        n, p = int.from_bytes(buf[p + 1:p + 9], "little"), p + 9
    else:
        raise ValueError(f"bad length-coded string at {p}: 0x{c:02x}")
    return buf[p:p + n], p + n


def row_parser(columns: int) -> Callable:
    """``parse(buf, p) -> (row tuple, end)``: the row of *columns* values whose packet payload
    starts at *p* in *buf* (a ``bytes``)."""
    return _PARSERS.get_or_build(columns, lambda: _build(columns))


def _build(columns: int) -> Callable:
    lines = ["def parse(buf, p):"]
    for i in range(columns):
        lines += [f"    n = buf[p]",
                  f"    if n < 251:",
                  f"        p += 1",
                  f"        v{i} = buf[p:p + n]",
                  f"        p += n",
                  f"    else:",
                  f"        v{i}, p = VALUE(buf, p)"]
    lines.append(f"    return ({''.join(f'v{i}, ' for i in range(columns))}), p")
    env = {"VALUE": _value}
    exec(compile("\n".join(lines) + "\n", "<text row parser>", "exec"), env)
    return env["parse"]


def _usable(conn, result) -> bool:
    return all(hasattr(conn, a) for a in ("_rfile", "_sock", "_next_seq_id", "_force_close",
                                          "_read_timeout")) \
        and getattr(result, "unbuffered_active", False) and \
        getattr(result, "field_count", None) is not None


def pymysql_batches(cursor, rows_per_batch: int) -> Iterator[list[tuple]] | None:
    """The rest of an unbuffered PyMySQL result (``SSCursor`` after ``execute``) in lists of
    up to *rows_per_batch* rows; None when the connection is not one this reader knows."""
    result = getattr(cursor, "_result", None)
    conn = getattr(cursor, "connection", None)
    if result is None or conn is None or not _usable(conn, result):
        return None
    return _batches(conn, result, rows_per_batch)


class _Stream:
    """The connection's bytes, read ahead in large pieces."""

    def __init__(self, conn):
        import pymysql
        self.conn = conn
        self.err = pymysql.err
        sock = conn._sock
        if getattr(conn, "_current_timeout", None) != conn._read_timeout:
            sock.settimeout(conn._read_timeout)
            if hasattr(conn, "_current_timeout"):
                conn._current_timeout = conn._read_timeout
        self.read1 = conn._rfile.read1

    def more(self) -> bytes:
        while True:
            try:
                data = self.read1(_READ)
                break
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                self.conn._force_close()
                raise self.err.OperationalError(
                    2013, f"Lost connection to MySQL server during query ({e})") from None
            except BaseException:
                self.conn._force_close()
                raise
        if not data:
            self.conn._force_close()
            raise self.err.OperationalError(2013, "Lost connection to MySQL server during query")
        return data


class _Packets:
    """The packets of the stream: :meth:`next` gives the next one's payload as ``(buf, start,
    end)`` (the payload is ``buf[start:end]``; a payload of several packets joined), keeping
    the sequence number."""

    def __init__(self, stream: _Stream, seq: int):
        self.stream = stream
        self.buf, self.p = b"", 0
        self.seq = seq

    def _whole(self) -> int:
        """The length of the packet at ``p``, read in whole."""
        while True:
            buf, p = self.buf, self.p
            have = len(buf) - p
            if have >= 4:
                length = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
                if have >= 4 + length:
                    return length
            self.buf, self.p = buf[p:] + self.stream.more(), 0

    def next(self) -> tuple:
        length = self._whole()
        buf, p = self.buf, self.p
        if buf[p + 3] != self.seq:
            self.stream.conn._force_close()
            raise self.stream.err.InternalError(f"Packet sequence number wrong - got "
                                                f"{buf[p + 3]} expected {self.seq}")
        self.seq = (self.seq + 1) & 0xFF
        self.p = p + 4 + length
        if length < _MAX_PACKET:
            return buf, p + 4, self.p
        parts = [buf[p + 4:self.p]]       # a payload longer than one packet: join them
        while length == _MAX_PACKET:
            length = self._whole()
            self.seq = (self.seq + 1) & 0xFF
            parts.append(self.buf[self.p + 4:self.p + 4 + length])
            self.p += 4 + length
        payload = b"".join(parts)
        return payload, 0, len(payload)


def _is_eof(buf, start: int, end: int) -> bool:
    return end - start < 9 and end > start and buf[start] == 0xFE


def _batches(conn, result, rows_per_batch: int) -> Iterator[list[tuple]]:
    parse = row_parser(result.field_count)
    packets = _Packets(_Stream(conn), conn._next_seq_id)
    done = False
    rows: list = []
    append = rows.append
    try:
        while True:
            buf, start, end = packets.next()
            if _is_eof(buf, start, end):        # the result's end
                conn._next_seq_id = packets.seq
                _finish(result, buf[start:end])
                done = True
                if rows:
                    yield rows
                return
            if buf[start] == 0xFF:
                conn._next_seq_id = packets.seq
                result.unbuffered_active = False
                done = True
                packets.stream.err.raise_mysql_exception(buf[start:end])
            row, at = parse(buf, start)
            if at != end:
                conn._force_close()
                raise packets.stream.err.InternalError(
                    f"row packet of {end - start} bytes holds {at - start} bytes of values")
            append(row)
            if len(rows) >= rows_per_batch:
                conn._next_seq_id = packets.seq
                yield rows
                rows = []
                append = rows.append
    finally:
        if not done:
            _drain(conn, result, packets)


def _finish(result, eof: bytes) -> None:
    """What PyMySQL does at an unbuffered result's EOF packet."""
    result.warning_count = int.from_bytes(eof[1:3], "little")
    result.has_next = bool(int.from_bytes(eof[3:5], "little") & _MORE_RESULTS)
    result.unbuffered_active = False
    result.connection = None
    result.rows = None


def _drain(conn, result, packets: _Packets) -> None:
    """A read stopped before the result's end: read the rest away (as PyMySQL's cursor close
    does); on any error, close the connection."""
    try:
        conn._next_seq_id = packets.seq
        if conn._sock is None:
            result.unbuffered_active = False
        while result.unbuffered_active:
            buf, start, end = packets.next()
            conn._next_seq_id = packets.seq
            if _is_eof(buf, start, end):
                _finish(result, buf[start:end])
            elif buf[start] == 0xFF:
                result.unbuffered_active = False
    except Exception:  # noqa: BLE001 - the connection is unusable: closed
        result.unbuffered_active = False
        try:
            conn._force_close()
        except Exception:  # noqa: BLE001
            pass
