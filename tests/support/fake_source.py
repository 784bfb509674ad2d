"""A fake MySQL 8.4 source for tests: just enough of the protocol for the replica client and
the Spark source's driver.

* :class:`EventBuilder` builds MySQL 8 binlog events byte by byte from the documented layouts
  (v4 header: timestamp 4, type 1, server_id 4, event_size 4, log_pos 4, flags 2; then the body;
  then the CRC32 of all that, little-endian, computed with zlib): FORMAT_DESCRIPTION,
  PREVIOUS_GTIDS, GTID, QUERY, TABLE_MAP, WRITE/UPDATE/DELETE_ROWS v2, XID, ROTATE.
* :class:`BinlogFile` places events at their real file offsets (log_pos = end of the event);
  a file that is not the last one ends with a real ROTATE to the next file.
* :class:`FakeSource` listens on 127.0.0.1 (a free port) in a thread and speaks: handshake v10
  with mysql_native_password, COM_QUERY (OK for SET, result sets for the SHOW/SELECT queries
  the client and the Spark driver send, error 1064 for what MySQL 8.4 no longer knows, e.g.
  SHOW MASTER STATUS), COM_REGISTER_SLAVE, COM_BINLOG_DUMP_GTID and COM_BINLOG_DUMP. A dump is
  served as MySQL 8.4's Binlog_sender does (sql/rpl_binlog_sender.cc):

  - per file: an artificial ROTATE (timestamp 0, log_pos 0, LOG_EVENT_ARTIFICIAL_F) naming the
    file and the start position, then the file's FORMAT_DESCRIPTION (log_pos and created
    cleared when the dump skips the start of the file), then the events;
  - COM_BINLOG_DUMP (file, pos): the events at or after pos (from 4: PREVIOUS_GTIDS and all),
    then the following files; pos < 4, pos > file size, a pos inside an event or an unknown
    file: ERR 1236;
  - COM_BINLOG_DUMP_GTID (set): from the last file whose PREVIOUS_GTIDS the replica has, every
    transaction whose GTID is not in the set;
  - then EOF (BINLOG_DUMP_NON_BLOCK) or nothing (blocking: the fake waits).

The binlog can change while the source runs (``src.binlog = ...`` or ``src.binlogs = [...]``): a
new connection sees the new files (an active file that grew, a rotation).
``SHOW BINARY LOG STATUS`` gives the last file's size and the executed GTID set (the first
file's PREVIOUS_GTIDS plus every transaction in the files); ``@@gtid_purged`` defaults to the
first file's PREVIOUS_GTIDS and ``@@gtid_executed`` to the executed set.

Each connection can be scripted (``plans``): cut the connection after N events of the dump,
answer the dump with an ERR packet, and so on. Everything the client sent is recorded.
"""

from __future__ import annotations

import hashlib
import re
import socket
import struct
import threading
import zlib
from dataclasses import dataclass, field

from cdc.binlog.gtid import GtidSet

# --- binlog events ---------------------------------------------------------------------------

FDE, ROTATE, QUERY, XID, TABLE_MAP, GTID, PREVIOUS_GTIDS = 15, 4, 2, 16, 19, 33, 35
WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2 = 30, 31, 32
COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID = 0x12, 0x1E
LOG_EVENT_ARTIFICIAL_F = 0x20
LOG_EVENT_BINLOG_IN_USE_F = 0x1
STMT_END_F = 0x1
ROWS_EVENTS = {"c": WRITE_ROWS_V2, "u": UPDATE_ROWS_V2, "d": DELETE_ROWS_V2}

