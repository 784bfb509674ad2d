"""Global transaction identifiers: MySQL GTID sets (tags included) and MariaDB GTID positions.

MySQL
    * :class:`Gtid` -- one transaction, ``uuid:gno`` or (MySQL 8.4+) ``uuid:tag:gno``.
    * :class:`GtidSet` -- an immutable set of GTIDs with MySQL's text form (``uuid:1-5:7``,
      ``uuid:1-13:mytag:1-2``) and binary form (``Gtid_set::encode`` -- what PREVIOUS_GTIDS_LOG_EVENT
      holds and what COM_BINLOG_DUMP_GTID sends), plus set algebra.
    * Body decoders for GTID_LOG_EVENT / ANONYMOUS_GTID_LOG_EVENT (:func:`decode_mysql_gtid_body`),
      GTID_TAGGED_LOG_EVENT (:func:`decode_mysql_gtid_tagged_body`, ``mysql::serialization``
      format) and PREVIOUS_GTIDS_LOG_EVENT (:func:`decode_previous_gtids_body`).

MariaDB
    * :class:`MariaGtid` -- ``domain-server-seq``; :class:`MariaGtidPosition` -- at most one GTID
      per replication domain (what ``gtid_slave_pos`` / ``gtid_binlog_pos`` hold).
    * Body decoders for GTID_EVENT (:func:`decode_maria_gtid_body`) and GTID_LIST_EVENT
      (:func:`decode_maria_gtid_list_body`).

An event *body* is the event bytes after the 19-byte common header, with the 4-byte CRC32
checksum (if any) already stripped.  All decoders accept ``bytes``, ``bytearray`` or
``memoryview``.

Source references (MySQL 8.4/9.x): ``sql/rpl_gtid_set.cc`` (text parser ``add_gtid_text``,
``to_string``, ``encode``/``add_gtid_encoding``), ``libs/mysql/gtid/{tag,tsid}.cpp``,
``libs/mysql/serialization/`` (variable-length integers, message format),
``libs/mysql/binlog/event/control_events.{h,cpp}`` (``Gtid_event``).  MariaDB:
``sql/log_event.cc`` (``Gtid_log_event``, ``Gtid_list_log_event`` constructors).
"""

from __future__ import annotations

import re
import struct
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, NamedTuple, Union

from cdc.errors import GtidError, TruncatedEventError
from cdc.binlog.wire import read_lenenc

__all__ = [
    "GNO_MAX",
    "TAG_MAX_LENGTH",
    "Gtid",
    "GtidSet",
    "decode_gtid_set",
    "MysqlGtidInfo",
    "decode_mysql_gtid_body",
    "decode_mysql_gtid_tagged_body",
    "decode_previous_gtids_body",
    "MariaGtid",
    "MariaGtidPosition",
    "MariaXid",
    "MariaGtidInfo",
    "decode_maria_gtid_body",
    "decode_maria_gtid_list_body",
    "read_varlen_unsigned",
    "read_varlen_signed",
]

Buffer = Union[bytes, bytearray, memoryview]

# rpl_gno is int64 and GNO_END = INT64_MAX is one past the largest valid GNO.
GNO_END = (1 << 63) - 1
#: The largest valid GNO (transaction number) of a MySQL GTID.
GNO_MAX = GNO_END - 1
#: ``mysql::gtid::tag_max_length``.
TAG_MAX_LENGTH = 32

_U64 = struct.Struct("<Q")
_Q2 = struct.Struct("<qq")

_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
_TAG_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}\Z")
_INTERVAL_RE = re.compile(r"([0-9]+)(?:\s*-\s*([0-9]+))?\Z")


def _quote(text: str, limit: int = 200) -> str:
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)


# ----------------------------------------------------------------------------------------------
# UUIDs and tags
# ----------------------------------------------------------------------------------------------


def _norm_uuid(text: str, whole: str | None = None) -> str:
    """Validate a textual UUID (8-4-4-4-12 hex digits) and return it lowercased."""
    u = text.strip()
    if not _UUID_RE.match(u):
        where = f" in GTID text {_quote(whole)}" if whole is not None and whole != text else ""
        raise GtidError(
            f"malformed server UUID {_quote(text)}{where}: expected 36 characters like "
            f"'3e11fa47-71ca-11e1-9e33-c80aa9429562'")
    return u.lower()


