"""MariaDB GTIDs: :class:`MariaGtid` (``domain-server-seq``) and :class:`MariaGtidPosition`, at
most one GTID per replication domain (what ``gtid_slave_pos`` / ``gtid_binlog_pos`` hold)."""

from __future__ import annotations

import re
from typing import Iterable, Iterator, NamedTuple

from cdc.errors import GtidError
from cdc.binlog.gtid.parts import quote

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
        parts = text.split("-") if isinstance(text, str) else ()
        digits = "".join(parts)
        if len(parts) == 3 and digits.isdigit() and digits.isascii() and "" not in parts:
            d, s, q = int(parts[0]), int(parts[1]), int(parts[2])    # the common spelling
            if d < 1 << 32 and s < 1 << 32 and q < 1 << 64:
                return cls(d, s, q)
        m = _MARIA_GTID_RE.match(text) if isinstance(text, str) else None
        if not m:
            raise GtidError(
                f"malformed MariaDB GTID {quote(str(text))}: expected 'domain-server-seq' such "
                f"as '0-1-42'")
        d, s, q = (int(x) for x in m.groups())
        if d >= 1 << 32 or s >= 1 << 32 or q >= 1 << 64:
            raise GtidError(
                f"MariaDB GTID {quote(text)} out of range (domain and server id are 32-bit, "
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
        known = g.domain_id in by
        by[g.domain_id] = g
        new._by_domain = by if known else dict(sorted(by.items()))    # known: still sorted
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
