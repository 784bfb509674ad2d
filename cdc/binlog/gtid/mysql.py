"""MySQL GTIDs and GTID sets: :class:`Gtid` (``uuid:gno``, ``uuid:tag:gno``) and the immutable
:class:`GtidSet` with MySQL's text form, its binary form (``Gtid_set::encode``: what
PREVIOUS_GTIDS_LOG_EVENT holds and COM_BINLOG_DUMP_GTID sends, :func:`decode_gtid_set`) and set
algebra.

Source references (MySQL 8.4/9.x): ``sql/rpl_gtid_set.cc`` (text parser ``add_gtid_text``,
``to_string``, ``encode``/``add_gtid_encoding``), ``libs/mysql/gtid/{tag,tsid}.cpp``.
"""

from __future__ import annotations

import re
import struct
from typing import Iterable, Iterator, Mapping, NamedTuple

from cdc.errors import GtidError
from cdc.binlog.gtid.intervals import (Intervals, intersect_intervals, intervals_contain,
                                       intervals_subset, merge_intervals, subtract_intervals,
                                       union_intervals)
from cdc.binlog.gtid.parts import (GNO_MAX, TAG_MAX_LENGTH, TAG_RE, Buffer, norm_tag, norm_uuid,
                                   parse_gno, quote, uuid_from_bytes, uuid_to_bytes)
from cdc.binlog.gtid.varlen import ShortData, read_varlen_unsigned, write_varlen_unsigned

_U64 = struct.Struct("<Q")
_Q2 = struct.Struct("<qq")
_INTERVAL_RE = re.compile(r"([0-9]+)(?:\s*-\s*([0-9]+))?\Z")


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
                f"malformed GTID {quote(text)}: expected 'uuid:number' or 'uuid:tag:number'")
        uuid = norm_uuid(parts[0], text)
        tag = norm_tag(parts[1], text) if len(parts) == 3 else ""
        gno = parse_gno(parts[-1], text)
        return cls(uuid, gno, tag or None)

    def __str__(self) -> str:
        if self.tag:
            return f"{self.uuid}:{self.tag}:{self.gno}"
        return f"{self.uuid}:{self.gno}"

    def normalized(self) -> "Gtid":
        """This GTID validated, with uuid and tag lowercased (``''`` tag becomes ``None``)."""
        uuid = norm_uuid(self.uuid)
        tag = norm_tag(self.tag)
        gno = self.gno
        if not isinstance(gno, int) or not 1 <= gno <= GNO_MAX:
            raise GtidError(f"GTID number {gno!r} of {uuid} is out of range 1..{GNO_MAX}")
        return Gtid(uuid, gno, tag or None)


