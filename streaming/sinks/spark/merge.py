"""Upserting a ``binlog-cdc`` stream into Delta or Iceberg tables with Spark's own ``MERGE``,
from ``foreachBatch``: the batch stays on the executors (nothing of its rows is collected to the
driver)::

    from streaming.sinks.spark import SparkMerge

    merge = SparkMerge("/data/delta", format="delta", app_id="orders-cdc",
                       host="db.example", user="cdc", password=secret)
    (spark.readStream.format("binlog-cdc").option(...).load()
         .writeStream.foreachBatch(merge).option("checkpointLocation", "/chk/orders").start())

``format="delta"`` (delta-spark): one table per source table at ``<target>/<db>/<table>``;
``format="iceberg"`` (the Iceberg Spark runtime): ``<target>.<db>.<table>``, *target* a catalog
(or ``catalog.namespace``) of the session. The session needs the connector's jars and catalog
settings (:func:`streaming.apps.local_spark.local_spark`'s ``formats``; ``docs/sinks.md``).

The semantics are :class:`streaming.sinks.delta.upserter.DeltaUpserter`'s, from the same plan
(:mod:`streaming.sinks.plan`): the last change per primary key in ``seq`` order (a primary-key
change is a delete of the old key and a write of the new one), the changes before a table's last
``TRUNCATE`` superseded (the MERGE then also deletes every row the changes after it do not
write), the DDL of ``includeSchemaChanges`` applied in order as schema evolution (columns added,
renamed, dropped, widened: ``ALTER TABLE`` on the target, row images before a DDL read under
their old names; tables renamed: :mod:`streaming.sinks.spark.targets`, the changes before the
rename going to the new name), keyless tables refused. Row images are JSON texts, or typed
mode's structs (the source's option ``table``).

What reaches the driver: one aggregate row per source table of the batch (its name and its
TRUNCATE and schema-change records), and the targets' metadata. The rows go from the source's
partitions through ``from_json`` (JSON images), a window (last change per key) and the MERGE's
join on the executors.

Exactly once: Delta: the MERGE runs with the writer settings ``txnAppId`` = ``app_id`` and
``txnVersion`` = the batch id (delta-spark skips a batch already committed under them); Iceberg:
the snapshot summary records ``binlog-cdc.app-id`` and ``binlog-cdc.batch-id``, and a batch whose
id is <= the table's recorded one is skipped. Schema changes are applied idempotently (a column
already added or renamed is left as it is); the table property ``binlog-cdc.shape`` keeps the
source's columns after the last DDL applied (and the ones before it, for a replay).
"""

from __future__ import annotations

import json
import logging
import threading

from cdc.errors import ConfigurationError
from cdc.replica.config import ReplicaConfig

from streaming.contract.envelope import SCHEMA_CHANGE, UPSERT_FIELDS
from streaming.sinks.foreach_batch import spark_safe
from streaming.sinks.plan import (OP_COLUMN, Moves, TableEvents, plan_table, refuse_keyless,
                                  table_moves)
from streaming.sinks.tables import default_table_path, server_columns
from streaming.sinks.spark.targets import SHAPE_PROPERTY, Target, q
from streaming.sinks.spark.values import final_columns

log = logging.getLogger("binlog_cdc.spark_merge")

FORMATS = ("delta", "iceberg")
_SEQ, _RANK = "__cdc_seq", "__cdc_rank"