def _norm_tag(tag: str | None, whole: str | None = None) -> str:
    """Validate a GTID tag and return it lowercased ('' for no tag)."""
    if tag is None or tag == "":
        return ""
    t = tag.strip()
    if not _TAG_RE.match(t):
        where = f" in GTID text {_quote(whole)}" if whole is not None else ""
        raise GtidError(
            f"malformed GTID tag {_quote(tag)}{where}: a tag is 1-{TAG_MAX_LENGTH} characters "
            f"[a-z_][a-z0-9_]* (case-insensitive)")
    return t.lower()


def _uuid_to_bytes(uuid: str) -> bytes:
    return bytes.fromhex(uuid.replace("-", ""))


def _uuid_from_bytes(raw: Buffer) -> str:
    h = bytes(raw).hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


# ----------------------------------------------------------------------------------------------
# mysql::serialization variable-length integers
# ----------------------------------------------------------------------------------------------


class _ShortData(GtidError):
    """Internal: bytes ended in the middle of a value (callers may re-raise as truncation)."""


def read_varlen_unsigned(buf: Buffer, pos: int = 0, end: int | None = None,
                         *, max_value: int = (1 << 64) - 1) -> tuple[int, int]:
    """Read a ``mysql::serialization`` variable-length unsigned integer.

    The number of trailing one bits of the first byte, plus one, is the total byte count
    (1..9).  The first byte's remaining high bits hold the lowest bits of the value; the
    following bytes (little-endian) hold the rest, shifted left by ``8 - n`` (by 0 when n == 9).
    Mirrors ``read_varlen_bytes_unsigned`` in ``libs/mysql/serialization/variable_length_integers.h``.

    Returns ``(value, new_pos)``; raises :class:`GtidError` when the bytes end early or the value
    exceeds *max_value* (the C++ target type's maximum).
    """
    if end is None:
        end = len(buf)
    if pos >= end:
        raise _ShortData("variable-length integer runs past the end of the data")
    first = buf[pos]
    n = 1
    b = first
    while b & 1 and n < 9:
        n += 1
        b >>= 1
    if pos + n > end:
        raise _ShortData(
            f"variable-length integer needs {n} bytes but only {end - pos} remain")
    value = first >> n
    if n > 1:
        rest = int.from_bytes(buf[pos + 1:pos + n], "little")
        value |= rest << (0 if n == 9 else 8 - n)
    if value > max_value:
        raise GtidError(f"variable-length integer {value} exceeds its field's maximum {max_value}")
    return value, pos + n


