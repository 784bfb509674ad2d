"""XA (two-phase) transactions in the binlog: their ids, their steps, and where a prepared one is.

What the servers write (``mysqlbinlog -vv`` / ``mariadb-binlog -v`` of MySQL 9.7, MariaDB
10.11 and 11.8), each step an event group, a transaction of its own with its own GTID:

* ``XA START .. XA END; XA PREPARE 'x'``: the row changes, ended by an XA_PREPARE event that
  carries the id (MySQL: after ``XA START``/``XA END`` QUERY events; MariaDB: a GTID event
  flagged *prepared XA*, then the rows, ``XA END`` and the same XA_PREPARE event type).
* ``XA COMMIT 'x'`` and ``XA ROLLBACK 'x'``: a group holding one QUERY event,
  ``XA COMMIT X'78',X'',1`` -- possibly much later, after other transactions, on a later binlog
  file, from another connection, after a server restart.
* ``XA COMMIT 'x' ONE PHASE``: a normal commit (MySQL: an XA_PREPARE event flagged one-phase
  ends the group; MariaDB: ``START TRANSACTION`` .. XID, like any transaction).

The semantics binlog-cdc gives them (the one owner is
:class:`~cdc.binlog.transactions.TransactionAssembler`): a prepared transaction's changes are
*held* -- not delivered -- until its ``XA COMMIT``, and are then delivered once, as the changes
of the XA COMMIT's transaction: at its place in the binlog order (its file, position, GTID and
commit time), after every transaction committed before it, even those committed while it was
prepared. ``XA ROLLBACK`` drops them. The transactions of the XA PREPARE and of the XA ROLLBACK
carry no changes; like every transaction they are boundaries that positions move past.

A position past an undecided XA PREPARE remembers where that prepared transaction is
(:class:`Prepared`: its id, file, start and end position; :attr:`cdc.positions.Position.prepared`)
rather than its changes: a stream resumed there (a replica client restarted, a Spark task's
chunk) reads that one transaction again from the binlog before it goes on, and skips nothing
and repeats nothing. Its rows are decoded with the schema in effect where the stream resumes;
both servers keep a prepared transaction's tables locked against DDL until it is decided.

Why a place and not the changes, nor a resume point before the XA PREPARE: a transaction may
stay prepared for hours (a transaction manager that died) and hold any number of rows. Its
changes in every offset (Spark writes one per micro-batch and compares them as text) would make
offsets unbounded; resuming at the oldest undecided XA PREPARE and skipping what was delivered
after it would make every restart -- and every Spark task -- read the binlog again from there,
and stop the offsets from moving. A place is a few dozen bytes, and only that transaction is
read again, once, by the reader that reaches its decision without holding it.

Not delivered: the changes of an XA transaction prepared before a stream's start (an XA COMMIT
whose prepare the reader never saw: :attr:`XaStep.missing`; the readers warn).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from cdc.errors import ConfigurationError

__all__ = ["PREPARE", "COMMIT", "ROLLBACK", "XaStep", "Prepared", "xid_text", "decision"]

PREPARE, COMMIT, ROLLBACK = "prepare", "commit", "rollback"


def xid_text(format_id: int, gtrid: bytes, bqual: bytes) -> str:
    """An XA id as the servers write it in ``XA COMMIT``: ``X'7831',X'',1`` (lower-case hex)."""
    return f"X'{bytes(gtrid).hex()}',X'{bytes(bqual).hex()}',{int(format_id)}"


_HEX = r"X'([0-9A-Fa-f]*)'"
_STRING = r"'((?:[^'\\]|\\.|'')*)'"
_PART = rf"(?:{_HEX}|{_STRING})"
_DECISION = re.compile(
    rf"\s*XA\s+(COMMIT|ROLLBACK)\s+{_PART}(?:\s*,\s*{_PART}(?:\s*,\s*(-?\d+))?)?"
    rf"\s*(ONE\s+PHASE)?\s*;?\s*\Z", re.IGNORECASE | re.DOTALL)


def _part(hex_: str | None, text: str | None) -> bytes:
    if hex_ is not None:
        return bytes.fromhex(hex_)
    return (text or "").replace("''", "'").encode("utf-8")


def decision(query: str) -> "XaStep | None":
    """The XA COMMIT or XA ROLLBACK of a prepared transaction that *query* is (None for any
    other statement, and for ``XA COMMIT .. ONE PHASE``: that is a commit of its own group)."""
    m = _DECISION.match(query)
    if m is None or m.group(7):
        return None
    action, g_hex, g_text, b_hex, b_text, fmt = m.group(1, 2, 3, 4, 5, 6)
    xid = xid_text(int(fmt) if fmt is not None else 1, _part(g_hex, g_text), _part(b_hex, b_text))
    return XaStep(COMMIT if action.upper() == "COMMIT" else ROLLBACK, xid)


class Prepared(NamedTuple):
    """Where an undecided prepared XA transaction is: its id, its binlog file, the position of
    its first event and the end of its XA_PREPARE event. A start given by hand
    (``tail --xa FILE:POS``) knows only *file* and *pos* until the transaction is read."""

    xid: str | None
    file: str
    pos: int
    end: int | None = None

    def to_json(self) -> list:
        """``[xid, file, pos, end]``: the form in offsets."""
        return [self.xid, self.file, self.pos, self.end]

    @classmethod
    def from_json(cls, value) -> "Prepared":
        try:
            xid, file, pos, end = value
            if not isinstance(file, str) or not file or isinstance(pos, bool) or \
                    not isinstance(pos, int) or pos < 4:
                raise ValueError(value)
            return cls(None if xid is None else str(xid), file, pos,
                       None if end is None else int(end))
        except (TypeError, ValueError):
            raise ConfigurationError(f"not a prepared XA transaction's place: {value!r} (expected "
                                     f"[xid, file, pos, end])") from None

    @classmethod
    def parse(cls, text: str) -> "Prepared":
        """``FILE:POS`` (the option ``tail --xa``)."""
        file, sep, pos = text.strip().rpartition(":")
        if not sep or not file or not pos.isdigit() or int(pos) < 4:
            raise ConfigurationError(f"--xa {text!r}: expected FILE:POS, the binlog file and "
                                     f"position of a prepared XA transaction (as tail printed "
                                     f"them)")
        return cls(None, file, int(pos))

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


class XaStep(NamedTuple):
    """What a transaction does in a two-phase commit (:attr:`Transaction.xa`): *action*
    :data:`PREPARE`, :data:`COMMIT` or :data:`ROLLBACK` of the XA transaction *xid*. A prepare
    says where the prepared transaction is (*held*); a commit or rollback whose prepare the
    reader never saw (it came before the reading started) is *missing*."""

    action: str
    xid: str
    held: Prepared | None = None
    missing: bool = False