# MySQL 8.4 FORMAT_DESCRIPTION post-header lengths, one byte per event type 1..42
# (libs/mysql/binlog/event/control_events.cpp, server_event_header_length[] for binlog v4):
FDE_84_POST_HEADER_LENGTHS = bytes([
    0,    # 1 START_EVENT_V3 (unused)
    13,   # 2 QUERY_EVENT: QUERY_HEADER_LEN
    0,    # 3 STOP_EVENT
    8,    # 4 ROTATE_EVENT: the 8-byte position
    0,    # 5 INTVAR_EVENT
    0, 0, 0,  # 6 LOAD, 7 SLAVE, 8 CREATE_FILE (removed)
    4,    # 9 APPEND_BLOCK_EVENT
    0,    # 10 EXEC_LOAD
    4,    # 11 DELETE_FILE_EVENT
    0,    # 12 NEW_LOAD
    0,    # 13 RAND_EVENT
    0,    # 14 USER_VAR_EVENT
    99,   # 15 FORMAT_DESCRIPTION_EVENT: 2 + 50 + 4 + 1 + 42 event types
    0,    # 16 XID_EVENT
    4,    # 17 BEGIN_LOAD_QUERY_EVENT
    26,   # 18 EXECUTE_LOAD_QUERY_EVENT
    8,    # 19 TABLE_MAP_EVENT
    0, 0, 0,  # 20-22 PRE_GA rows events
    0, 0, 0,  # 23-25 rows events v1 (removed in 8.4.0)
    2,    # 26 INCIDENT_EVENT
    0,    # 27 HEARTBEAT_LOG_EVENT
    0,    # 28 IGNORABLE_LOG_EVENT
    0,    # 29 ROWS_QUERY_LOG_EVENT
    10, 10, 10,  # 30-32 WRITE/UPDATE/DELETE_ROWS_EVENT (v2)
    42,   # 33 GTID_LOG_EVENT
    42,   # 34 ANONYMOUS_GTID_LOG_EVENT
    0,    # 35 PREVIOUS_GTIDS_LOG_EVENT
    18,   # 36 TRANSACTION_CONTEXT_EVENT
    52,   # 37 VIEW_CHANGE_EVENT
    0,    # 38 XA_PREPARE_LOG_EVENT
    10,   # 39 PARTIAL_UPDATE_ROWS_EVENT
    40,   # 40 TRANSACTION_PAYLOAD_EVENT (MySQL writes the type code here)
    0,    # 41 HEARTBEAT_LOG_EVENT_V2
    0,    # 42 GTID_TAGGED_LOG_EVENT
])
assert len(FDE_84_POST_HEADER_LENGTHS) == 42


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes((n,))
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def lenenc_str(b: bytes) -> bytes:
    return lenenc(len(b)) + b


def with_crc(raw: bytes) -> bytes:
    return raw + struct.pack("<I", zlib.crc32(raw))


def event(type_code: int, body: bytes, *, timestamp: int = 1_750_000_000, server_id: int = 1,
          log_pos: int = 0, flags: int = 0) -> bytes:
    """One event with a CRC32 trailer (log_pos filled in later by :func:`place`)."""
    size = 19 + len(body) + 4
    return with_crc(struct.pack("<IBIIIH", timestamp, type_code, server_id, size, log_pos, flags)
                    + body)


def place(events: list[bytes], start: int = 4) -> list[bytes]:
    """Set each event's log_pos to the offset after it in a file starting at *start*; redo CRCs."""
    out, pos = [], start
    for ev in events:
        pos += len(ev)
        raw = bytearray(ev[:-4])
        raw[13:17] = struct.pack("<I", pos)
        out.append(with_crc(bytes(raw)))
    return out


@dataclass
class Table:
    """``schema.table (id INT NOT NULL PRIMARY KEY, name VARCHAR(40) utf8mb4 NULL)``."""

    table_id: int = 91
    schema: str = "shop"
    name: str = "items"