def read_varlen_signed(buf: Buffer, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Read a ``mysql::serialization`` variable-length signed (int64) integer.

    The unsigned value's least significant bit is the sign; the rest is ``x`` for ``x >= 0``
    and ``-(x + 1)`` for negatives (``read_varlen_bytes_signed``).
    """
    raw, pos = read_varlen_unsigned(buf, pos, end)
    mag = raw >> 1
    return (~mag if raw & 1 else mag), pos


def _write_varlen_unsigned(value: int) -> bytes:
    """Encode like ``write_varlen_bytes_unsigned`` (used here only for tag lengths)."""
    if value < 0 or value >= 1 << 64:
        raise GtidError(f"cannot encode {value} as an unsigned 64-bit integer")
    n = ((value.bit_length() * 575) >> 12) + 1
    first = ((1 << (n - 1)) - 1) | ((value << n) & 0xFF)
    if n == 1:
        return bytes((first,))
    rest = value >> (0 if n == 9 else 8 - n)
    return bytes((first,)) + (rest & ((1 << (8 * (n - 1))) - 1)).to_bytes(n - 1, "little")


# ----------------------------------------------------------------------------------------------
# MySQL: Gtid
# ----------------------------------------------------------------------------------------------


class Gtid(NamedTuple):
    """One MySQL transaction id: ``uuid:gno`` or, with a tag (MySQL 8.4+), ``uuid:tag:gno``.

    ``uuid`` is the originating server's ``server_uuid`` (lowercase text), ``gno`` the
    transaction number (1 .. 2**63-2), ``tag`` the optional lowercase tag (``None`` = untagged).
    """

    uuid: str
    gno: int
    tag: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Gtid":
        """Parse ``uuid:gno`` or ``uuid:tag:gno`` (uuid and tag are normalised to lowercase)."""
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise GtidError(
                f"malformed GTID {_quote(text)}: expected 'uuid:number' or 'uuid:tag:number'")
        uuid = _norm_uuid(parts[0], text)
        tag = _norm_tag(parts[1], text) if len(parts) == 3 else ""
        gno = _parse_gno(parts[-1], text)
        return cls(uuid, gno, tag or None)

    def __str__(self) -> str:
        if self.tag:
            return f"{self.uuid}:{self.tag}:{self.gno}"
        return f"{self.uuid}:{self.gno}"

    def normalized(self) -> "Gtid":
        """This GTID validated, with uuid and tag lowercased (``''`` tag becomes ``None``)."""
        uuid = _norm_uuid(self.uuid)
        tag = _norm_tag(self.tag)
        gno = self.gno
        if not isinstance(gno, int) or not 1 <= gno <= GNO_MAX:
            raise GtidError(f"GTID number {gno!r} of {uuid} is out of range 1..{GNO_MAX}")
        return Gtid(uuid, gno, tag or None)


def _parse_gno(text: str, whole: str) -> int:
    t = text.strip()
    if not t.isdigit() or not t.isascii():
        raise GtidError(f"malformed transaction number {_quote(text)} in GTID text {_quote(whole)}")
    gno = int(t)
    if not 1 <= gno <= GNO_MAX:
        raise GtidError(
            f"transaction number {t} in GTID text {_quote(whole)} is out of range 1..{GNO_MAX}")
    return gno


# ----------------------------------------------------------------------------------------------
# MySQL: GtidSet
# ----------------------------------------------------------------------------------------------

_Key = tuple[str, str]                    # (lowercase uuid, lowercase tag or '')
_Ivs = tuple[tuple[int, int], ...]        # sorted, disjoint, non-adjacent [start, end) intervals


def _merge(intervals: Iterable[tuple[int, int]]) -> _Ivs:
    """Sort and coalesce half-open intervals (touching ones merge: [1,4)+[4,6) = [1,6))."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return tuple((s, e) for s, e in out)


def _union_ivs(a: _Ivs, b: _Ivs) -> _Ivs:
    if not a:
        return b
    if not b:
        return a
    return _merge(a + b)


def _subtract_ivs(a: _Ivs, b: _Ivs) -> _Ivs:
    out: list[tuple[int, int]] = []
    j = 0
    nb = len(b)
    for s, e in a:
        while j < nb and b[j][1] <= s:
            j += 1
        k = j
        while k < nb and b[k][0] < e:
            bs, be = b[k]
            if bs > s:
                out.append((s, bs))
            s = max(s, be)
            if s >= e:
                break
            k += 1
        if s < e:
            out.append((s, e))
    return tuple(out)


def _intersect_ivs(a: _Ivs, b: _Ivs) -> _Ivs:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _ivs_contains(ivs: _Ivs, gno: int) -> bool:
    i = bisect_right(ivs, (gno, GNO_END + 1)) - 1
    return i >= 0 and ivs[i][0] <= gno < ivs[i][1]


def _ivs_subset(a: _Ivs, b: _Ivs) -> bool:
    j = 0
    for s, e in a:
        while j < len(b) and b[j][1] < e:
            j += 1
        if j == len(b) or b[j][0] > s or b[j][1] < e:
            return False
    return True


class GtidSet:
    """An immutable MySQL GTID set (``gtid_executed``, ``gtid_purged``, PREVIOUS_GTIDS ...).

    Internally a mapping ``(uuid, tag) -> sorted disjoint intervals``; every operation returns a
    new set.  ``str()`` is MySQL's canonical text (uuids sorted, untagged intervals first, then
    tags in sorted order, intervals coalesced, uuids joined by ``','``), so two equal sets always
    print the same -- safe to store as a streaming offset.  (MySQL's own ``to_string`` separates
    uuids with ``",\n"``; :meth:`parse` accepts both.)

    Build one with :meth:`parse`, :meth:`from_bytes`/:func:`decode_gtid_set`, :meth:`from_gtids`
    or ``GtidSet()`` (empty).
    """

    __slots__ = ("_map", "_text", "_hash")

    def __init__(self, intervals: Mapping[tuple[str, str | None], Iterable[tuple[int, int]]] | None = None):
        """Build from ``{(uuid, tag or None): [(first, last), ...]}`` with *inclusive* ranges.

        Ranges are validated, uuids/tags normalised, and intervals coalesced.
        """
        self._map: dict[_Key, _Ivs] = {}
        self._text: str | None = None
        self._hash: int | None = None
        if intervals:
            acc: dict[_Key, list[tuple[int, int]]] = {}
            for (uuid, tag), ranges in intervals.items():
                key = (_norm_uuid(uuid), _norm_tag(tag))
                lst = acc.setdefault(key, [])
                for first, last in ranges:
                    if not (isinstance(first, int) and isinstance(last, int)
                            and 1 <= first <= last <= GNO_MAX):
                        raise GtidError(
                            f"bad GTID range {first!r}-{last!r} for {key[0]}: need "
                            f"1 <= first <= last <= {GNO_MAX}")
                    lst.append((first, last + 1))
            self._map = {k: _merge(v) for k, v in sorted(acc.items()) if v}

    @classmethod
    def _from_map(cls, m: dict[_Key, _Ivs]) -> "GtidSet":
        obj = cls.__new__(cls)
        obj._map = {k: m[k] for k in sorted(m) if m[k]}
        obj._text = None
        obj._hash = None
        return obj

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> "GtidSet":
        """Parse MySQL's GTID set text.

        Accepts ``uuid:1-5:7``, ``uuid:1-13:mytag:1-2`` (a tag applies to the intervals after it
        until the next tag), several comma-separated uuids (whitespace and newlines allowed
        around every element, empty elements between commas ignored), and ``''`` for the empty
        set.  Uuids and tags are normalised to lowercase.  As in MySQL, a bare ``uuid`` or
        ``uuid:tag`` with no intervals adds nothing.  Unlike MySQL (which silently drops it), a
        reversed range such as ``5-3`` is an error.
        """
        if not isinstance(text, str):
            raise GtidError(f"GTID set text must be a str, not {type(text).__name__}")
        acc: dict[_Key, list[tuple[int, int]]] = {}
        for item in text.split(","):
            if not item.strip():
                continue
            parts = item.split(":")
            uuid = _norm_uuid(parts[0], text)
            tag = ""
            for raw in parts[1:]:
                p = raw.strip()
                if not p:
                    raise GtidError(
                        f"malformed GTID set {_quote(text)}: empty element after ':' in "
                        f"{_quote(item.strip())}")
                if p[0].isdigit():
                    m = _INTERVAL_RE.match(p)
                    if not m:
                        raise GtidError(
                            f"malformed GTID set {_quote(text)}: bad interval {_quote(p)} "
                            f"(expected N or N-M)")
                    first = int(m.group(1))
                    last = int(m.group(2)) if m.group(2) is not None else first
                    if first < 1:
                        raise GtidError(
                            f"malformed GTID set {_quote(text)}: interval {_quote(p)} starts at "
                            f"0; transaction numbers start at 1")
                    if last < first:
                        raise GtidError(
                            f"malformed GTID set {_quote(text)}: interval {_quote(p)} ends "
                            f"before it starts")
                    if last > GNO_MAX:
                        raise GtidError(
                            f"malformed GTID set {_quote(text)}: interval {_quote(p)} exceeds "
                            f"the largest transaction number {GNO_MAX}")
                    acc.setdefault((uuid, tag), []).append((first, last + 1))
                elif _TAG_RE.match(p):
                    tag = p.lower()
                else:
                    raise GtidError(
                        f"malformed GTID set {_quote(text)}: {_quote(p)} is neither an interval "
                        f"(N or N-M) nor a tag ([a-z_][a-z0-9_]{{0,31}})")
        return cls._from_map({k: _merge(v) for k, v in acc.items()})

    @classmethod
    def from_gtids(cls, gtids: Iterable[Gtid | str]) -> "GtidSet":
        """The set of the given GTIDs (``Gtid`` objects or ``uuid[:tag]:gno`` strings)."""
        acc: dict[_Key, list[tuple[int, int]]] = {}
        for g in gtids:
            g = _as_gtid(g)
            acc.setdefault((g.uuid, g.tag or ""), []).append((g.gno, g.gno + 1))
        return cls._from_map({k: _merge(v) for k, v in acc.items()})

    @classmethod
    def from_bytes(cls, data: Buffer, pos: int = 0) -> tuple["GtidSet", int]:
        """Decode ``Gtid_set::encode`` bytes (either format) at *pos*; return ``(set, consumed)``."""
        s, end = decode_gtid_set(data, pos)
        return s, end - pos

    # -- encoding -------------------------------------------------------------------------

    def to_bytes(self, tagged: bool | None = None) -> bytes:
        """MySQL's binary encoding, byte-identical to ``Gtid_set::encode``.

        ``tagged=None`` picks the untagged (pre-8.4) format when the set has no tags and the
        tagged format otherwise (as ``Gtid_set::analyze_encoding_format`` does); ``False``
        forces the untagged format (:class:`GtidError` if the set has tags); ``True`` forces the
        tagged format.  TSIDs are written in ``(uuid bytes, tag)`` order, which is the order of
        ``Tsid_map::get_sorted_sidno`` that ``encode`` iterates.
        """
        has_tags = self.has_tags
        if tagged is None:
            tagged = has_tags
        elif not tagged and has_tags:
            raise GtidError(
                f"GTID set has tagged GTIDs ({', '.join(sorted({t for _, t in self._map if t}))}); "
                f"the untagged encoding (servers before MySQL 8.4) cannot represent them")
        n = len(self._map)
        out = bytearray()
        if tagged:
            out += _U64.pack((1 << 56) | (n << 8) | 1)
        else:
            out += _U64.pack(n)
        for (uuid, tag), ivs in self._map.items():
            out += _uuid_to_bytes(uuid)
            if tagged:
                raw = tag.encode("ascii")
                out += _write_varlen_unsigned(len(raw))
                out += raw
            out += _U64.pack(len(ivs))
            for s, e in ivs:
                out += _Q2.pack(s, e)
        return bytes(out)

    # -- text -----------------------------------------------------------------------------

    def __str__(self) -> str:
        if self._text is None:
            chunks: list[str] = []
            prev_uuid = None
            for (uuid, tag), ivs in self._map.items():
                if uuid != prev_uuid:
                    if prev_uuid is not None:
                        chunks.append(",")
                    chunks.append(uuid)
                    prev_uuid = uuid
                if tag:
                    chunks.append(":" + tag)
                for s, e in ivs:
                    chunks.append(f":{s}" if e == s + 1 else f":{s}-{e - 1}")
            self._text = "".join(chunks)
        return self._text

    def __repr__(self) -> str:
        return f"GtidSet({str(self)!r})"

    # -- inspection -----------------------------------------------------------------------

    def __bool__(self) -> bool:
        return bool(self._map)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GtidSet):
            return self._map == other._map
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._map.items()))
        return self._hash

    @property
    def has_tags(self) -> bool:
        """Whether any GTID of the set carries a tag."""
        return any(tag for _, tag in self._map)

    def uuids(self) -> list[str]:
        """The distinct server uuids of the set, sorted."""
        return sorted({u for u, _ in self._map})

    def items(self) -> Iterator[tuple[str, str | None, tuple[tuple[int, int], ...]]]:
        """Yield ``(uuid, tag or None, ((first, last), ...))`` in canonical order (inclusive ranges)."""
        for (uuid, tag), ivs in self._map.items():
            yield uuid, tag or None, tuple((s, e - 1) for s, e in ivs)

    def intervals(self, uuid: str, tag: str | None = None) -> tuple[tuple[int, int], ...]:
        """The inclusive ``(first, last)`` ranges of one uuid/tag (empty if absent)."""
        ivs = self._map.get((_norm_uuid(uuid), _norm_tag(tag)), ())
        return tuple((s, e - 1) for s, e in ivs)

    def last_gno(self, uuid: str, tag: str | None = None) -> int:
        """The largest transaction number of *uuid*/*tag* in the set, 0 if none."""
        ivs = self._map.get((_norm_uuid(uuid), _norm_tag(tag)), ())
        return ivs[-1][1] - 1 if ivs else 0

    def count(self) -> int:
        """The number of transactions (GTIDs) in the set."""
        return sum(e - s for ivs in self._map.values() for s, e in ivs)

    def __contains__(self, gtid: object) -> bool:
        if isinstance(gtid, str):
            gtid = Gtid.parse(gtid)
        if not isinstance(gtid, tuple) or len(gtid) not in (2, 3):
            return False
        g = Gtid(*gtid)
        ivs = self._map.get((g.uuid.lower(), (g.tag or "").lower()))
        return bool(ivs) and isinstance(g.gno, int) and _ivs_contains(ivs, g.gno)

    # -- algebra --------------------------------------------------------------------------

    def add(self, gtid: Gtid | str) -> "GtidSet":
        """A new set with *gtid* added (``self`` if it is already present)."""
        g = _as_gtid(gtid)
        key = (g.uuid, g.tag or "")
        ivs = self._map.get(key, ())
        if ivs and _ivs_contains(ivs, g.gno):
            return self
        m = dict(self._map)
        m[key] = _union_ivs(ivs, ((g.gno, g.gno + 1),))
        if not ivs:
            return GtidSet._from_map(m)             # new (uuid, tag): re-sort the keys
        obj = GtidSet.__new__(GtidSet)              # same keys, same order: skip the sort
        obj._map, obj._text, obj._hash = m, None, None
        return obj

    def union(self, *others: "GtidSet | str") -> "GtidSet":
        """All GTIDs in this set or any of *others*."""
        m = dict(self._map)
        for o in others:
            for k, ivs in _as_set(o)._map.items():
                m[k] = _union_ivs(m.get(k, ()), ivs)
        return GtidSet._from_map(m)

    def subtract(self, *others: "GtidSet | str") -> "GtidSet":
        """GTIDs in this set but in none of *others*."""
        m = dict(self._map)
        for o in others:
            for k, ivs in _as_set(o)._map.items():
                if k in m:
                    m[k] = _subtract_ivs(m[k], ivs)
        return GtidSet._from_map(m)

    difference = subtract

    def intersection(self, *others: "GtidSet | str") -> "GtidSet":
        """GTIDs present in this set and in every one of *others*."""
        m = dict(self._map)
        for o in others:
            om = _as_set(o)._map
            m = {k: _intersect_ivs(ivs, om[k]) for k, ivs in m.items() if k in om}
        return GtidSet._from_map(m)

    def issubset(self, other: "GtidSet | str") -> bool:
        """Whether every GTID of this set is in *other*."""
        om = _as_set(other)._map
        return all(k in om and _ivs_subset(ivs, om[k]) for k, ivs in self._map.items())

    def issuperset(self, other: "GtidSet | str") -> bool:
        """Whether every GTID of *other* is in this set."""
        return _as_set(other).issubset(self)

    def isdisjoint(self, other: "GtidSet | str") -> bool:
        """Whether the two sets have no GTID in common."""
        return not self.intersection(other)

    def __or__(self, other: "GtidSet") -> "GtidSet":
        return self.union(other) if isinstance(other, GtidSet) else NotImplemented

    def __sub__(self, other: "GtidSet") -> "GtidSet":
        return self.subtract(other) if isinstance(other, GtidSet) else NotImplemented

    def __and__(self, other: "GtidSet") -> "GtidSet":
        return self.intersection(other) if isinstance(other, GtidSet) else NotImplemented

    def __le__(self, other: "GtidSet") -> bool:
        return self.issubset(other) if isinstance(other, GtidSet) else NotImplemented

    def __ge__(self, other: "GtidSet") -> bool:
        return self.issuperset(other) if isinstance(other, GtidSet) else NotImplemented

    def __lt__(self, other: "GtidSet") -> bool:
        return (self != other and self.issubset(other)) if isinstance(other, GtidSet) else NotImplemented

    def __gt__(self, other: "GtidSet") -> bool:
        return (self != other and self.issuperset(other)) if isinstance(other, GtidSet) else NotImplemented


