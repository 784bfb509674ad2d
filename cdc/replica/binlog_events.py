"""``SHOW BINLOG EVENTS`` pages read on a connection of their own, keeping only the rows of QUERY
events: what :func:`cdc.replica.binlog_ddl.ddl_statements` looks for in a long stretch of binlog.

A PyMySQL result row costs several microseconds of Python (every column decoded); a stretch of
one-row transactions is five rows per transaction. Here the result's packets are read raw
(:func:`cdc.replica.packets.take_over`) and a row is decoded only when it may be a QUERY event's
(its bytes hold the lenenc text ``Query``), so the rest cost one substring test each.
"""

from __future__ import annotations

from typing import NamedTuple

from cdc.errors import ConnectionLost, ProtocolError, map_server_error
from cdc.replica.packets import HEADER_LEN, MAX_PAYLOAD, frame, parse_err, take_over
from cdc.replica.sql import connect

__all__ = ["Page", "QueryEventPages"]

_QUERY = b"\x05Query"       # the Event_type column of a QUERY event, lenenc-encoded
_COM_QUERY = b"\x03"


class Page(NamedTuple):
    """One ``SHOW BINLOG EVENTS ... LIMIT`` page: the rows of its QUERY events (as PyMySQL gives
    them: Log_name, Pos, Event_type, Server_id, End_log_pos, Info), how many rows it had, and its
    last row (None when it had none)."""

    queries: list
    count: int
    last: tuple | None


def _columns(p: bytes, n: int) -> list:
    """The *n* lenenc text columns of a text-protocol row (None for NULL)."""
    out: list = []
    i = 0
    for _ in range(n):
        b = p[i]
        if b < 0xFB:
            size, i = b, i + 1
        elif b == 0xFB:
            out.append(None)
            i += 1
            continue
        elif b == 0xFC:
            size, i = int.from_bytes(p[i + 1:i + 3], "little"), i + 3
        elif b == 0xFD:
            size, i = int.from_bytes(p[i + 1:i + 4], "little"), i + 4
        else:
            size, i = int.from_bytes(p[i + 1:i + 9], "little"), i + 9
        if i + size > len(p):
            raise ProtocolError("a SHOW BINLOG EVENTS row is shorter than its columns say")
        out.append(p[i:i + size])
        i += size
    return out


def _row(p: bytes) -> tuple:
    log_name, pos, kind, server_id, end, info = _columns(p, 6)
    return (log_name.decode("utf-8", "replace"), int(pos), kind.decode("ascii", "replace"),
            int(server_id), int(end), None if info is None else info.decode("utf-8", "replace"))


class QueryEventPages:
    """``SHOW BINLOG EVENTS IN file FROM pos LIMIT skip, n`` pages (:class:`Page`) on one connection
    of *config*'s (opened now; :meth:`close` it)."""

    def __init__(self, config):
        self.config = config
        self._conn = connect(config)
        self._reader = take_over(self._conn)
        self._reader.sock.settimeout(max(config.connect_timeout, 30.0))

    def close(self) -> None:
        try:
            self._conn._force_close()
        except Exception:  # noqa: BLE001 -- closing a connection that is gone already
            pass

    def __call__(self, file: str, pos: int, skip: int, limit: int) -> Page:
        sql = (f"SHOW BINLOG EVENTS IN {self._conn.escape(file)} FROM {int(pos)} "
               f"LIMIT {int(skip)}, {int(limit)}")
        self._reader.sock.sendall(frame(_COM_QUERY + sql.encode("utf-8"), 0))
        self._reader.seq = 1
        head = self._payload()
        if head[0] == 0xFF:
            raise self._error(head)
        if head[0] >= 0xFB:
            raise ProtocolError(f"SHOW BINLOG EVENTS answered with a packet starting "
                                f"0x{head[0]:02x}, not a result set")
        ncols = head[0]
        for _ in range(ncols):              # the column definitions
            self._payload()
        if not self._is_eof(self._payload()):
            raise ProtocolError("SHOW BINLOG EVENTS: no EOF after the column definitions")
        queries, count, last = self._rows()
        return Page(queries, count, None if last is None else _row(last))

    def _rows(self) -> tuple[list, int, bytes | None]:
        """The result's rows up to its EOF: (the QUERY events' rows, how many rows, the last
        row's payload). The rows are walked in the reader's buffer, a copy made only of a row
        that may be a QUERY event's and of the last one; what is not a whole row of less than
        16 MiB there (the EOF, an error, a row still arriving) takes :meth:`_payload`."""
        queries: list = []
        count, last = 0, None
        r = self._reader
        most = min(r.max_payload, MAX_PAYLOAD - 1)
        while True:
            buf, i, end = r._buf, r._pos, len(r._buf)
            seq = r.seq
            span = None
            while end - i >= HEADER_LEN:
                length = buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16)
                stop = i + HEADER_LEN + length
                if stop > end or length > most or length == 0 or \
                        buf[i + HEADER_LEN] in (0xFF, 0xFE) or \
                        (seq is not None and buf[i + 3] != seq):
                    break
                seq = (buf[i + 3] + 1) & 0xFF
                count += 1
                span = (i + HEADER_LEN, stop)
                if buf.find(_QUERY, i + HEADER_LEN, stop) >= 0:
                    row = _row(bytes(buf[i + HEADER_LEN:stop]))
                    if row[2] == "Query":
                        queries.append(row)
                r.packets += 1
                i = stop
            if span is not None:
                last = bytes(buf[span[0]:span[1]])
                r.seq = seq
                r._advance(i)
            p = self._payload()
            if p[0] == 0xFF:
                raise self._error(p)
            if self._is_eof(p):
                return queries, count, last
            count += 1
            last = p
            if _QUERY in p:
                row = _row(p)
                if row[2] == "Query":
                    queries.append(row)

    @staticmethod
    def _is_eof(p: bytes) -> bool:
        return p[0] == 0xFE and len(p) < 9

    def _payload(self) -> bytes:
        try:
            p = self._reader.read_payload()
        except TimeoutError:
            raise ConnectionLost(f"no answer to SHOW BINLOG EVENTS from {self.config.where} "
                                 f"in {self._reader.sock.gettimeout():.0f} s") from None
        if not p:
            raise ProtocolError("an empty packet in a SHOW BINLOG EVENTS result")
        return p

    def _error(self, payload: bytes):
        err = parse_err(payload)
        c = self.config
        return map_server_error(err.code, err.message, user=c.user, where=c.where,
                                password_hint=c.password_hint)
