"""The stream's schema history, kept by the driver and persisted in the offsets.

Without ``binlog_row_metadata=FULL`` a row's column names, character sets and members come from
the schema history (:mod:`cdc.schema`) at the row's position. A Spark query keeps one history on
the driver (:class:`StreamHistory`):

* **Seeded** from information_schema at the stream's start (``initialOffset``: the start
  position, for ``startingPosition=snapshot`` the snapshot's ``P0``) when the server's
  ``binlog_row_metadata`` is not FULL or schema changes are wanted; otherwise (FULL) at the
  first DDL statement the driver's scan meets, as a replica client would. Either way it is
  reconciled with the binlog's DDL from that position on (:meth:`HistorySource.seed`).
* **Fed** by the driver's scans of the binlog (the transaction boundaries of the next batches):
  the scan clients share it, so it follows every DDL statement up to the furthest boundary found.
* **In every offset** once seeded: ``"schema"`` holds the captured tables' shapes in effect at the
  offset's position (:meth:`~cdc.schema.history.SchemaHistory.to_json`: sorted tables, fixed key
  order, nothing volatile: the same position gives the same text). A FULL-metadata stream that
  met no DDL has no history and offsets as small as before.
* **Restored** from the start offset of a batch when the driver has none (a restarted query: the
  checkpoint's offset log is the history's only store; information_schema is not read again).
* **Given to the tasks**: each chunk (:class:`streaming.source.BinlogChunk`) carries the history
  as of its start; the task's client follows the DDL inside the chunk from there.
"""

from __future__ import annotations

import logging

from cdc.errors import BinlogPurgedError, CdcError
from cdc.positions import Position, Start
from cdc.replica.history_state import use_history
from cdc.replica.seeding import HistorySource, read_collations
from cdc.replica.sql import mysql_error
from cdc.schema.history import SchemaHistory

from streaming.source.options import SourceOptions
from streaming.source.planning import Key

__all__ = ["KEY", "StreamHistory", "history_state"]

log = logging.getLogger("binlog_cdc.spark")

#: the offsets' key of the history
KEY = "schema"


def history_state(offset) -> dict | None:
    """The history an offset carries (None: none)."""
    return offset.get(KEY) if isinstance(offset, dict) else None