def _as_gtid(g: Gtid | str | tuple) -> Gtid:
    if isinstance(g, str):
        return Gtid.parse(g)
    if isinstance(g, tuple):
        return Gtid(*g).normalized()
    raise GtidError(f"expected a Gtid or 'uuid[:tag]:gno' text, not {type(g).__name__}")


def _as_set(s: GtidSet | str) -> GtidSet:
    if isinstance(s, GtidSet):
        return s
    if isinstance(s, str):
        return GtidSet.parse(s)
    raise GtidError(f"expected a GtidSet or GTID set text, not {type(s).__name__}")


def decode_gtid_set(buf: Buffer, pos: int = 0) -> tuple[GtidSet, int]:
    """Decode ``Gtid_set::encode`` bytes at *pos*; return ``(set, new_pos)``.

    Handles both formats (``Gtid_set::add_gtid_encoding``): the untagged one (8-byte n_sids,
    then per SID: 16-byte uuid, 8-byte n_intervals, intervals as 8-byte start and exclusive
    end) and the tagged one (first 8 bytes ``0x01, n_tsids in 6 bytes, 0x01``; each TSID also
    carries a varlen-length-prefixed tag after the uuid).  Raises :class:`GtidError` on
    truncated or malformed bytes.
    """
    return _decode_gtid_set(buf, pos, GtidError)