_Key = tuple[str, str]                    # (lowercase uuid, lowercase tag or '')


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
        self._map: dict[_Key, Intervals] = {}
        self._text: str | None = None
        self._hash: int | None = None
        if intervals:
            acc: dict[_Key, list[tuple[int, int]]] = {}
            for (uuid, tag), ranges in intervals.items():
                key = (norm_uuid(uuid), norm_tag(tag))
                lst = acc.setdefault(key, [])
                for first, last in ranges:
                    if not (isinstance(first, int) and isinstance(last, int)
                            and 1 <= first <= last <= GNO_MAX):
                        raise GtidError(
                            f"bad GTID range {first!r}-{last!r} for {key[0]}: need "
                            f"1 <= first <= last <= {GNO_MAX}")
                    lst.append((first, last + 1))
            self._map = {k: merge_intervals(v) for k, v in sorted(acc.items()) if v}

    @classmethod
    def _from_map(cls, m: dict[_Key, Intervals]) -> "GtidSet":
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
            uuid = norm_uuid(parts[0], text)
            tag = ""
            for raw in parts[1:]:
                p = raw.strip()
                if not p:
                    raise GtidError(
                        f"malformed GTID set {quote(text)}: empty element after ':' in "
                        f"{quote(item.strip())}")
                if p[0].isdigit():
                    m = _INTERVAL_RE.match(p)
                    if not m:
                        raise GtidError(
                            f"malformed GTID set {quote(text)}: bad interval {quote(p)} "
                            f"(expected N or N-M)")
                    first = int(m.group(1))
                    last = int(m.group(2)) if m.group(2) is not None else first
                    if first < 1:
                        raise GtidError(
                            f"malformed GTID set {quote(text)}: interval {quote(p)} starts at "
                            f"0; transaction numbers start at 1")
                    if last < first:
                        raise GtidError(
                            f"malformed GTID set {quote(text)}: interval {quote(p)} ends "
                            f"before it starts")
                    if last > GNO_MAX:
                        raise GtidError(
                            f"malformed GTID set {quote(text)}: interval {quote(p)} exceeds "
                            f"the largest transaction number {GNO_MAX}")
                    acc.setdefault((uuid, tag), []).append((first, last + 1))
                elif TAG_RE.match(p):
                    tag = p.lower()
                else:
                    raise GtidError(
                        f"malformed GTID set {quote(text)}: {quote(p)} is neither an interval "
                        f"(N or N-M) nor a tag ([a-z_][a-z0-9_]{{0,31}})")
        return cls._from_map({k: merge_intervals(v) for k, v in acc.items()})

    @classmethod
    def from_gtids(cls, gtids: Iterable[Gtid | str]) -> "GtidSet":
        """The set of the given GTIDs (``Gtid`` objects or ``uuid[:tag]:gno`` strings)."""
        acc: dict[_Key, list[tuple[int, int]]] = {}
        for g in gtids:
            g = _as_gtid(g)
            acc.setdefault((g.uuid, g.tag or ""), []).append((g.gno, g.gno + 1))
        return cls._from_map({k: merge_intervals(v) for k, v in acc.items()})

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
            out += uuid_to_bytes(uuid)
            if tagged:
                raw = tag.encode("ascii")
                out += write_varlen_unsigned(len(raw))
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
        ivs = self._map.get((norm_uuid(uuid), norm_tag(tag)), ())
        return tuple((s, e - 1) for s, e in ivs)

    def last_gno(self, uuid: str, tag: str | None = None) -> int:
        """The largest transaction number of *uuid*/*tag* in the set, 0 if none."""
        ivs = self._map.get((norm_uuid(uuid), norm_tag(tag)), ())
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
        return bool(ivs) and isinstance(g.gno, int) and intervals_contain(ivs, g.gno)

    # -- algebra --------------------------------------------------------------------------

    def add(self, gtid: Gtid | str) -> "GtidSet":
        """A new set with *gtid* added (``self`` if it is already present)."""
        g = _as_gtid(gtid)
        key = (g.uuid, g.tag or "")
        ivs = self._map.get(key, ())
        if ivs and intervals_contain(ivs, g.gno):
            return self
        m = dict(self._map)
        m[key] = union_intervals(ivs, ((g.gno, g.gno + 1),))
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
                m[k] = union_intervals(m.get(k, ()), ivs)
        return GtidSet._from_map(m)

    def subtract(self, *others: "GtidSet | str") -> "GtidSet":
        """GTIDs in this set but in none of *others*."""
        m = dict(self._map)
        for o in others:
            for k, ivs in _as_set(o)._map.items():
                if k in m:
                    m[k] = subtract_intervals(m[k], ivs)
        return GtidSet._from_map(m)

    difference = subtract

    def intersection(self, *others: "GtidSet | str") -> "GtidSet":
        """GTIDs present in this set and in every one of *others*."""
        m = dict(self._map)
        for o in others:
            om = _as_set(o)._map
            m = {k: intersect_intervals(ivs, om[k]) for k, ivs in m.items() if k in om}
        return GtidSet._from_map(m)

    def issubset(self, other: "GtidSet | str") -> bool:
        """Whether every GTID of this set is in *other*."""
        om = _as_set(other)._map
        return all(k in om and intervals_subset(ivs, om[k]) for k, ivs in self._map.items())

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


def decode_gtid_set(buf: Buffer, pos: int = 0, *,
                    truncated: type[Exception] = GtidError) -> tuple[GtidSet, int]:
    """Decode ``Gtid_set::encode`` bytes at *pos*; return ``(set, new_pos)``.

    Handles both formats (``Gtid_set::add_gtid_encoding``): the untagged one (8-byte n_sids,
    then per SID: 16-byte uuid, 8-byte n_intervals, intervals as 8-byte start and exclusive
    end) and the tagged one (first 8 bytes ``0x01, n_tsids in 6 bytes, 0x01``; each TSID also
    carries a varlen-length-prefixed tag after the uuid).  Raises :class:`GtidError` on
    malformed bytes and *truncated* (default :class:`GtidError`) on truncated ones.
    """
    end = len(buf)

    def need(n: int, what: str) -> None:
        if pos + n > end:
            raise truncated(
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
        uuid = uuid_from_bytes(buf[pos:pos + 16])
        pos += 16
        tag = ""
        if tagged:
            try:
                tlen, pos = read_varlen_unsigned(buf, pos, end)
            except ShortData as e:
                raise truncated(f"GTID set encoding: tag length of SID #{i}: {e}") from None
            if tlen > TAG_MAX_LENGTH:
                raise GtidError(f"GTID set encoding: tag of SID #{i} is {tlen} bytes long "
                                f"(max {TAG_MAX_LENGTH})")
            need(tlen, f"the tag of SID #{i}")
            raw = bytes(buf[pos:pos + tlen])
            pos += tlen
            if tlen:
                try:
                    tag = norm_tag(raw.decode("ascii"))
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
    return GtidSet._from_map({k: merge_intervals(v) for k, v in acc.items()}), pos
