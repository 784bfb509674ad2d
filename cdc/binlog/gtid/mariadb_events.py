"""Decoding the bodies of MariaDB's GTID events: GTID_EVENT (:func:`decode_maria_gtid_body`, into
:class:`MariaGtidInfo`) and GTID_LIST_EVENT (:func:`decode_maria_gtid_list_body`).

A *body* is the event bytes after the 19-byte common header, with the 4-byte CRC32 checksum (if
any) already stripped; ``bytes``, ``bytearray`` or ``memoryview``.  Source: MariaDB
``sql/log_event.cc`` (``Gtid_log_event``, ``Gtid_list_log_event`` constructors).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cdc.errors import TruncatedEventError
from cdc.binlog.gtid.mariadb import MariaGtid
from cdc.binlog.gtid.parts import Buffer

_U64 = struct.Struct("<Q")

# Gtid_log_event::flags2
FL_STANDALONE = 0x01
FL_GROUP_COMMIT_ID = 0x02
FL_TRANSACTIONAL = 0x04
FL_ALLOW_PARALLEL = 0x08
FL_WAITED = 0x10
FL_DDL = 0x20
FL_PREPARED_XA = 0x40
FL_COMPLETED_XA = 0x80
# Gtid_log_event::flags_extra (MariaDB 10.8+ / 11.5+)
FL_EXTRA_MULTI_ENGINE = 0x01
FL_START_ALTER = 0x02
FL_COMMIT_ALTER = 0x04
FL_ROLLBACK_ALTER = 0x08
FL_EXTRA_THREAD_ID = 0x10


@dataclass(frozen=True, slots=True)
class MariaXid:
    """The XA transaction id carried by an XA GTID event."""

    format_id: int
    gtrid: bytes
    bqual: bytes


@dataclass(frozen=True, slots=True)
class MariaGtidInfo:
    """What a MariaDB GTID_EVENT says about the event group that follows it."""

    #: The group's GTID (server_id taken from the event header).
    gtid: MariaGtid
    #: Raw flags2 byte (FL_STANDALONE=1, FL_GROUP_COMMIT_ID=2, FL_TRANSACTIONAL=4,
    #: FL_ALLOW_PARALLEL=8, FL_WAITED=16, FL_DDL=32, FL_PREPARED_XA=64, FL_COMPLETED_XA=128).
    flags: int
    #: No BEGIN ... COMMIT/XID follows: the group is one statement (e.g. DDL) ending itself.
    standalone: bool
    #: The group contains DDL.
    is_ddl: bool
    #: The group only touches transactional engines (can be rolled back).
    transactional: bool
    #: Group-commit id (groups with the same id committed together), if FL_GROUP_COMMIT_ID.
    commit_id: int | None = None
    #: XA id, if FL_PREPARED_XA (XA PREPARE) or FL_COMPLETED_XA with XA data.
    xid: MariaXid | None = None
    #: Raw flags_extra byte (0 when absent).
    flags_extra: int = 0
    #: Number of extra engines the transaction used (FL_EXTRA_MULTI_ENGINE).
    extra_engines: int | None = None
    #: seq_no of the START ALTER this COMMIT/ROLLBACK ALTER completes.
    sa_seq_no: int | None = None
    #: Id of the connection that ran the transaction (MariaDB 11.5+, FL_EXTRA_THREAD_ID).
    thread_id: int | None = None

    @property
    def prepared_xa(self) -> bool:
        return bool(self.flags & FL_PREPARED_XA)

    @property
    def completed_xa(self) -> bool:
        return bool(self.flags & FL_COMPLETED_XA)

    @property
    def allow_parallel(self) -> bool:
        return bool(self.flags & FL_ALLOW_PARALLEL)

    @property
    def waited(self) -> bool:
        return bool(self.flags & FL_WAITED)

    @property
    def start_alter(self) -> bool:
        return bool(self.flags_extra & FL_START_ALTER)

    @property
    def commit_alter(self) -> bool:
        return bool(self.flags_extra & FL_COMMIT_ALTER)

    @property
    def rollback_alter(self) -> bool:
        return bool(self.flags_extra & FL_ROLLBACK_ALTER)


def decode_maria_gtid_body(body: Buffer, server_id: int) -> MariaGtidInfo:
    """Decode a MariaDB GTID_EVENT (162) body; *server_id* comes from the event header.

    Layout (``Gtid_log_event::Gtid_log_event(const uchar*, ...)``): seq_no(8), domain_id(4),
    flags2(1); commit_id(8) if FL_GROUP_COMMIT_ID; if FL_PREPARED_XA|FL_COMPLETED_XA: format_id(4),
    gtrid_length(1), bqual_length(1), gtrid+bqual bytes; then, if bytes remain, flags_extra(1)
    followed by extra_engines(1) if FL_EXTRA_MULTI_ENGINE, sa_seq_no(8) if FL_COMMIT_ALTER or
    FL_ROLLBACK_ALTER, thread_id(8) if FL_EXTRA_THREAD_ID.  The writer zero-pads the body to 19
    bytes, so padding decodes as flags_extra 0; unknown trailing bytes are ignored.
    """
    end = len(body)
    if end < 13:
        raise TruncatedEventError(
            f"MariaDB GTID event body is {end} bytes; at least 13 (seq_no, domain_id, flags2) "
            f"are required")
    seq_no = _U64.unpack_from(body, 0)[0]
    domain_id = struct.unpack_from("<I", body, 8)[0]
    flags = body[12]
    pos = 13
    commit_id = None
    if flags & FL_GROUP_COMMIT_ID:
        if pos + 8 > end:
            raise TruncatedEventError("MariaDB GTID event: commit_id runs past the end of the body")
        commit_id = _U64.unpack_from(body, pos)[0]
        pos += 8
    xid = None
    if flags & (FL_PREPARED_XA | FL_COMPLETED_XA):
        if pos + 6 > end:
            raise TruncatedEventError("MariaDB GTID event: XID header runs past the end of the body")
        format_id = struct.unpack_from("<I", body, pos)[0]
        glen, blen = body[pos + 4], body[pos + 5]
        pos += 6
        if pos + glen + blen > end:
            raise TruncatedEventError("MariaDB GTID event: XID data runs past the end of the body")
        xid = MariaXid(format_id, bytes(body[pos:pos + glen]), bytes(body[pos + glen:pos + glen + blen]))
        pos += glen + blen
    flags_extra = 0
    extra_engines = sa_seq_no = thread_id = None
    if pos < end:
        flags_extra = body[pos]
        pos += 1
        if flags_extra & FL_EXTRA_MULTI_ENGINE:
            if pos + 1 > end:
                raise TruncatedEventError(
                    "MariaDB GTID event: extra_engines runs past the end of the body")
            extra_engines = body[pos]
            pos += 1
        if flags_extra & (FL_COMMIT_ALTER | FL_ROLLBACK_ALTER):
            if pos + 8 > end:
                raise TruncatedEventError(
                    "MariaDB GTID event: sa_seq_no runs past the end of the body")
            sa_seq_no = _U64.unpack_from(body, pos)[0]
            pos += 8
        if flags_extra & FL_EXTRA_THREAD_ID and pos + 8 <= end:
            thread_id = _U64.unpack_from(body, pos)[0]
            pos += 8
    return MariaGtidInfo(
        gtid=MariaGtid(domain_id, server_id, seq_no), flags=flags,
        standalone=bool(flags & FL_STANDALONE), is_ddl=bool(flags & FL_DDL),
        transactional=bool(flags & FL_TRANSACTIONAL), commit_id=commit_id, xid=xid,
        flags_extra=flags_extra, extra_engines=extra_engines, sa_seq_no=sa_seq_no,
        thread_id=thread_id)


def decode_maria_gtid_list_body(body: Buffer) -> list[MariaGtid]:
    """Decode a MariaDB GTID_LIST_EVENT (163) body: the last GTID of every (domain, server).

    Layout: count(4) -- low 28 bits the count, high 4 bits flags -- then count x
    (domain_id(4), server_id(4), seq_no(8)).
    """
    end = len(body)
    if end < 4:
        raise TruncatedEventError(f"MariaDB GTID_LIST body is {end} bytes; at least 4 are required")
    count = struct.unpack_from("<I", body, 0)[0] & ((1 << 28) - 1)
    if 4 + 16 * count > end:
        raise TruncatedEventError(
            f"MariaDB GTID_LIST lists {count} GTIDs ({16 * count} bytes) but only {end - 4} "
            f"bytes follow")
    out = []
    for pos in range(4, 4 + 16 * count, 16):
        d, s, q = struct.unpack_from("<IIQ", body, pos)
        out.append(MariaGtid(d, s, q))
    return out
