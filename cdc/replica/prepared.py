"""Prepared XA transactions read again: what a replica client resuming at a position needs of
the transactions prepared before it and still undecided there (:mod:`cdc.binlog.xa`).

A position names them (:attr:`cdc.positions.Position.prepared`: id, file, start, end), not
their changes: before its dump starts, a client that does not hold one reads it with a dump of
its own from its start to its XA PREPARE (same account, server_id and schema history, one
transaction), and holds it until its XA COMMIT or XA ROLLBACK comes.
"""

from __future__ import annotations

import logging
from typing import Iterable

from cdc.binlog.transactions import Transaction
from cdc.binlog.xa import PREPARE, Prepared
from cdc.errors import CdcError
from cdc.positions import Start
from cdc.replica.history_state import use_history

__all__ = ["read_prepared"]

log = logging.getLogger("cdc.replica")


def read_prepared(refs: Iterable[Prepared], held: dict, owner) -> tuple[Prepared, ...]:
    """Read each prepared transaction of *refs* that *held* (xid -> transaction) lacks into it,
    for the replica client *owner* (before its dump starts: a client of its class, config and
    schema history reads it). Returns the places completed (a ``tail --xa FILE:POS`` place
    learns its id and end)."""
    out = []
    where = owner.where
    for ref in refs:
        if ref.xid is not None and ref.xid in held:
            out.append(ref)
            continue
        client = type(owner)(owner.config.replace(check_server_id=False),
                             start=Start.at(ref.file, ref.pos), blocking=False)
        use_history(client, owner.metadata.history)
        try:
            tx = next(iter(client.transactions()), None)
            ok = tx is not None and tx.xa is not None and tx.xa.action == PREPARE and \
                (tx.file, tx.pos) == (ref.file, ref.pos) and ref.xid in (None, tx.xa.xid)
            if not ok:
                raise CdcError(_not_there(ref, tx, where))
            held[tx.xa.xid] = client.prepared[tx.xa.xid]
        finally:
            client.close()
        log.info("holding the prepared XA transaction %s read again at %s:%d until it is "
                 "committed or rolled back", tx.xa.xid, ref.file, ref.pos)
        out.append(tx.xa.held)
    return tuple(out)


def _not_there(ref: Prepared, tx: Transaction | None, where: str) -> str:
    what = f"the XA transaction {ref.xid} prepared" if ref.xid else "a prepared XA transaction"
    found = "nothing" if tx is None else \
        f"a transaction at {tx.file}:{tx.pos}" + (f" ({tx.xa.action} {tx.xa.xid})" if tx.xa
                                                  else " that is not an XA PREPARE")
    return (f"{what} at {ref.file}:{ref.pos} is not in the binlog of {where} (found {found}): "
            f"the position to resume from does not belong to this server's binlog; resume "
            f"from a position this server wrote")