class StreamHistory:
    """The driver's schema history (see the module); *query* is the driver's SQL
    (``query(sql, args)``)."""

    def __init__(self, opts: SourceOptions, query):
        self.opts = opts
        self._query = query
        self.history: SchemaHistory | None = None
        self.fed_to: Position | None = None    # the driver's scans fed statements up to here
        self._source: HistorySource | None = None
        self._collations: dict | None = None   # the server's, read once
        self.enabled = opts.replica_config().schema_history

    def query(self, sql: str, args=None) -> list[tuple]:
        """A statement on the driver's session, its errors as binlog-cdc's (what the seeding
        expects: a server that refuses information_schema leaves the history empty)."""
        import pymysql
        try:
            return self._query(sql, args)
        except pymysql.err.MySQLError as e:
            raise mysql_error(e, self.opts.replica_config()) from e

    # --- making, seeding, restoring ---------------------------------------------------------

    def source(self) -> HistorySource:
        """The information_schema side, on the driver's SQL session."""
        if self._source is None:
            self._source = HistorySource(self.opts.replica_config(), self.query)
        return self._source

    def shared(self) -> SchemaHistory | None:
        """The history the driver's scan clients share (made unseeded if there is none yet)."""
        if not self.enabled:
            return None
        if self.history is None:
            self.history = self.source().new_history()
        return self.history

    @property
    def in_use(self) -> bool:
        return self.history is not None and self.history.seeded

    def seed_at_start(self, start: Position) -> None:
        """At the stream's start: seed now, as of *start*, unless the server logs full metadata
        and no schema changes are wanted (then the history is seeded when a scan first needs
        it)."""
        if not self.enabled or self.in_use:
            return
        try:
            rows = self.query("SELECT @@GLOBAL.binlog_row_metadata", None)
            mode = str(rows[0][0]).upper() if rows and rows[0][0] is not None else ""
        except Exception:  # noqa: BLE001 -- a server without the variable: no full metadata
            mode = ""
        if mode == "FULL" and not self.opts.include_schema_changes:
            return
        h = self.shared()
        self._source.seed(h, at=(start.file, start.pos))
        self.fed_to = start
        log.info("schema history seeded at the stream's start %s (binlog_row_metadata=%s)",
                 start, mode or "not FULL")

    def restore(self, offset: dict, at: Position) -> None:
        """A batch starts at *offset* (position *at*): a driver without a history takes the one
        the offset carries (a restarted query)."""
        if self.in_use:
            return
        h = self.carried(offset)
        if h is None:
            return
        self.history = self.source().history = h
        self.fed_to = at
        log.info("schema history restored from the offset at %s (%d table(s))", at,
                 len(h.tables()))

    def carried(self, offset) -> SchemaHistory | None:
        """A new history made from the one *offset* carries, as of its position (None: it
        carries none, or the history is off)."""
        state = history_state(offset)
        if state is None or not self.enabled:
            return None
        src = self.source()
        h = SchemaHistory.from_json(state, captures=src.config.table_filter,
                                    on_unparsed=src.config.on_unparsed_ddl,
                                    read_table=src.read_table, at_end=src.at_end)
        h.collations.update(self._server_collations())
        return h

    def _server_collations(self) -> dict:
        if self._collations is None:
            try:
                self._collations = read_collations(self.query)
            except CdcError as e:       # names of collations binlog-cdc knows still work
                log.warning("the server's collations could not be read (%s)", e)
                return {}
        return self._collations

    def attach_carried(self, client, offset) -> None:
        """Make *client*, reading from *offset*'s position, complete table maps from its own
        copy of the history *offset* carries (it follows the DDL after the offset without
        touching the stream's); without one the client keeps its own, seeded when needed."""
        use_history(client, self.carried(offset))

    # --- feeding ----------------------------------------------------------------------------

    def attach(self, client) -> None:
        """Make a driver's scan client follow (and seed, when it needs to) the shared history."""
        use_history(client, self.shared())

    def scanned(self, to: Position) -> None:
        """A scan fed every statement up to *to*."""
        if self.fed_to is None or to.key > self.fed_to.key:
            self.fed_to = to

    def behind(self, to: Key) -> bool:
        """Whether the history is in use and has not been fed up to *to*."""
        return self.in_use and self.fed_to is not None and self.fed_to.key < to

    def feed(self, to: Position, client_at) -> None:
        """Feed the statements from where the history was fed up to *to* (a replayed batch
        planned by a restarted driver: no scan went there); *client_at(start)* makes a
        non-blocking replica client."""
        if not self.behind(to.key):
            return
        at = self.fed_to
        client = client_at(Start.at(at.file, at.pos))
        self.attach(client)
        try:
            for tx in client.transactions():
                at = at.after(tx.file, tx.end_pos, tx.gtid, tx.xa)
                if at.key >= to.key:
                    break
        except BinlogPurgedError as e:
            if self.opts.fail_on_data_loss:
                raise
            log.warning("the schema history cannot follow the DDL of lost binlogs (%s): tables "
                        "changed there may be decoded with their earlier shape", e)
            at = to
        finally:
            client.close()
        self.scanned(at)

    # --- what goes out ----------------------------------------------------------------------

    def state(self, file: str, pos: int) -> dict | None:
        """The history as of (*file*, *pos*) (None: not in use)."""
        return self.history.to_json(file, pos) if self.in_use else None

    def offset(self, position: Position) -> dict:
        """*position*'s offset, with the history there when it is in use."""
        out = position.to_offset()
        state = self.state(position.file, position.pos)
        if state is not None:
            out[KEY] = state
        return out