class EventBuilder:
    """MySQL 8.4 events for one table of (INT id, VARCHAR(40) name) rows."""

    def __init__(self, uuid: str = "3e11fa47-71ca-11e1-9e33-c80aa9429562", server_id: int = 1,
                 timestamp: int = 1_750_000_000):
        self.uuid = uuid
        self.sid = bytes.fromhex(uuid.replace("-", ""))
        self.server_id = server_id
        self.timestamp = timestamp

    def ev(self, type_code: int, body: bytes, **kw) -> bytes:
        kw.setdefault("timestamp", self.timestamp)
        kw.setdefault("server_id", self.server_id)
        return event(type_code, body, **kw)

    def rotate(self, next_file: str, pos: int = 4, *, artificial: bool = True) -> bytes:
        # post-header: position (8); body: the file name. The dump's first, invented rotate has
        # timestamp 0, log_pos 0 and LOG_EVENT_ARTIFICIAL_F.
        return event(ROTATE, struct.pack("<Q", pos) + next_file.encode(),
                      timestamp=0 if artificial else self.timestamp, server_id=self.server_id,
                      flags=LOG_EVENT_ARTIFICIAL_F if artificial else 0)

    def fde(self) -> bytes:
        # binlog_version 2 | server_version 50 (NUL-padded) | create_timestamp 4 |
        # common header length 1 (19) | post-header lengths (42) | checksum algorithm 1 (CRC32)
        body = (struct.pack("<H", 4) + b"8.4.0".ljust(50, b"\0") + struct.pack("<I", 0)
                + bytes((19,)) + FDE_84_POST_HEADER_LENGTHS + b"\x01")
        return self.ev(FDE, body)

    def previous_gtids(self, gtids: str) -> bytes:
        return self.ev(PREVIOUS_GTIDS, GtidSet.parse(gtids).to_bytes())

    def gtid(self, gno: int, tx_length: int = 0) -> bytes:
        # flags 1 | sid 16 | gno 8 | lt_type 1 (2) | last_committed 8 | sequence_number 8 |
        # immediate_commit_timestamp 7 (high bit clear: original = immediate) |
        # transaction_length lenenc | immediate_server_version 4 (high bit clear)
        commit_us = self.timestamp * 1_000_000 + gno
        body = (b"\x00" + self.sid + struct.pack("<q", gno) + b"\x02"
                + struct.pack("<qq", gno - 1, gno) + commit_us.to_bytes(7, "little")
                + lenenc(tx_length) + struct.pack("<I", 80400))
        return self.ev(GTID, body)

    def query(self, sql: str, schema: str = "") -> bytes:
        # thread_id 4 | exec_time 4 | schema length 1 | error_code 2 | status-vars length 2 |
        # status vars (none) | schema | NUL | query text
        s = schema.encode()
        return self.ev(QUERY, struct.pack("<IIBHH", 7, 0, len(s), 0, 0) + s + b"\0"
                       + sql.encode())

    def table_map(self, t: Table) -> bytes:
        # table_id 6 | flags 2 | schema (len 1, name, NUL) | table (len 1, name, NUL) |
        # column count lenenc | types | metadata (lenenc length + bytes) | NULL bitmap |
        # optional metadata TLVs: SIGNEDNESS(1), DEFAULT_CHARSET(2), COLUMN_NAME(4),
        # SIMPLE_PRIMARY_KEY(8)
        s, n = t.schema.encode(), t.name.encode()
        types = bytes((3, 15))                 # LONG, VARCHAR
        meta = struct.pack("<H", 160)          # VARCHAR(40) in utf8mb4: 160 bytes max
        nullable = bytes((0b10,))              # name is nullable
        names = lenenc_str(b"id") + lenenc_str(b"name")
        optional = (b"\x01" + lenenc(1) + b"\x00"          # id signed
                    + b"\x02" + lenenc(3) + lenenc(255)   # utf8mb4_0900_ai_ci (fc ff 00)
                    + b"\x04" + lenenc(len(names)) + names
                    + b"\x08" + lenenc(1) + b"\x00")       # PRIMARY KEY (id)
        body = (t.table_id.to_bytes(6, "little") + b"\x01\x00" + bytes((len(s),)) + s + b"\0"
                + bytes((len(n),)) + n + b"\0" + lenenc(2) + types + lenenc(len(meta)) + meta
                + nullable + optional)
        return self.ev(TABLE_MAP, body)

    @staticmethod
    def _image(row: tuple[int, str | None]) -> bytes:
        # NULL bitmap (1 byte: bit 1 = name), then the non-NULL values (INT: 4 bytes LE;
        # VARCHAR(160 bytes max): 1-byte length + bytes)
        id_, name = row
        out = bytearray((0b10 if name is None else 0,))
        out += struct.pack("<i", id_)
        if name is not None:
            raw = name.encode("utf-8")
            out += bytes((len(raw),)) + raw
        return bytes(out)

    def rows_event(self, op: str, t: Table, rows, *, stmt_end: bool = True) -> bytes:
        """A v2 rows event: ``op`` c (rows: images), u (rows: (before, after) pairs) or d.

        table_id 6 | flags 2 (STMT_END_F on a statement's last rows event) | extra-data length 2
        (2: none) | column count lenenc | columns-present bitmap (update: before and after) |
        rows: one image each (update: the before image, then the after image)"""
        if op == "u":
            data = b"".join(self._image(before) + self._image(after) for before, after in rows)
        else:
            data = b"".join(self._image(r) for r in rows)
        bitmaps = b"\x03\x03" if op == "u" else b"\x03"
        body = (t.table_id.to_bytes(6, "little")
                + struct.pack("<HH", STMT_END_F if stmt_end else 0, 2) + lenenc(2) + bitmaps
                + data)
        return self.ev(ROWS_EVENTS[op], body)

    def write_rows(self, t: Table, rows: list[tuple[int, str | None]]) -> bytes:
        return self.rows_event("c", t, rows)

    def update_rows(self, t: Table, pairs: list[tuple[tuple, tuple]]) -> bytes:
        return self.rows_event("u", t, pairs)

    def delete_rows(self, t: Table, rows: list[tuple[int, str | None]]) -> bytes:
        return self.rows_event("d", t, rows)

    def xid(self, xid: int) -> bytes:
        return self.ev(XID, struct.pack("<Q", xid))

    def transaction(self, gno: int, t: Table, rows, xid: int) -> list[bytes]:
        """One INSERT of *rows* into *t*: GTID, BEGIN, TABLE_MAP, WRITE_ROWS, XID."""
        return self.transaction_of(gno, [("c", t, rows)], xid)

    def transaction_of(self, gno: int, statements, xid: int) -> list[bytes]:
        """GTID, BEGIN, per statement ``(op, table, rows)`` a TABLE_MAP and its rows event
        (STMT_END_F), XID; the GTID event carries the transaction's length."""
        rest = [self.query("BEGIN")]
        for op, t, rows in statements:
            rest += [self.table_map(t), self.rows_event(op, t, rows)]
        rest.append(self.xid(xid))
        n = sum(map(len, rest))
        length = n + len(self.gtid(gno, 0))
        while length != n + len(self.gtid(gno, length)):  # lenenc may grow the GTID event
            length = n + len(self.gtid(gno, length))
        return [self.gtid(gno, length)] + rest


