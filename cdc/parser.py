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

from .constants import BINLOG_MAGIC, CHECKSUM_LEN, V4_HEADER_LEN, ChecksumAlg, EventType
from .errors import (BadMagicError, ChecksumError, ParseError, SchemaError, TruncatedEventError,
                     UnsupportedBinlogVersionError, CdcError)
from .events import (HEADER, REGISTRY, Context, Event, EventHeader, RotateEvent,
                     TransactionPayloadEvent, decode_raw, parse_fde_body)

MAX_EVENT_SIZE = 1 << 30  # max_allowed_packet's ceiling; larger sizes mean corruption
_HDR = HEADER.unpack_from
_crc32 = zlib.crc32


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
    """

    def __init__(self, *, stream: bool = False, file: str | None = None, position: int = 4,
                 verify_checksum: bool = True, checksum: ChecksumAlg | None = None,
                 expand_payloads: bool = True):
        self.stream = stream
        self.verify_checksum = verify_checksum
        self.expand_payloads = expand_payloads
        self.ctx = Context(checksum)
        self.ctx.file = file
        self._buf = bytearray()
        self._off = 0
        self._need_magic = not stream
        self._pos = 0 if not stream else None
        self._start_position = position
        self._first_event = True

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
        if self._off and self._off > len(self._buf) // 2:
            del self._buf[:self._off]
            self._off = 0
        self._buf += data

    def feed_event(self, data: bytes) -> list[Event]:
        """Stream framing: one whole event (a replication packet without its OK byte).

        Returns the decoded events (more than one for an expanded TRANSACTION_PAYLOAD). The
        event's size field must match the bytes given, so a corrupt size cannot stall the parser.
        """
        if len(data) < V4_HEADER_LEN:
            raise TruncatedEventError(f"replication packet of {len(data)} bytes is shorter than an "
                                      f"event header", file=self.ctx.file)
        size = int.from_bytes(data[9:13], "little")
        if size != len(data):
            raise TruncatedEventError(
                f"event says it is {size} bytes but the packet carries {len(data)}",
                file=self.ctx.file)
        return list(self._decode_all(bytes(data), None))

    def seek(self, position: int) -> None:
        """File framing: discard buffered bytes; the next byte fed is at *position*."""
        if self._need_magic:
            raise ParseError("seek() before the magic and format description were read")
        self._buf = bytearray()
        self._off = 0
        self._pos = position

    def close(self) -> None:
        """Declare the end of input; raises TruncatedEventError if a partial event is left."""
        left = len(self._buf) - self._off
        if left:
            raise TruncatedEventError(
                f"input ends inside an event: {left} bytes left over (the file is truncated or "
                f"still being written)", file=self.ctx.file, position=self._pos)

    # --- output -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    def events(self) -> Iterator[Event]:
        """Yield every complete event in the buffer."""
        buf = self._buf
        while True:
            if self._need_magic:
                if len(buf) - self._off < 4:
                    return
                magic = bytes(buf[self._off:self._off + 4])
                if magic != BINLOG_MAGIC:
                    raise BadMagicError(f"not a binlog file: starts with {magic.hex()} instead of "
                                        f"fe62696e", file=self.ctx.file, position=0)
                self._off += 4
                self._pos = 4
                self._need_magic = False
            avail = len(buf) - self._off
            if avail < V4_HEADER_LEN:
                return
            off = self._off
            size = int.from_bytes(buf[off + 9:off + 13], "little")
            if self._first_event and not self.stream:
                self._check_start_event(buf, off, size)
            if size < V4_HEADER_LEN or size > MAX_EVENT_SIZE:
                raise ParseError(f"event size {size} is impossible; the binlog is corrupt",
                                 file=self.ctx.file, position=self._pos)
            if avail < size:
                return
            raw = bytes(buf[off:off + size])
            self._off = off + size
            pos = self._pos
            if pos is not None:
                self._pos = pos + size
            yield from self._decode_all(raw, pos)

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

    def _decode_all(self, raw: bytes, pos: int | None) -> Iterator[Event]:
        ev = self._decode(raw, pos)
        yield ev
        if isinstance(ev, TransactionPayloadEvent) and self.expand_payloads:
            yield from self._expand(ev)
        elif isinstance(ev, RotateEvent) and self.stream and not ev.artificial:
            self.ctx.file = ev.next_file

    def _decode(self, raw: bytes, pos: int | None, *, inner: bool = False) -> Event:
        ctx = self.ctx
        header = EventHeader._make(_HDR(raw, 0))
        type_code = header.type_code
        try:
            if type_code == EventType.FORMAT_DESCRIPTION:
                ev = parse_fde_body(header, memoryview(raw)[V4_HEADER_LEN:])
                if ev.checksum_alg == ChecksumAlg.CRC32:
                    self._verify(raw, header, pos)
                ctx.fde = ev
                ctx.checksum = ev.checksum_alg
                ctx.tables.clear()
            else:
                has_crc = ctx.checksum == ChecksumAlg.CRC32 and not inner
                if inner and len(raw) > V4_HEADER_LEN + CHECKSUM_LEN:
                    # Inner events of a TRANSACTION_PAYLOAD are written without CRC32; accept one
                    # if present (a 2^-32 chance of mistaking data for a checksum).
                    has_crc = _crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little")
                if has_crc:
                    self._verify(raw, header, pos)
                    body = memoryview(raw)[V4_HEADER_LEN:-CHECKSUM_LEN]
                else:
                    body = memoryview(raw)[V4_HEADER_LEN:]
                decode = REGISTRY.get(type_code, decode_raw)
                ev = decode(header, body, ctx)
        except CdcError as e:
            if isinstance(e, ParseError) and e.position is None and e.file is None:
                raise _locate(e, ctx.file, pos) from None
            raise
        except (IndexError, ValueError, struct.error) as e:
            raise TruncatedEventError(
                f"event type {type_code} ({_name(type_code)}) is shorter than its layout or "
                f"malformed: {e}", file=ctx.file, position=pos) from None
        if isinstance(ev, RotateEvent) and ev.artificial:
            ctx.file = ev.next_file
        ev.file = ctx.file
        if self.stream and not inner:
            lp = header.log_pos
            ev.end_pos = lp or None
            ev.pos = (lp - header.event_size) if lp >= header.event_size else None
        else:
            ev.pos = pos
            ev.end_pos = None if pos is None else pos + header.event_size
        return ev

    def _verify(self, raw: bytes, header: EventHeader, pos: int | None) -> None:
        if not self.verify_checksum:
            return
        stored = int.from_bytes(raw[-4:], "little")
        if header.type_code == EventType.FORMAT_DESCRIPTION and header.flags & 1:
            # The server computes the FDE's CRC with LOG_EVENT_BINLOG_IN_USE_F clear and sets the
            # flag in place while the file is open.
            raw = raw[:17] + bytes((raw[17] & 0xFE,)) + raw[18:]
        actual = _crc32(raw[:-4])
        if stored != actual:
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


def _locate(e: ParseError, file, pos) -> ParseError:
    """Re-raise a location-less ParseError with the event's file and position attached."""
    msg = str(e)
    new = ParseError.__new__(type(e))
    Exception.__init__(new, msg + (f" (at file {file}, position {pos})" if file or pos is not None
                                   else ""))
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