def _decode_gtid_set(buf: Buffer, pos: int, short_exc: type[Exception]) -> tuple[GtidSet, int]:
    end = len(buf)

    def need(n: int, what: str) -> None:
        if pos + n > end:
            raise short_exc(
                f"GTID set encoding is truncated: {what} needs {n} bytes at offset {pos}, "
                f"only {end - pos} remain")

    need(8, "the SID count")
    word = _U64.unpack_from(buf, pos)[0]
    pos += 8
    fmt = word >> 56
    if fmt == 0:
        tagged = False
        n_sids = word & ((1 << 56) - 1)
    elif fmt == 1:
        tagged = True
        n_sids = (word >> 8) & ((1 << 48) - 1)
    else:
        raise GtidError(f"unknown GTID set encoding format {fmt} (first 8 bytes 0x{word:016x})")
    acc: dict[_Key, list[tuple[int, int]]] = {}
    for i in range(n_sids):
        need(16, f"the uuid of SID #{i}")
        uuid = _uuid_from_bytes(buf[pos:pos + 16])
        pos += 16
        tag = ""
        if tagged:
            try:
                tlen, pos = read_varlen_unsigned(buf, pos, end)
            except _ShortData as e:
                raise short_exc(f"GTID set encoding: tag length of SID #{i}: {e}") from None
            if tlen > TAG_MAX_LENGTH:
                raise GtidError(f"GTID set encoding: tag of SID #{i} is {tlen} bytes long "
                                f"(max {TAG_MAX_LENGTH})")
            need(tlen, f"the tag of SID #{i}")
            raw = bytes(buf[pos:pos + tlen])
            pos += tlen
            if tlen:
                try:
                    tag = _norm_tag(raw.decode("ascii"))
                except (UnicodeDecodeError, GtidError):
                    raise GtidError(f"GTID set encoding: invalid tag {raw!r} for {uuid}") from None
        need(8, f"the interval count of {uuid}")
        n_iv = _U64.unpack_from(buf, pos)[0]
        pos += 8
        need(16 * n_iv, f"the {n_iv} intervals of {uuid}")
        lst = acc.setdefault((uuid, tag), [])
        last = 0
        for _ in range(n_iv):
            s, e = _Q2.unpack_from(buf, pos)
            pos += 16
            if s <= last or e <= s:
                raise GtidError(
                    f"GTID set encoding: bad interval [{s}, {e}) for {uuid} (intervals must be "
                    f"increasing, non-empty and start at 1 or later)")
            last = e
            lst.append((s, e))
    return GtidSet._from_map({k: _merge(v) for k, v in acc.items()}), pos