@dataclass
class BinlogFile:
    """A binlog file: its events placed at real positions, and which GTID each one belongs to."""

    name: str
    header: list[bytes]                        # FDE, PREVIOUS_GTIDS
    transactions: list[tuple[str, list[bytes]]]  # (gtid text, events)
    footer: list[bytes] = field(default_factory=list)   # the ROTATE to the next file, if any

    @classmethod
    def build(cls, name: str, header: list[bytes], transactions: list[tuple[str, list[bytes]]],
              *, rotate_to: str | None = None, builder: "EventBuilder | None" = None):
        """Place the events; *rotate_to* closes the file with a real ROTATE to that file."""
        footer = [] if rotate_to is None else \
            [(builder or EventBuilder()).rotate(rotate_to, 4, artificial=False)]
        flat = header + [e for _, evs in transactions for e in evs] + footer
        placed = place(flat)
        it = iter(placed)
        hdr = [next(it) for _ in header]
        txs = [(g, [next(it) for _ in evs]) for g, evs in transactions]
        return cls(name, hdr, txs, [next(it) for _ in footer])

    def events(self) -> list[tuple[int, bytes, str | None]]:
        """(offset in the file, event, GTID of its transaction or None), in file order."""
        out, pos = [], 4
        for gtid, ev in ([(None, e) for e in self.header]
                         + [(g, e) for g, evs in self.transactions for e in evs]
                         + [(None, e) for e in self.footer]):
            out.append((pos, ev, gtid))
            pos += len(ev)
        return out

    @property
    def size(self) -> int:
        return 4 + sum(len(ev) for _, ev, _ in self.events())

    @property
    def previous_gtids(self) -> GtidSet:
        for ev in self.header:
            if ev[4] == PREVIOUS_GTIDS:
                return GtidSet.from_bytes(ev, 19)[0]
        return GtidSet()

    @property
    def gtids(self) -> GtidSet:
        """The GTIDs of the transactions in this file."""
        return GtidSet.from_gtids([g for g, _ in self.transactions if g])

    def end_of(self, gtid: str) -> int:
        """The offset right after the transaction *gtid* (its XID's log_pos)."""
        for g, evs in self.transactions:
            if g == gtid:
                return struct.unpack_from("<I", evs[-1], 13)[0]
        raise KeyError(gtid)


