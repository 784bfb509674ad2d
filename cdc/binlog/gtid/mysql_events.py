"""Decoding the bodies of MySQL's GTID events: GTID_LOG_EVENT / ANONYMOUS_GTID_LOG_EVENT
(:func:`parse_mysql_gtid_body`, :func:`decode_mysql_gtid_body`), GTID_TAGGED_LOG_EVENT
(:func:`decode_mysql_gtid_tagged_body`, ``mysql::serialization`` format) and
PREVIOUS_GTIDS_LOG_EVENT (:func:`decode_previous_gtids_body`) -- into :class:`MysqlGtidInfo`.

A *body* is the event bytes after the 19-byte common header, with the 4-byte CRC32 checksum (if
any) already stripped; ``bytes``, ``bytearray`` or ``memoryview``.  Source:
``libs/mysql/binlog/event/control_events.{h,cpp}`` (``Gtid_event``),
``libs/mysql/serialization/`` (message format).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from cdc.errors import GtidError, TruncatedEventError
from cdc.binlog.wire import read_lenenc
from cdc.binlog.gtid.mysql import Gtid, GtidSet, decode_gtid_set
from cdc.binlog.gtid.parts import GNO_MAX, TAG_MAX_LENGTH, Buffer, norm_tag, uuid_from_bytes
from cdc.binlog.gtid.varlen import ShortData, read_varlen_signed, read_varlen_unsigned

_U64 = struct.Struct("<Q")
_Q2 = struct.Struct("<qq")


@dataclass(frozen=True, slots=True)
class MysqlGtidInfo:
    """What a MySQL GTID event says about the transaction that follows it.

    Fields that older servers do not write (5.6/5.7 events are shorter) are ``None``.
    """

    #: ``server_uuid`` of the server that originally committed the transaction (all zeros for
    #: anonymous transactions).
    uuid: str
    #: Transaction number within that uuid (0 for ANONYMOUS_GTID_LOG_EVENT).
    gno: int
    #: GTID tag (MySQL 8.4+ GTID_TAGGED_LOG_EVENT only), else ``None``.
    tag: str | None = None
    #: Raw GTID flags byte; bit 0 is FLAG_MAY_HAVE_SBR.
    flags: int = 0
    #: Whether part of the transaction may be logged in statement format (bit 0 of flags).
    may_have_sbr: bool = False
    #: Logical clock: sequence_number of the transaction this one depends on (commit parent).
    last_committed: int | None = None
    #: Logical clock: this transaction's logical timestamp (assigned at prepare).
    sequence_number: int | None = None
    #: Commit time on the server that wrote this binlog, microseconds since the epoch (8.0.1+).
    immediate_commit_ts_us: int | None = None
    #: Commit time on the originating server, microseconds since the epoch (= immediate when the
    #: transaction originated on the server that wrote this binlog).
    original_commit_ts_us: int | None = None
    #: Size in bytes of the whole transaction in the binlog, this GTID event included (8.0.2+).
    transaction_length: int | None = None
    #: Version (e.g. 80040 for 8.0.40) of the server that wrote this binlog (8.0.14+).
    immediate_server_version: int | None = None
    #: Version of the originating server (= immediate when the same).
    original_server_version: int | None = None
    #: Group Replication commit group ticket (8.0.27+, only when set).
    commit_group_ticket: int | None = None
    #: Whether this is an ANONYMOUS_GTID_LOG_EVENT (GTID mode off): no GTID.
    anonymous: bool = False
    #: The GTID as text: ``uuid:gno`` or ``uuid:tag:gno``; ``None`` for anonymous transactions.
    gtid: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if not self.anonymous:
            text = f"{self.uuid}:{self.tag}:{self.gno}" if self.tag else f"{self.uuid}:{self.gno}"
            object.__setattr__(self, "gtid", text)

    def to_gtid(self) -> Gtid | None:
        """The GTID as a :class:`Gtid` (``None`` for anonymous transactions)."""
        return None if self.anonymous else Gtid(self.uuid, self.gno, self.tag)


_LOGICAL_TIMESTAMP_TYPECODE = 2
_TS_FLAG = 1 << 55
_VERSION_FLAG = 1 << 31


def decode_mysql_gtid_body(body: Buffer, *, anonymous: bool | None = None) -> MysqlGtidInfo:
    """Decode a GTID_LOG_EVENT (33) or ANONYMOUS_GTID_LOG_EVENT (34) body (see
    :func:`parse_mysql_gtid_body` for the layout)."""
    return mysql_gtid_info(parse_mysql_gtid_body(body, anonymous=anonymous))


def mysql_gtid_info(parsed: tuple) -> MysqlGtidInfo:
    """The :class:`MysqlGtidInfo` of what :func:`parse_mysql_gtid_body` returned."""
    uuid, gno, flags, anonymous, kw = parsed
    return MysqlGtidInfo(uuid=uuid, gno=gno, flags=flags, may_have_sbr=bool(flags & 1),
                         anonymous=anonymous, **kw)


def mysql_gtid_text(parsed: tuple) -> str | None:
    """``uuid:gno`` of what :func:`parse_mysql_gtid_body` returned (None when anonymous), the
    same text as :attr:`MysqlGtidInfo.gtid`."""
    return None if parsed[3] else f"{parsed[0]}:{parsed[1]}"


_UUID_TEXT: dict[bytes, str] = {}


def parse_mysql_gtid_body(body: Buffer, *, anonymous: bool | None = None) -> tuple:
    """Check and read a GTID_LOG_EVENT (33) / ANONYMOUS_GTID_LOG_EVENT (34) body:
    ``(uuid, gno, flags, anonymous, {optional field: value})``, the arguments of
    :class:`MysqlGtidInfo` (building that frozen dataclass costs more than reading the bytes, so
    the parser builds it only when asked).

    Layout (``Gtid_event::Gtid_event(const char*, ...)``): flags(1), sid(16), gno(8, signed),
    then -- each only when bytes remain -- lt_type(1) which must be 2 for what follows to be
    read (5.7.4 and older wrote another code; the rest is then ignored), last_committed(8),
    sequence_number(8), immediate_commit_timestamp(7; bit 55 set -> original_commit_timestamp(7)
    follows), transaction_length (packed integer), immediate_server_version(4; bit 31 set ->
    original_server_version(4) follows), commit_group_ticket(8).

    *anonymous*: ``None`` infers it from ``gno == 0``; ``True``/``False`` (from the event type)
    also checks the GNO like MySQL does.
    """
    end = len(body)
    if end < 25:
        raise TruncatedEventError(
            f"GTID event body is {end} bytes; at least 25 (flags, sid, gno) are required")
    flags = body[0]
    sid = bytes(body[1:17])
    uuid = _UUID_TEXT.get(sid)
    if uuid is None:
        if len(_UUID_TEXT) > 4096:
            _UUID_TEXT.clear()
        uuid = _UUID_TEXT[sid] = uuid_from_bytes(sid)
    gno = struct.unpack_from("<q", body, 17)[0]
    if anonymous is None:
        anonymous = gno == 0
    if anonymous:
        if gno != 0:
            raise GtidError(f"anonymous GTID event carries GNO {gno}; expected 0")
    elif not 1 <= gno <= GNO_MAX:
        raise GtidError(f"GTID event for {uuid} carries invalid GNO {gno}")
    pos = 25
    kw: dict[str, int | None] = {}
    if pos < end and body[pos] == _LOGICAL_TIMESTAMP_TYPECODE:
        pos += 1
        if pos + 16 > end:
            raise TruncatedEventError("GTID event: logical clock (last_committed, "
                                      "sequence_number) runs past the end of the body")
        kw["last_committed"], kw["sequence_number"] = _Q2.unpack_from(body, pos)
        pos += 16
        if pos + 7 <= end:
            ts = int.from_bytes(body[pos:pos + 7], "little")
            pos += 7
            if ts & _TS_FLAG:
                ts &= ~_TS_FLAG
                if pos + 7 > end:
                    raise TruncatedEventError(
                        "GTID event: original_commit_timestamp runs past the end of the body")
                kw["original_commit_ts_us"] = int.from_bytes(body[pos:pos + 7], "little")
                pos += 7
            else:
                kw["original_commit_ts_us"] = ts
            kw["immediate_commit_ts_us"] = ts
            if pos < end:
                kw["transaction_length"], pos = read_lenenc(body[:end], pos)
            if pos + 4 <= end:
                ver = struct.unpack_from("<I", body, pos)[0]
                pos += 4
                if ver & _VERSION_FLAG:
                    ver &= ~_VERSION_FLAG
                    if pos + 4 > end:
                        raise TruncatedEventError(
                            "GTID event: original_server_version runs past the end of the body")
                    kw["original_server_version"] = struct.unpack_from("<I", body, pos)[0]
                    pos += 4
                else:
                    kw["original_server_version"] = ver
                kw["immediate_server_version"] = ver
                if pos + 8 <= end:
                    kw["commit_group_ticket"] = _U64.unpack_from(body, pos)[0]
                    pos += 8
    return uuid, gno, flags, anonymous, kw


# Gtid_event::define_fields() order; the field id is the position in this list.
_TAGGED_FIELDS: tuple[tuple[str, str], ...] = (
    ("flags", "u8"),
    ("uuid", "uuid"),
    ("gno", "i64"),
    ("tag", "tag"),
    ("last_committed", "i64"),
    ("sequence_number", "i64"),
    ("immediate_commit_ts_us", "u64"),
    ("original_commit_ts_us", "u64"),
    ("transaction_length", "u64"),
    ("immediate_server_version", "u32"),
    ("original_server_version", "u32"),
    ("commit_group_ticket", "u64"),
)
_SERIALIZATION_FORMAT_VERSION = 1
_U_MAX = {"u8": 0xFF, "u32": 0xFFFFFFFF, "u64": (1 << 64) - 1}


def decode_mysql_gtid_tagged_body(body: Buffer) -> MysqlGtidInfo:
    """Decode a GTID_TAGGED_LOG_EVENT (42, MySQL 8.4+) body.

    The body is one ``mysql::serialization`` message (``Gtid_event::read_gtid_tagged_log_event``):
    varlen format version (1), varlen total message size (counted from the version byte),
    varlen last non-ignorable field id, then ``(varlen field id, value)`` pairs in field-id
    order; fields may be absent.  Integers are variable-length (signed ones with the sign in
    bit 0), the uuid is 16 varlen-encoded bytes, the tag a varlen length plus its characters.
    Field ids follow ``Gtid_event::define_fields``: 0 gtid_flags, 1 uuid, 2 gno, 3 tag,
    4 last_committed, 5 sequence_number, 6 immediate_commit_timestamp,
    7 original_commit_timestamp (absent = immediate), 8 transaction_length,
    9 immediate_server_version, 10 original_server_version (absent = immediate),
    11 commit_group_ticket (absent = unset).  Unknown trailing fields are skipped.
    """
    n = len(body)
    try:
        version, pos = read_varlen_unsigned(body, 0, n)
        if version != _SERIALIZATION_FORMAT_VERSION:
            raise GtidError(
                f"GTID_TAGGED event: unsupported serialization format version {version} "
                f"(expected {_SERIALIZATION_FORMAT_VERSION})")
        size, pos = read_varlen_unsigned(body, pos, n)
        last_non_ignorable, pos = read_varlen_unsigned(body, pos, n)
    except ShortData as e:
        raise TruncatedEventError(f"GTID_TAGGED event header is truncated: {e}") from None
    if size > n:
        raise TruncatedEventError(
            f"GTID_TAGGED event says its message is {size} bytes but the body has {n}")
    if size < pos:
        raise GtidError(f"GTID_TAGGED event: message size {size} is smaller than its own header")
    # Fields are read while the position is before the message end; each read is bounded by the
    # body, not by that end: MySQL sizes the length prefix from the fields' size rather than the
    # total (get_size_serializable), so a message whose total crosses a varlen size boundary
    # (e.g. 126 bytes of fields -> total 129, written as if 128) claims one byte too few and its
    # last field ends just past the claimed end.  MySQL's reader tolerates that; so does this one.
    end = size
    if last_non_ignorable > len(_TAGGED_FIELDS):
        raise GtidError(
            f"GTID_TAGGED event has unknown non-ignorable field {last_non_ignorable - 1}; it was "
            f"written by a newer server than this decoder understands")
    values: dict[str, object] = {}
    try:
        for fid, (name, kind) in enumerate(_TAGGED_FIELDS):
            if pos >= end:
                break
            peek, after = read_varlen_unsigned(body, pos, n)
            if peek != fid:
                continue            # field absent: keep looking for the next known id
            pos = after
            if kind == "i64":
                values[name], pos = read_varlen_signed(body, pos, n)
            elif kind == "uuid":
                raw = bytearray(16)
                for i in range(16):
                    raw[i], pos = read_varlen_unsigned(body, pos, n, max_value=0xFF)
                values[name] = uuid_from_bytes(raw)
            elif kind == "tag":
                tlen, pos = read_varlen_unsigned(body, pos, n)
                if tlen > TAG_MAX_LENGTH:
                    raise GtidError(f"GTID_TAGGED event: tag is {tlen} bytes (max {TAG_MAX_LENGTH})")
                if pos + tlen > n:
                    raise ShortData("GTID_TAGGED event: tag runs past the end of the message")
                raw_tag = bytes(body[pos:pos + tlen])
                pos += tlen
                try:
                    values[name] = norm_tag(raw_tag.decode("ascii")) or None
                except (UnicodeDecodeError, GtidError):
                    raise GtidError(f"GTID_TAGGED event: invalid tag {raw_tag!r}") from None
            else:
                values[name], pos = read_varlen_unsigned(body, pos, n, max_value=_U_MAX[kind])
    except ShortData as e:
        raise TruncatedEventError(f"GTID_TAGGED event is truncated: {e}") from None
    if "uuid" not in values or "gno" not in values:
        raise GtidError("GTID_TAGGED event lacks its uuid or gno field")
    gno = values["gno"]
    if not isinstance(gno, int) or not 1 <= gno <= GNO_MAX:
        raise GtidError(f"GTID_TAGGED event for {values['uuid']} carries invalid GNO {gno}")
    if "immediate_commit_ts_us" in values and "original_commit_ts_us" not in values:
        values["original_commit_ts_us"] = values["immediate_commit_ts_us"]
    if "immediate_server_version" in values and "original_server_version" not in values:
        values["original_server_version"] = values["immediate_server_version"]
    flags = int(values.pop("flags", 0))  # type: ignore[arg-type]
    return MysqlGtidInfo(flags=flags, may_have_sbr=bool(flags & 1), **values)  # type: ignore[arg-type]


def decode_previous_gtids_body(body: Buffer) -> GtidSet:
    """Decode a PREVIOUS_GTIDS_LOG_EVENT (35) body: the GTID set of all earlier binlogs.

    Raises :class:`TruncatedEventError` if the body is shorter than its encoding says, and
    :class:`GtidError` if bytes are left over (MySQL rejects those too; usually the 4-byte
    checksum was not stripped).
    """
    s, end = decode_gtid_set(body, 0, truncated=TruncatedEventError)
    if end != len(body):
        raise GtidError(
            f"PREVIOUS_GTIDS body has {len(body) - end} bytes after its GTID set (was the "
            f"checksum stripped?)")
    return s