def decode_previous_gtids_body(body: Buffer) -> GtidSet:
    """Decode a PREVIOUS_GTIDS_LOG_EVENT (35) body: the GTID set of all earlier binlogs.

    Raises :class:`TruncatedEventError` if the body is shorter than its encoding says, and
    :class:`GtidError` if bytes are left over (MySQL rejects those too; usually the 4-byte
    checksum was not stripped).
    """
    s, end = _decode_gtid_set(body, 0, TruncatedEventError)
    if end != len(body):
        raise GtidError(
            f"PREVIOUS_GTIDS body has {len(body) - end} bytes after its GTID set (was the "
            f"checksum stripped?)")
    return s


# ----------------------------------------------------------------------------------------------
# MySQL: GTID_LOG_EVENT / ANONYMOUS_GTID_LOG_EVENT / GTID_TAGGED_LOG_EVENT
# ----------------------------------------------------------------------------------------------


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
        uuid = _UUID_TEXT[sid] = _uuid_from_bytes(sid)
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
    except _ShortData as e:
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
                values[name] = _uuid_from_bytes(raw)
            elif kind == "tag":
                tlen, pos = read_varlen_unsigned(body, pos, n)
                if tlen > TAG_MAX_LENGTH:
                    raise GtidError(f"GTID_TAGGED event: tag is {tlen} bytes (max {TAG_MAX_LENGTH})")
                if pos + tlen > n:
                    raise _ShortData("GTID_TAGGED event: tag runs past the end of the message")
                raw_tag = bytes(body[pos:pos + tlen])
                pos += tlen
                try:
                    values[name] = _norm_tag(raw_tag.decode("ascii")) or None
                except (UnicodeDecodeError, GtidError):
                    raise GtidError(f"GTID_TAGGED event: invalid tag {raw_tag!r}") from None
            else:
                values[name], pos = read_varlen_unsigned(body, pos, n, max_value=_U_MAX[kind])
    except _ShortData as e:
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


