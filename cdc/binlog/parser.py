"""The sans-IO binlog parser: fed bytes, yields events. It does no I/O of its own.

Two framings, one decoder:

* **file** (default): the bytes of a binlog file from its start: ``\\xfebin`` magic, then events.
  Positions are byte offsets in the file.
* **stream** (``stream=True``): events as a replication connection delivers them (the client
  strips each packet's OK byte and feeds the rest, :meth:`BinlogParser.feed_event`). Positions
  come from the headers' ``log_pos``.

Bytes may arrive in any chunking; :meth:`BinlogParser.events` yields every complete event and
keeps the rest for the next :meth:`feed`. At the end of the input call :meth:`close`: leftover
bytes mean the input was truncated (:class:`~cdc.errors.TruncatedEventError`).

Every event's CRC32 is verified when the format description (or, on a stream, the negotiated
``checksum``) says events carry one; a mismatch raises :class:`~cdc.errors.ChecksumError`.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator

from cdc.binlog.constants import BINLOG_MAGIC, CHECKSUM_LEN, V4_HEADER_LEN, ChecksumAlg, EventType
from cdc.errors import (BadMagicError, CdcError, ChecksumError, ParseError, TruncatedEventError,
                     UnsupportedBinlogVersionError)
from cdc.binlog.events import (HEADER, REGISTRY, Context, Event, EventHeader, RotateEvent,
                     TransactionPayloadEvent, decode_raw, parse_fde_body)
from cdc.values.charsets import collation_for_charset

DEFAULT_CHARSET = "utf8mb4"
"""The character set of CHAR/VARCHAR/TEXT columns whose TABLE_MAP does not say (MySQL 5.x,
MariaDB's default ``binlog_row_metadata=NO_LOG``): a binlog alone cannot tell; BINARY,
VARBINARY and BLOB columns look the same and decode as text too (invalid UTF-8 bytes kept as
surrogate escapes, nothing lost).  :class:`BinlogParser`'s default, so of every file decoder."""

MAX_EVENT_SIZE = 1 << 30  # max_allowed_packet's ceiling; larger sizes mean corruption
_HDR = HEADER.unpack_from
_crc32 = zlib.crc32
_new_header = tuple.__new__
_REGISTRY_GET = REGISTRY.get
FORMAT_DESCRIPTION, ROTATE = EventType.FORMAT_DESCRIPTION.value, EventType.ROTATE.value
# Types with work after decoding (payload expansion, file switch): everything else takes the
# straight path in events().
_SPECIAL = frozenset({EventType.TRANSACTION_PAYLOAD.value, ROTATE})
_SLOW = _SPECIAL | {FORMAT_DESCRIPTION}   # decoded by _decode, not inline in events()
CRC32 = ChecksumAlg.CRC32
# CRC-32 of bytes followed by their own CRC-32 (little-endian): one pass checks an event.
CRC32_RESIDUE = 0x2144DF1C


class BinlogParser:
    """Incremental binlog decoder. See the module docstring.

    :param stream: stream framing (no magic, positions from headers) instead of file framing.
    :param file: the binlog file name, reported on events and in errors.
    :param position: file framing only: the offset of the first byte fed after the magic
        (use :meth:`seek` to skip within a file after the format description).
    :param verify_checksum: verify CRC32s (default). Turn off only to salvage a damaged file.
    :param checksum: stream framing: the checksum algorithm negotiated with the source, used
        for events before the first format description (the artificial ROTATE).
    :param expand_payloads: yield the events inside TRANSACTION_PAYLOAD after it (default).
    :param row_decoder: the row decoder of the rows events: ``"c"`` (compiled), ``"python"``,
        ``"auto"`` (compiled when built), or None (the process default, ``$BINLOG_CDC_DECODER``;
        see :mod:`cdc.rows.backend`).
    :param charset: the character set of text columns whose TABLE_MAP carries none
        (:data:`DEFAULT_CHARSET`, utf8mb4; ``"binary"``: keep their bytes; None: leave them
        without one, for a caller that completes table maps itself, as
        :class:`~cdc.replica.client.ReplicaClient` does from information_schema).
    """

    def __init__(self, *, stream: bool = False, file: str | None = None, position: int = 4,
                 verify_checksum: bool = True, checksum: ChecksumAlg | None = None,
                 expand_payloads: bool = True, row_decoder: str | None = None,
                 charset: str | None = DEFAULT_CHARSET):
        self.stream = stream
        self.verify_checksum = verify_checksum
        self.expand_payloads = expand_payloads
        self.ctx = Context(checksum, row_decoder,
                           None if charset is None else collation_for_charset(charset))
        self.ctx.file = file
        self._buf = b""           # bytes being decoded; events are memoryview slices of it
        self._off = 0
        self._chunks: list[bytes] = []   # fed, not yet joined onto _buf
        self._chunks_len = 0
        self._need = V4_HEADER_LEN  # bytes from _off the next event needs (a join before that is waste)
        self._need_magic = not stream
        self._pos = 0 if not stream else None
        self._start_position = position
        self._first_event = True
        #: The file a (non-artificial) ROTATE named last: where the binlog continues.
        self.rotated_to: str | None = None

    # --- input -------------------------------------------------------------------------------

    @property
    def file(self) -> str | None:
        return self.ctx.file

    @property
    def position(self) -> int | None:
        """File framing: offset of the next event to be decoded."""
        return self._pos

    @property
    def format_description(self):
        return self.ctx.fde

    def feed(self, data: bytes) -> None:
        """Add bytes (any chunking)."""
        if data:
            self._chunks.append(data if type(data) is bytes else bytes(data))
            self._chunks_len += len(data)

    def _join(self) -> None:
        """Move the fed chunks onto the unread rest of the buffer (one copy per byte)."""
        buf, off, chunks = self._buf, self._off, self._chunks
        if off >= len(buf) and len(chunks) == 1:
            self._buf = chunks[0]
        else:
            self._buf = b"".join([memoryview(buf)[off:], *chunks])
        self._off = 0
        self._chunks = []
        self._chunks_len = 0

    def feed_event(self, data: bytes) -> list[Event]:
        """Stream framing: one whole event (a replication packet without its OK byte).

        Returns the decoded events (more than one for an expanded TRANSACTION_PAYLOAD). The
        event's size field must match the bytes given, so a corrupt size cannot stall the parser.
        """
        if len(data) < V4_HEADER_LEN:
            raise TruncatedEventError(f"replication packet of {len(data)} bytes is shorter than an "
                                      f"event header", file=self.ctx.file)
        # events keep views of these bytes: a read-only view (of bytes) is kept as it is, other
        # buffers are copied (their owner may reuse them)
        raw = data if type(data) is memoryview and data.readonly else memoryview(
            data if type(data) is bytes else bytes(data))
        hdr = _HDR(raw, 0)
        if hdr[3] != len(raw):
            raise TruncatedEventError(
                f"event says it is {hdr[3]} bytes but the packet carries {len(raw)}",
                file=self.ctx.file)
        ev = self._decode(raw, None, hdr=hdr)
        if hdr[1] in _SPECIAL:
            return [ev, *self._after_special(ev)]
        return [ev]

    def seek(self, position: int) -> None:
        """File framing: discard buffered bytes; the next byte fed is at *position*."""
        if self._need_magic:
            raise ParseError("seek() before the magic and format description were read")
        self._buf = b""
        self._off = 0
        self._chunks = []
        self._chunks_len = 0
        self._need = V4_HEADER_LEN
        self._pos = position

    def close(self) -> None:
        """Declare the end of input; raises TruncatedEventError if a partial event is left."""
        left = len(self._buf) - self._off + self._chunks_len
        if left:
            raise TruncatedEventError(
                f"input ends inside an event: {left} bytes left over (the file is truncated or "
                f"still being written)", file=self.ctx.file, position=self._pos)

    # --- output -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    def events(self) -> Iterator[Event]:
        """Yield every complete event in the buffer."""
        if self._chunks and len(self._buf) - self._off + self._chunks_len >= self._need:
            self._join()
        if self._need_magic:
            buf, off = self._buf, self._off
            if len(buf) - off < 4:
                self._need = 4
                return
            magic = bytes(buf[off:off + 4])
            if magic != BINLOG_MAGIC:
                raise BadMagicError(f"not a binlog file: starts with {magic.hex()} instead of "
                                    f"fe62696e", file=self.ctx.file, position=0)
            self._off += 4
            self._pos = 4
            self._need_magic = False
        decode = self._decode
        verify = self.verify_checksum
        ctx = self.ctx
        check_start = self._first_event and not self.stream
        buf, off, pos = self._buf, self._off, self._pos
        mv = memoryview(buf)
        while True:
            avail = len(buf) - off
            if avail < V4_HEADER_LEN:
                size = V4_HEADER_LEN            # the header first
            else:
                hdr = _HDR(buf, off)
                size = hdr[3]
                if check_start:
                    self._check_start_event(buf, off, size)
                    check_start = False
                if size < V4_HEADER_LEN or size > MAX_EVENT_SIZE:
                    raise ParseError(f"event size {size} is impossible; the binlog is corrupt",
                                     file=ctx.file, position=pos)
            if avail < size:
                self._need = size
                if not self._chunks or avail + self._chunks_len < size:
                    return
                self._join()
                buf, off = self._buf, self._off
                mv = memoryview(buf)
                continue
            end = off + size
            type_code = hdr[1]
            if type_code in _SLOW or pos is None:
                ev = decode(mv[off:end], pos)
            else:
                # The straight path (file framing, every event but FDE/ROTATE/PAYLOAD): what
                # _decode does, inlined.
                if ctx.checksum == CRC32:
                    if verify and _crc32(mv[off:end]) != CRC32_RESIDUE:
                        self._verify(mv[off:end], EventHeader._make(hdr), pos)
                    body = mv[off + V4_HEADER_LEN:end - 4]
                else:
                    body = mv[off + V4_HEADER_LEN:end]
                try:
                    ev = _REGISTRY_GET(type_code, decode_raw)(_new_header(EventHeader, hdr), body,
                                                              ctx)
                except (CdcError, IndexError, ValueError, struct.error) as e:
                    raise _decode_error(e, type_code, ctx.file, pos) from None
                ev.file = ctx.file
                ev.pos = pos
                ev.end_pos = pos + size
            self._off = off = end
            if pos is not None:
                self._pos = pos = pos + size
            yield ev
            if type_code in _SPECIAL:
                yield from self._after_special(ev)
            if self._buf is not buf or self._off != off:   # seek()/join by the consumer
                buf, off, pos = self._buf, self._off, self._pos
                mv = memoryview(buf)

    # --- decoding ----------------------------------------------------------------------------

    def _check_start_event(self, buf, off: int, size: int) -> None:
        self._first_event = False
        type_code = buf[off + 4]
        if type_code == EventType.START_V3:
            version = "v1 (MySQL 3.23)" if size == 69 else "v3 (MySQL 4.0.2-4.1)"
            raise UnsupportedBinlogVersionError(
                f"binlog format {version}: START_EVENT_V3 of {size} bytes. Only v4 binlogs (MySQL "
                f"5.0+, MariaDB) are decoded; convert the file with a 5.x mysqlbinlog first",
                file=self.ctx.file, position=self._pos)
        if type_code != EventType.FORMAT_DESCRIPTION:
            raise UnsupportedBinlogVersionError(
                f"the first event has type {type_code}, not FORMAT_DESCRIPTION_EVENT (15): not a "
                f"v4 binlog, or not the start of a file", file=self.ctx.file, position=self._pos)

    def _after_special(self, ev: Event) -> Iterator[Event]:
        """What follows an event of a _SPECIAL type: a payload's inner events, the file switch
        of a real ROTATE on a stream."""
        if isinstance(ev, TransactionPayloadEvent) and self.expand_payloads:
            yield from self._expand(ev)
        elif isinstance(ev, RotateEvent) and not ev.artificial:
            self.rotated_to = ev.next_file
            if self.stream:
                self.ctx.file = ev.next_file

    def _decode(self, raw, pos: int | None, *, inner: bool = False, hdr=None) -> Event:
        """One whole event; *raw* is a memoryview (or bytes) of exactly its bytes (*hdr*: its
        header, unpacked already)."""
        ctx = self.ctx
        header = _new_header(EventHeader, hdr or _HDR(raw, 0))
        type_code = header[1]
        try:
            if type_code == FORMAT_DESCRIPTION:
                raw = bytes(raw)
                ev = parse_fde_body(header, memoryview(raw)[V4_HEADER_LEN:])
                if ev.checksum_alg == ChecksumAlg.CRC32:
                    self._verify(raw, header, pos)
                ctx.fde = ev
                ctx.checksum = ev.checksum_alg
                ctx.tables.clear()
            else:
                if inner:
                    # Inner events of a TRANSACTION_PAYLOAD are written without CRC32; accept one
                    # if present (a 2^-32 chance of mistaking data for a checksum).
                    has_crc = (len(raw) > V4_HEADER_LEN + CHECKSUM_LEN and
                               _crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little"))
                else:
                    has_crc = ctx.checksum == ChecksumAlg.CRC32
                if has_crc:
                    if self.verify_checksum and not inner and _crc32(raw) != CRC32_RESIDUE:
                        self._verify(raw, header, pos)
                    body = raw[V4_HEADER_LEN:-CHECKSUM_LEN]
                else:
                    body = raw[V4_HEADER_LEN:]
                if type(body) is not memoryview:
                    body = memoryview(body)
                ev = _REGISTRY_GET(type_code, decode_raw)(header, body, ctx)
        except (CdcError, IndexError, ValueError, struct.error) as e:
            if pos is None and self.stream and not inner:
                pos = _stream_pos(header)
            raise _decode_error(e, type_code, ctx.file, pos) from None
        if type_code == ROTATE and ev.artificial:
            ctx.file = ev.next_file
        ev.file = ctx.file
        if self.stream and not inner:
            lp = header[4]
            size = header[3]
            ev.end_pos = lp or None
            ev.pos = (lp - size) if lp >= size else None
        else:
            ev.pos = pos
            ev.end_pos = None if pos is None else pos + header[3]
        return ev

    def _verify(self, raw: bytes, header: EventHeader, pos: int | None) -> None:
        if not self.verify_checksum:
            return
        stored = int.from_bytes(raw[-4:], "little")
        if header.type_code == EventType.FORMAT_DESCRIPTION and header.flags & 1:
            raw = bytes(raw)
            # The server computes the FDE's CRC with LOG_EVENT_BINLOG_IN_USE_F clear and sets the
            # flag in place while the file is open.
            raw = raw[:17] + bytes((raw[17] & 0xFE,)) + raw[18:]
        actual = _crc32(raw[:-4])
        if stored != actual:
            if pos is None and self.stream:
                pos = _stream_pos(header)
            raise ChecksumError(expected=stored, actual=actual, event_type=header.type_code,
                                file=self.ctx.file, position=pos)

    def _expand(self, payload: TransactionPayloadEvent) -> Iterator[Event]:
        data = payload.uncompressed()
        off, end = 0, len(data)
        index = 0
        while off < end:
            if end - off < V4_HEADER_LEN:
                raise TruncatedEventError("TRANSACTION_PAYLOAD ends inside an event header",
                                          file=self.ctx.file, position=payload.pos)
            size = int.from_bytes(data[off + 9:off + 13], "little")
            if size < V4_HEADER_LEN or off + size > end:
                raise TruncatedEventError(
                    f"event {index} inside TRANSACTION_PAYLOAD has impossible size {size}",
                    file=self.ctx.file, position=payload.pos)
            ev = self._decode(data[off:off + size], payload.pos, inner=True)
            ev.pos, ev.end_pos = payload.pos, payload.end_pos
            off += size
            index += 1
            yield ev


def _name(type_code: int) -> str:
    try:
        return EventType(type_code).name
    except ValueError:
        return "unknown"


def _decode_error(e: Exception, type_code: int, file, pos) -> Exception:
    """What to raise for *e* out of an event decoder: our own errors located at the event,
    slicing/struct errors as TruncatedEventError."""
    if isinstance(e, CdcError):
        if isinstance(e, ParseError) and e.position is None and e.file is None:
            return _locate(e, file, pos)
        return e
    return TruncatedEventError(
        f"event type {type_code} ({_name(type_code)}) is shorter than its layout or "
        f"malformed: {e}", file=file, position=pos)


def _stream_pos(header) -> int | None:
    """Where an event starts on a stream (no file offsets there): its header's log_pos (the
    end) minus its size; None for an artificial event (log_pos 0)."""
    lp, size = header[4], header[3]
    return lp - size if lp >= size else None


def _locate(e: ParseError, file, pos) -> ParseError:
    """Re-raise a location-less ParseError with the event's file and position attached."""
    msg = str(e)
    new = ParseError.__new__(type(e))
    at = ", ".join(([f"file {file}"] if file else []) +
                   ([f"position {pos}"] if pos is not None else []))
    Exception.__init__(new, msg + (f" (at {at})" if at else ""))
    new.file, new.position = file, pos
    for k, v in vars(e).items():
        if k not in ("file", "position"):
            setattr(new, k, v)
    return new


def iter_events(data: bytes, **kw) -> Iterator[Event]:
    """Decode a whole binlog file's bytes (convenience for tests and small files)."""
    p = BinlogParser(**kw)
    p.feed(data)
    yield from p.events()
    p.close()
