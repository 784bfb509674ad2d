"""Resuming a stream on another server by GTID (failover): whether a server holds every
transaction a position's GTID state says was delivered, and the GTID state at a file position.

A position (:class:`~cdc.positions.Position`) names a binlog file and byte position of the
server it was read from, and the GTID state there. After a failover the new primary's binlog has
other file names and positions; only the GTID state means the same thing on both. Every check
takes ``query(sql, args=None) -> rows``.

* :func:`check_contained` -- the server executed every transaction of the state, or
  :class:`~cdc.errors.DivergedServerError` (the old primary wrote transactions the new one never
  received: a stream resuming there would silently diverge).
* :func:`mysql_state_at` -- on a GTID-mode MySQL, the GTID set executed before a file position:
  the file's PREVIOUS_GTIDS plus the GTIDs before the position (``SHOW BINLOG EVENTS``).
"""

from __future__ import annotations

import re
from typing import Callable

from cdc.binlog.gtid import GtidSet, MariaGtid, MariaGtidPosition
from cdc.errors import DivergedServerError

__all__ = ["check_contained", "missing_from", "mysql_state_at"]

Query = Callable[..., list]

_GTID_NEXT = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'", re.I)
#: SHOW BINLOG EVENTS rows fetched at a time
_PAGE = 5000


def _variable(query: Query, name: str) -> str:
    rows = query(f"SELECT @@GLOBAL.{name}")
    return str(rows[0][0] or "") if rows else ""


def missing_from(query: Query, state, *, mariadb: bool) -> str:
    """The GTIDs of *state* the server never executed ("" when it has them all). MySQL: the set
    minus ``gtid_executed``, for the server_uuids the server executed any transaction of (a
    start set may name other sources' transactions as done); MariaDB: the GTIDs of the position whose (domain, server_id) the
    server's ``gtid_binlog_state`` has at a lower sequence number, or not at all."""
    if state is None or not state:
        return ""
    if not mariadb:
        executed = GtidSet.parse(re.sub(r"\s+", "", _variable(query, "gtid_executed")))
        known = {u.lower() for u in executed.uuids()}
        missing = GtidSet.parse(str(state)).subtract(executed)
        return ",".join(part for part in str(missing).split(",")
                        if part and part.split(":")[0].lower() in known)
    have: dict[tuple[int, int], int] = {}
    for text in _variable(query, "gtid_binlog_state").split(","):
        if text.strip():
            g = MariaGtid.parse(text.strip())
            have[(g.domain_id, g.server_id)] = max(g.seq_no, have.get((g.domain_id,
                                                                        g.server_id), 0))
    pos = state if isinstance(state, MariaGtidPosition) else MariaGtidPosition.parse(str(state))
    return ",".join(str(g) for g in pos
                    if have.get((g.domain_id, g.server_id), -1) < g.seq_no)


def check_contained(query: Query, state, *, mariadb: bool, where: str) -> None:
    """DivergedServerError unless the server *where* executed every transaction of *state*."""
    missing = missing_from(query, state, mariadb=mariadb)
    if missing:
        raise DivergedServerError(
            f"{where} never executed {missing}, which this stream already delivered (GTID "
            f"state {state}): it is not a continuation of the server the stream read (a "
            f"failover lost the old primary's last transactions, or this is another server). "
            f"Resuming would silently diverge: restart from a new snapshot and a new checkpoint")


def mysql_state_at(query: Query, file: str, pos: int) -> GtidSet | None:
    """The GTID set executed before *file*:*pos* on a GTID-mode MySQL: the file's
    PREVIOUS_GTIDS and the GTIDs of the transactions before *pos*. None when *pos* is not an
    event boundary of *file* (or the server has no such file)."""
    state = None
    at = 4
    boundary = pos == 4
    while at < pos:
        rows = query("SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (file, at, _PAGE))
        if not rows:
            break
        for _name, start, kind, _sid, end, info in rows:
            start, end, kind = int(start), int(end), str(kind)
            if start >= pos:
                boundary = boundary or start == pos
                at = pos
                break
            if kind == "Previous_gtids":
                state = GtidSet.parse(re.sub(r"\s+", "", str(info or "")))
            elif kind.startswith("Gtid"):
                m = _GTID_NEXT.search(str(info or ""))
                if m and state is not None:
                    state = state.add(m.group(1))
            boundary = end == pos
            at = max(at, end)
        else:
            if len(rows) < _PAGE:
                break
    return state if boundary and state is not None else None