# ----------------------------------------------------------------------------------------------
# MariaDB
# ----------------------------------------------------------------------------------------------

_MARIA_GTID_RE = re.compile(r"\s*([0-9]+)-([0-9]+)-([0-9]+)\s*\Z")


class MariaGtid(NamedTuple):
    """A MariaDB GTID ``domain_id-server_id-seq_no`` (e.g. ``0-1-42``)."""

    #: Replication domain (uint32): independent streams of transactions.
    domain_id: int
    #: server_id of the server that originally wrote the transaction (uint32).
    server_id: int
    #: Sequence number within the domain (uint64).
    seq_no: int

    @classmethod
    def parse(cls, text: str) -> "MariaGtid":
        """Parse ``domain-server-seq`` (three unsigned decimal numbers)."""
        m = _MARIA_GTID_RE.match(text) if isinstance(text, str) else None
        if not m:
            raise GtidError(
                f"malformed MariaDB GTID {_quote(str(text))}: expected 'domain-server-seq' such "
                f"as '0-1-42'")
        d, s, q = (int(x) for x in m.groups())
        if d >= 1 << 32 or s >= 1 << 32 or q >= 1 << 64:
            raise GtidError(
                f"MariaDB GTID {_quote(text)} out of range (domain and server id are 32-bit, "
                f"seq_no 64-bit)")
        return cls(d, s, q)

    def __str__(self) -> str:
        return f"{self.domain_id}-{self.server_id}-{self.seq_no}"