def parse_dump(pkt: bytes) -> dict:
    """A COM_BINLOG_DUMP or COM_BINLOG_DUMP_GTID payload (command byte first): flags, server_id,
    file, pos and (GTID dump) gtids."""
    if pkt[0] == COM_BINLOG_DUMP_GTID:
        # flags 2 | server_id 4 | name length 4 | name | pos 8 | data size 4 | GTID set
        flags, server_id, name_len = struct.unpack_from("<HII", pkt, 1)
        p = 11 + name_len
        pos, _size = struct.unpack_from("<QI", pkt, p)
        return {"flags": flags, "server_id": server_id, "file": pkt[11:p].decode(), "pos": pos,
                "gtids": GtidSet.from_bytes(pkt, p + 12)[0]}
    # COM_BINLOG_DUMP: pos 4 | flags 2 | server_id 4 | file name
    pos, flags, server_id = struct.unpack_from("<IHI", pkt, 1)
    return {"flags": flags, "server_id": server_id, "file": pkt[11:].decode(), "pos": pos,
            "gtids": None}


def mysql_gtid_text(gtids: GtidSet) -> str:
    """A GTID set as MySQL shows it (SHOW BINARY LOG STATUS, @@gtid_executed): one UUID a line,
    ``uuid:1-5,\nuuid2:1-3``."""
    return str(gtids).replace(",", ",\n")


def cleared_fde(ev: bytes) -> bytes:
    """The FORMAT_DESCRIPTION as sent when the dump skips the start of the file: log_pos 0,
    created 0, LOG_EVENT_BINLOG_IN_USE_F cleared, CRC recomputed."""
    raw = bytearray(ev[:-4])
    raw[13:17] = b"\0\0\0\0"
    raw[17] &= ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF
    raw[19 + 2 + 50:19 + 2 + 50 + 4] = b"\0\0\0\0"
    return with_crc(bytes(raw))


# --- the server ---------------------------------------------------------------------------------