class SparkMerge:
    """A ``foreachBatch`` function: ``merge(batch_df, batch_id)`` upserts the changes of a batch
    of the ``binlog-cdc`` source into one table per source table with Spark's MERGE (see the
    module). *format*: ``"delta"`` (*target*: a root path or URI) or ``"iceberg"`` (*target*: a
    catalog, or ``catalog.namespace``, of the session). Table definitions of tables the stream
    has no DDL record for come from the source server: ``config`` (a
    :class:`~cdc.replica.config.ReplicaConfig`) or ``host``/``port``/``user``/``password``/
    ``ssl``, or ``columns``: a ``(db, table) -> TableInfo`` function. ``table``: ``(db, table)
    -> target`` (a path for Delta, a table name for Iceberg) to place tables elsewhere."""

    def __init__(self, target: str, format: str = "delta", *, app_id: str,
                 host: str | None = None, port: int = 3306, user: str | None = None,
                 password: str | None = None, ssl=None, config: ReplicaConfig | None = None,
                 columns=None, table=None):
        if format not in FORMATS:
            raise ConfigurationError(f"SparkMerge: format {format!r}: use one of {FORMATS}")
        if not app_id:
            raise ConfigurationError("SparkMerge: app_id is required (it names the stream in the "
                                     "tables' commits; one per checkpoint)")
        if columns is None:
            columns = server_columns("SparkMerge", host, port, user, password, ssl, config)
        self.target = str(target)
        self.format = format
        self.app_id = str(app_id)
        self.columns = columns
        self.table = table
        self._server: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def __getstate__(self):  # picklable (Spark Connect runs foreachBatch in a server process)
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self) -> None:
        close = getattr(self.columns, "close", None)
        if close:
            close()

    # --- entry point -----------------------------------------------------------------------------

    @spark_safe
    def __call__(self, df, batch_id: int) -> None:
        with self._lock:
            self._batch(df, int(batch_id))

    def name_of(self, db: str, table: str) -> str:
        """The SQL name of the target of ``db.table`` (``delta.`<path>``` for Delta)."""
        if self.format == "delta":
            path = self.table(db, table) if self.table else \
                default_table_path(self.target, db, table)
            return f"delta.{q(path)}"
        if self.table:
            return self.table(db, table)
        return f"{self.target}.{q(db)}.{q(table)}"

    def _batch(self, df, batch_id: int) -> None:
        missing = [c for c in UPSERT_FIELDS if c not in df.columns]
        if missing:
            raise ConfigurationError(f"SparkMerge: the DataFrame lacks the columns {missing}; "
                                     f"pass the binlog-cdc source's DataFrame unchanged (with "
                                     f"option fields, at least {','.join(UPSERT_FIELDS)})")
        from pyspark.sql.types import StructType
        image = df.schema["after"].dataType
        fields = set(image.names) if isinstance(image, StructType) else None   # typed mode
        df = df.persist()
        try:
            tables = self._events(df)
            moves = table_moves(tables)
            if moves.moves:
                self._move(df.sparkSession, moves, batch_id)
                tables = _regroup(tables, moves)
                rows = _relabel(df, moves)
            else:
                rows = df
            for events in tables:
                self._table(rows, events, batch_id, fields)
        finally:
            df.unpersist()

    def _move(self, spark, moves: Moves, batch_id: int) -> None:
        """The batch's RENAME TABLEs on the targets, in order, before its changes are merged
        (those not done yet: a replay finds the last one done in the tables' property
        :data:`~streaming.sinks.spark.targets.MOVED_PROPERTY`), then the targets of the names
        renamed away emptied (Delta: a path keeps its table)."""
        names = {n for _s, old, new in moves.moves for n in (old, new)}
        targets = {n: Target.of(self, spark, *n) for n in names}
        done = max((t.moved_tag(batch_id) or "" for t in targets.values()), default="")
        for seq, old, new in moves.moves:
            if seq > done:
                targets[new].move_from(targets[old], batch_id, seq)
        for name in moves.vacated:
            if targets[name].exists:
                targets[name].delete_all(batch_id)

    def _events(self, df) -> list[TableEvents]:
        """One aggregate row per table: its TRUNCATE and schema-change records (all that comes
        to the driver)."""
        from pyspark.sql import functions as F
        record = F.col(SCHEMA_CHANGE) if SCHEMA_CHANGE in df.columns else \
            F.lit(None).cast("string")
        ev = F.when(F.col("op").isin("s", "t"),
                    F.struct(F.col("seq"), F.col("op"), record.alias("record")))
        rows = (df.groupBy("db", "table").agg(F.collect_list(ev).alias("events"))
                .orderBy("db", "table").collect())
        out = []
        for r in rows:
            evs = sorted(((e["seq"], e["op"], json.loads(e["record"]) if e["record"] else None)
                          for e in r["events"]), key=lambda e: e[0])
            out.append(TableEvents(r["db"], r["table"], evs))
        return out

    # --- one table -------------------------------------------------------------------------------

    def _table(self, df, events: TableEvents, batch_id: int, fields) -> None:
        from pyspark.sql import functions as F
        spark = df.sparkSession
        db, name = events.db, events.table
        target = Target.of(self, spark, db, name)
        if target.applied(batch_id):
            log.info("%s.%s: batch %d already applied, skipped", db, name, batch_id)
            return
        before = target.shape_before(batch_id)
        plan = plan_table(events, before,
                          lambda: self._server_shape(db, name))
        if plan.final is None:              # dropped (or no shape known): rows gone
            if target.exists:
                target.delete_all(batch_id)
            return
        refuse_keyless("SparkMerge", db, name, plan.final.primary_key)
        target.evolve(plan, before, batch_id)
        rows = df.where((F.col("db") == db) & (F.col("table") == name)
                        & F.col("op").isin("c", "u", "d", "r"))
        if plan.cut is not None:
            rows = rows.where(F.col("seq") > F.lit(plan.cut))
        source = _last_changes(rows, plan, fields)
        target.merge(source, plan, batch_id)

    def _server_shape(self, db: str, name: str):
        key = (db, name)
        if key not in self._server:
            info = self.columns(db, name)
            self._server[key] = (info.columns, list(info.primary_key))
        return self._server[key]