class MariaGtidPosition:
    """A MariaDB replication position: at most one GTID per domain (``gtid_slave_pos`` value).

    Immutable; :meth:`advance` returns a new position.  ``str()`` is canonical: GTIDs sorted by
    domain, joined by ``','``.
    """

    __slots__ = ("_by_domain",)

    def __init__(self, gtids: Iterable[MariaGtid] = ()):
        """Build from GTIDs; two GTIDs of one domain are an error (use :meth:`from_gtids`)."""
        by: dict[int, MariaGtid] = {}
        for g in gtids:
            g = MariaGtid(*g)
            if g.domain_id in by:
                raise GtidError(
                    f"MariaDB GTID position has two GTIDs for domain {g.domain_id}: "
                    f"{by[g.domain_id]} and {g}")
            by[g.domain_id] = g
        self._by_domain = dict(sorted(by.items()))

    @classmethod
    def parse(cls, text: str) -> "MariaGtidPosition":
        """Parse ``'0-1-42,1-2-7'`` (whitespace allowed, ``''`` is the empty position)."""
        if not isinstance(text, str):
            raise GtidError(f"MariaDB GTID position must be a str, not {type(text).__name__}")
        items = [t for t in text.split(",") if t.strip()]
        return cls(MariaGtid.parse(t) for t in items)

    @classmethod
    def from_gtids(cls, gtids: Iterable[MariaGtid]) -> "MariaGtidPosition":
        """The position after *gtids*: per domain, the GTID with the highest seq_no.

        Suits a GTID_LIST event, which lists one GTID per (domain, server).
        """
        by: dict[int, MariaGtid] = {}
        for g in gtids:
            g = MariaGtid(*g)
            cur = by.get(g.domain_id)
            if cur is None or g.seq_no > cur.seq_no:
                by[g.domain_id] = g
        return cls(by.values())

    def advance(self, gtid: MariaGtid | str) -> "MariaGtidPosition":
        """A new position with *gtid* replacing its domain's entry."""
        g = MariaGtid.parse(gtid) if isinstance(gtid, str) else MariaGtid(*gtid)
        new = MariaGtidPosition.__new__(MariaGtidPosition)
        by = dict(self._by_domain)
        by[g.domain_id] = g
        new._by_domain = dict(sorted(by.items()))
        return new

    def contains(self, gtid: MariaGtid | str) -> bool:
        """Whether *gtid* is at or before this position (same domain, seq_no <= the entry's)."""
        g = MariaGtid.parse(gtid) if isinstance(gtid, str) else MariaGtid(*gtid)
        cur = self._by_domain.get(g.domain_id)
        return cur is not None and g.seq_no <= cur.seq_no

    __contains__ = contains

    def get(self, domain_id: int) -> MariaGtid | None:
        """The GTID of *domain_id*, or ``None``."""
        return self._by_domain.get(domain_id)

    @property
    def domains(self) -> list[int]:
        """The domains present, sorted."""
        return list(self._by_domain)

    def __iter__(self) -> Iterator[MariaGtid]:
        return iter(self._by_domain.values())

    def __len__(self) -> int:
        return len(self._by_domain)

    def __bool__(self) -> bool:
        return bool(self._by_domain)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MariaGtidPosition):
            return self._by_domain == other._by_domain
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._by_domain.values()))

    def __str__(self) -> str:
        return ",".join(str(g) for g in self._by_domain.values())

    def __repr__(self) -> str:
        return f"MariaGtidPosition({str(self)!r})"


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