def native_password_token(password: str, salt: bytes) -> bytes:
    """mysql_native_password: SHA1(pw) XOR SHA1(salt + SHA1(SHA1(pw)))."""
    if not password:
        return b""
    h1 = hashlib.sha1(password.encode()).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(salt + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


@dataclass
class Plan:
    """What one connection does after the dump command."""

    cut_after_events: int | None = None   # close the socket after this many events
    hang_after_events: int | None = None  # then send nothing more (no heartbeat either)
    dump_error: tuple[int, str] | None = None  # answer the dump with this ERR


@dataclass
class Received:
    queries: list[str] = field(default_factory=list)
    register: list[bytes] = field(default_factory=list)
    dumps: list[bytes] = field(default_factory=list)   # full payloads, command byte first
    users: list[str] = field(default_factory=list)


class FakeSource:
    CAPS = (0x1 | 0x2 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x10000 | 0x20000 | 0x80000
            | 0x100000 | 0x200000)

    def __init__(self, binlog: BinlogFile | list[BinlogFile], *, user: str = "cdc",
                 password: str = "s3cret", version: str = "8.4.0",
                 variables: dict | None = None, plans: list[Plan] | None = None,
                 grants: list[str] | None = None):
        self.binlogs: list[BinlogFile] = list(binlog) if isinstance(binlog, (list, tuple)) \
            else [binlog]
        self.user, self.password, self.version = user, password, version
        # gtid_purged / gtid_executed follow the binlog unless given here
        self.variables = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL",
                          "binlog_checksum": "CRC32", "server_id": "1", "gtid_mode": "ON",
                          "binlog_row_metadata": "FULL", "version": version}
        self.variables.update(variables or {})
        self.grants = grants or ["GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`"]
        self.plans = list(plans or [])
        self.got = Received()
        self.connections = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept_loop, daemon=True, name="fake-source")

    @property
    def binlog(self) -> BinlogFile:
        """The active (last) binlog file."""
        return self.binlogs[-1]

    @binlog.setter
    def binlog(self, binlog: BinlogFile) -> None:
        """Serve this one file from now on (e.g. the same file with more transactions)."""
        self.binlogs = [binlog]

    @property
    def executed(self) -> GtidSet:
        """``gtid_executed``: the first file's PREVIOUS_GTIDS and every transaction since."""
        files = self.binlogs
        return files[0].previous_gtids.union(*(f.gtids for f in files)) if files else GtidSet()

    def variable(self, name: str):
        name = name.lower()
        if name in self.variables:
            return self.variables[name]
        if name == "gtid_purged":
            return mysql_gtid_text(self.binlogs[0].previous_gtids if self.binlogs else GtidSet())
        if name == "gtid_executed":
            return mysql_gtid_text(self.executed)
        return None

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop_listening(self) -> None:
        """Refuse new connections from now on (the server is gone for good)."""
        try:  # shutdown() wakes the accept() in the other thread (close() alone would not)
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._listener.close()
        except OSError:
            pass

    def stop(self) -> None:
        self._stop.set()
        self.stop_listening()
        for s in list(self._socks):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self._thread.join(5)

    # --- plumbing ---

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(sock)
            plan = self.plans.pop(0) if self.plans else Plan()
            self.connections += 1
            threading.Thread(target=self._serve, args=(sock, plan, self.connections),
                             daemon=True).start()

    @staticmethod
    def _send(sock, seq: int, payload: bytes) -> int:
        sock.sendall(len(payload).to_bytes(3, "little") + bytes((seq & 0xFF,)) + payload)
        return seq + 1

    @staticmethod
    def _recv_exact(sock, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("client went away")
            out += chunk
        return out

    def _recv(self, sock) -> tuple[int, bytes]:
        head = self._recv_exact(sock, 4)
        n = int.from_bytes(head[:3], "little")
        return head[3], self._recv_exact(sock, n)

    @staticmethod
    def ok() -> bytes:
        return b"\x00\x00\x00" + struct.pack("<HH", 0x0002, 0)

    @staticmethod
    def err(code: int, message: str, state: str = "HY000") -> bytes:
        return b"\xff" + struct.pack("<H", code) + b"#" + state.encode() + message.encode()

    def _result(self, sock, columns: list[str], rows: list[tuple]) -> None:
        seq = self._send(sock, 1, lenenc(len(columns)))
        for c in columns:
            coldef = (lenenc_str(b"def") + lenenc_str(b"") + lenenc_str(b"") + lenenc_str(b"")
                      + lenenc_str(c.encode()) + lenenc_str(c.encode()) + b"\x0c"
                      + struct.pack("<HIBHB", 255, 1024, 0xFD, 0, 0) + b"\0\0")
            seq = self._send(sock, seq, coldef)
        seq = self._send(sock, seq, b"\xfe\x00\x00\x02\x00")
        for row in rows:
            seq = self._send(sock, seq, b"".join(
                b"\xfb" if v is None else lenenc_str(str(v).encode()) for v in row))
        self._send(sock, seq, b"\xfe\x00\x00\x02\x00")

    def _serve(self, sock, plan: Plan, conn_no: int) -> None:
        try:
            self._serve_inner(sock, plan, conn_no)
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def _serve_inner(self, sock, plan: Plan, conn_no: int) -> None:
        salt = bytes(range(65, 85))  # 20 bytes of auth-plugin-data
        caps = self.CAPS
        # Handshake v10: protocol 10 | version NUL | connection id 4 | auth data part 1 (8) |
        # filler 0 | caps low 2 | charset 1 | status 2 | caps high 2 | auth data length 1 |
        # reserved 10 | auth data part 2 (12 + NUL) | auth plugin name NUL
        hs = (b"\x0a" + self.version.encode() + b"\0" + struct.pack("<I", 100 + conn_no)
              + salt[:8] + b"\0" + struct.pack("<H", caps & 0xFFFF) + bytes((255,))
              + struct.pack("<HH", 0x0002, caps >> 16) + bytes((21,)) + b"\0" * 10
              + salt[8:] + b"\0" + b"mysql_native_password\0")
        self._send(sock, 0, hs)
        _, resp = self._recv(sock)
        p = 32  # client caps 4 | max packet 4 | charset 1 | filler 23
        z = resp.index(b"\0", p)
        user = resp[p:z].decode()
        p = z + 1
        n = resp[p]  # auth response: lenenc (PLUGIN_AUTH_LENENC_CLIENT_DATA) or 1-byte length;
        p += 1       # a 20-byte token has the same 1-byte prefix either way
        token = resp[p:p + n]
        self.got.users.append(user)
        if user != self.user or token != native_password_token(self.password, salt):
            self._send(sock, 2, self.err(1045, f"Access denied for user '{user}'@'127.0.0.1' "
                                               f"(using password: YES)", "28000"))
            return
        self._send(sock, 2, self.ok())
        while True:
            _, pkt = self._recv(sock)
            cmd = pkt[0]
            if cmd == 0x01:   # COM_QUIT
                return
            if cmd == 0x0E:   # COM_PING
                self._send(sock, 1, self.ok())
            elif cmd == 0x03:
                self._query(sock, pkt[1:].decode())
            elif cmd == 0x15:
                self.got.register.append(pkt)
                self._send(sock, 1, self.ok())
            elif cmd in (COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID):
                self.got.dumps.append(pkt)
                self._dump(sock, pkt, plan)
                return
            else:
                self._send(sock, 1, self.err(1047, "Unknown command", "08S01"))

    def _query(self, sock, sql: str) -> None:
        self.got.queries.append(sql)
        up = " ".join(sql.strip().rstrip(";").upper().split())
        files = list(self.binlogs)
        if up.startswith("SET "):
            self._send(sock, 1, self.ok())
        elif up.startswith("SHOW GLOBAL VARIABLES"):
            wanted = [w.lower() for w in re.findall(r"'([^']+)'", sql)]
            self._result(sock, ["Variable_name", "Value"],
                         [(k, self.variable(k)) for k in wanted if self.variable(k) is not None])
        elif up.startswith("SELECT @@"):
            names = [n.strip().split(".")[-1].lstrip("@") for n in sql.strip()[7:].split(",")]
            self._result(sock, [f"@@{n}" for n in names], [tuple(self.variable(n) for n in names)])
        elif up == "SELECT 1":
            self._result(sock, ["1"], [(1,)])
        elif up == "SELECT VERSION()":
            self._result(sock, ["VERSION()"], [(self.version,)])
        elif up == "SELECT CURRENT_USER()":
            self._result(sock, ["CURRENT_USER()"], [(f"{self.user}@%",)])
        elif up == "SHOW GRANTS":
            self._result(sock, [f"Grants for {self.user}@%"], [(g,) for g in self.grants])
        elif up.startswith("SELECT TABLE_SCHEMA, TABLE_NAME FROM INFORMATION_SCHEMA.TABLES"):
            self._result(sock, ["TABLE_SCHEMA", "TABLE_NAME"], [(Table.schema, Table.name)])
        elif up.startswith("SELECT DISTINCT TABLE_SCHEMA, TABLE_NAME FROM "
                           "INFORMATION_SCHEMA.STATISTICS WHERE INDEX_NAME = 'PRIMARY'"):
            self._result(sock, ["TABLE_SCHEMA", "TABLE_NAME"], [(Table.schema, Table.name)])
        elif up == "SHOW SESSION STATUS LIKE 'SSL_CIPHER'":   # a plain connection: no cipher
            self._result(sock, ["Variable_name", "Value"], [("Ssl_cipher", "")])
        elif up == "SHOW REPLICAS":
            self._result(sock, ["Server_Id", "Host", "Port", "Source_Id", "Replica_UUID"], [])
        elif up in ("SHOW BINARY LOGS", "SHOW MASTER LOGS"):
            self._result(sock, ["Log_name", "File_size", "Encrypted"],
                         [(f.name, f.size, "No") for f in files])
        elif up == "SHOW BINARY LOG STATUS":
            last = files[-1]
            self._result(sock, ["File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB",
                                "Executed_Gtid_Set"],
                         [(last.name, last.size, "", "", mysql_gtid_text(self.executed))])
        elif up == "SHOW MASTER STATUS":   # removed in MySQL 8.4: a syntax error there
            self._send(sock, 1, self.err(
                1064, "You have an error in your SQL syntax; check the manual that corresponds "
                      "to your MySQL server version for the right syntax to use near "
                      "'MASTER STATUS' at line 1", "42000"))
        else:
            self._send(sock, 1, self.err(1064, f"fake source does not know: {sql}", "42000"))

    def _dump_stream(self, pkt: bytes) -> tuple[int, list[bytes] | bytes]:
        """(flags, the events to send) for a dump command, or (flags, an ERR payload)."""
        files = list(self.binlogs)   # what the binlog is now
        b = EventBuilder()
        dump = parse_dump(pkt)
        flags, name, pos = dump["flags"], dump["file"], dump["pos"]
        if pkt[0] == COM_BINLOG_DUMP_GTID:
            have = dump["gtids"]
            # the last file whose PREVIOUS_GTIDS the replica has (find_first_log_not_in_gtid_set)
            first = len(files) - 1
            while first > 0 and not files[first].previous_gtids.issubset(have):
                first -= 1
            stream: list[bytes] = []
            for f in files[first:]:
                skip_start = bool(f.transactions) and f.transactions[0][0] in have
                stream.append(b.rotate(f.name, 4))
                for _, ev, gtid in f.events():
                    if ev[4] == FDE:
                        stream.append(cleared_fde(ev) if skip_start else ev)
                    elif gtid is None or gtid not in have:
                        stream.append(ev)
            return flags, stream
        names = [f.name for f in files]
        if name not in names:
            return flags, self.err(1236, "Could not find first log file name in binary log "
                                         "index file")
        i = names.index(name)
        if pos < 4:
            return flags, self.err(1236, "Client requested source to start replication from "
                                         "position < 4.")
        if pos > files[i].size:
            return flags, self.err(1236, "Client requested source to start replication from "
                                         "position > file size")
        starts = {off for off, _, _ in files[i].events()} | {files[i].size}
        if pos not in starts:   # MySQL reads garbage there and gives up
            return flags, self.err(1236, f"bogus data in log event; the first event '{name}' at "
                                         f"{pos}, the last event read from '{name}' at 4, the "
                                         f"last byte read from '{name}' at {pos}.")
        stream = []
        for f in files[i:]:
            start = pos if f.name == name else 4
            stream.append(b.rotate(f.name, start))
            for off, ev, _ in f.events():
                if ev[4] == FDE:
                    stream.append(cleared_fde(ev) if start > 4 else ev)
                elif off >= start:
                    stream.append(ev)
        return flags, stream

    def _dump(self, sock, pkt: bytes, plan: Plan) -> None:
        flags, stream = self._dump_stream(pkt)
        if isinstance(stream, bytes):
            self._send(sock, 1, stream)
            return
        if plan.dump_error:
            self._send(sock, 1, self.err(*plan.dump_error))
            return
        seq = 1
        for i, ev in enumerate(stream):
            if plan.cut_after_events is not None and i >= plan.cut_after_events:
                sock.shutdown(socket.SHUT_RDWR)
                return
            if plan.hang_after_events is not None and i >= plan.hang_after_events:
                break
            seq = self._send(sock, seq, b"\x00" + ev)
        if flags & 1 and plan.hang_after_events is None:  # BINLOG_DUMP_NON_BLOCK: EOF
            self._send(sock, seq, b"\xfe\x00\x00\x02\x00")
            return
        while not self._stop.wait(0.1):  # blocking mode: nothing more to send
            pass