def _regroup(tables: list[TableEvents], moves: Moves) -> list[TableEvents]:
    """The tables' events under the names their tables end the batch with (the names renamed
    away and not taken again left out: :meth:`SparkMerge._move` empties their targets)."""
    out: dict[tuple, list] = {}
    for t in tables:
        if (t.db, t.table) not in moves.vacated:
            out.setdefault((t.db, t.table), [])
        for ev in t.events:
            out.setdefault(moves.final((t.db, t.table), ev[0]), []).append(ev)
    return [TableEvents(db, name, sorted(evs, key=lambda e: e[0]))
            for (db, name), evs in sorted(out.items())]


def _relabel(df, moves: Moves):
    """*df* with each change's ``db``/``table`` the name its table ends the batch with (an
    expression on the executors)."""
    from pyspark.sql import functions as F
    db, table = F.col("db"), F.col("table")
    for name, spans in moves.spans.items():
        for since, upto, final in spans:
            cond = (F.col("db") == name[0]) & (F.col("table") == name[1])
            if since is not None:
                cond = cond & (F.col("seq") >= F.lit(since))
            if upto is not None:
                cond = cond & (F.col("seq") < F.lit(upto))
            db = F.when(cond, F.lit(final[0])).otherwise(db)
            table = F.when(cond, F.lit(final[1])).otherwise(table)
    return df.withColumns({"db": db, "table": table})


def _last_changes(rows, plan, fields=None):
    """The last change per key of *rows* (one table's row changes, after its last truncate),
    in the final shape of *plan*, with the change kind in :data:`OP_COLUMN`: the candidates
    of :mod:`streaming.sinks.plan` (a key change adds a delete of the old key at rank 0), the
    one with the highest ``(seq, rank)`` per key winning."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    cols = final_columns(plan, fields)       # [(name, after value, before value)]
    names = [c for c, _a, _b in cols]
    pk = plan.final.primary_key
    after = {c: a for c, a, _b in cols}
    before = {c: b for c, _a, b in cols}
    is_d = F.col("op") == "d"
    moved = None
    for k in pk:
        diff = ~before[k].eqNullSafe(after[k])
        moved = diff if moved is None else moved | diff
    moved = (F.col("op") == "u") & F.col("before").isNotNull() & moved
    main = F.struct(*[F.when(is_d, before[c]).otherwise(after[c]).alias(c) for c in names],
                    F.col("op").alias(OP_COLUMN), F.col("seq").alias(_SEQ),
                    F.lit(plan.RANK_CHANGE).alias(_RANK))
    gone = F.when(moved, F.struct(*[before[c].alias(c) for c in names],
                                  F.lit("d").alias(OP_COLUMN), F.col("seq").alias(_SEQ),
                                  F.lit(plan.RANK_MOVED_AWAY).alias(_RANK)))
    cands = (rows.select(F.explode(F.array(main, gone)).alias("c"))
             .where(F.col("c").isNotNull()).select("c.*"))
    w = Window.partitionBy(*[F.col(k) for k in pk]).orderBy(F.col(_SEQ).desc(),
                                                            F.col(_RANK).desc())
    return (cands.withColumn("__n", F.row_number().over(w)).where(F.col("__n") == 1)
            .drop("__n", _SEQ, _RANK))


__all__ = ["SparkMerge", "FORMATS", "SHAPE_PROPERTY"]
