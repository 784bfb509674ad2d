"""What :class:`~streaming.sinks.delta.upserter.DeltaUpserter` collects of a typed stream's
micro-batch: only what its columns tell, the rest filled in on the driver.

A typed stream (the source's option ``table``) names in its schema the one table its rows are
changes of (:func:`streaming.contract.spark_schema.image_table`), so ``db`` and ``table`` are not
collected row by row, only whether a row is of another table (a union of typed streams of
tables of the same shape keeps the first one's schema): then the batch is collected whole after
all. A before image is read for its primary key alone (a delete, and the delete of a key an
update moved away from, match by key; the MERGE reads no other column of them), so only the
key's fields of ``before`` are collected. Spark's ``toArrow`` of a row's strings and of its
(null, for inserts and snapshot rows) ``before`` struct cost the JVM about as much as the row's
after image.

:func:`narrow_columns` gives the columns to select (``selectExpr``), :func:`widen` the Arrow
table of them as the changes :meth:`~streaming.sinks.delta.upserter.DeltaUpserter.upsert_arrow`
takes: ``db`` and ``table`` constant, ``before`` a struct of the image's fields holding the key
(the others null), present for updates and deletes (the source gives a before image exactly for
those ops); ``schema_change`` (option ``includeSchemaChanges``) collected as it is.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from streaming.contract.envelope import SCHEMA_CHANGE

__all__ = ["narrow_columns", "widen"]

_KEY = "_cdc_before_"                   # the collected key fields of before: _cdc_before_<i>
_WITH_BEFORE = pa.array(["u", "d"], pa.string())


def narrow_columns(df, db: str, table: str, names: list[str], key: list[str]) -> list[str] | None:
    """The SQL expressions (``df.selectExpr``) of *df* (a typed stream's micro-batch of table
    ``db.table``, whose images have the fields *names*, the table's columns) to collect for a
    table of primary key *key*; None when the images' fields are not *names* (collect the whole
    changes)."""
    image = df.schema["before"].dataType
    if [f.name for f in getattr(image, "fields", ())] != list(names):
        return None
    # SQL text, one call: Column objects cost ~15 Py4J round trips each (~10 ms a batch)
    return ["op", "after", "seq"] + [f"`before`.{_quote(k)} AS {_KEY}{names.index(k)}"
                                     for k in key] + \
        [f"NOT (`db` <=> {_literal(db)} AND `table` <=> {_literal(table)}) AS {_OTHER}"] + \
        ([SCHEMA_CHANGE] if SCHEMA_CHANGE in df.columns else [])


_OTHER = "_cdc_other_table"             # true: a row of another table than the schema's


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def widen(collected: pa.Table, db: str, table: str) -> pa.Table | None:
    """The changes (columns ``op, db, table, before, after, seq``) of the Arrow table of
    :func:`narrow_columns` of table ``db.table``; None when some are of another table."""
    if pc.any(collected.column(_OTHER)).as_py():
        return None
    image = collected.schema.field("after").type
    changes = SCHEMA_CHANGE in collected.column_names      # includeSchemaChanges: op 's' rows
    schema = pa.schema([("op", pa.string()), ("db", pa.string()), ("table", pa.string()),
                        ("before", image), ("after", image), ("seq", pa.string())]
                       + ([collected.schema.field(SCHEMA_CHANGE)] if changes else []))
    # (UPSERT_FIELDS, in order, then schema_change: DeltaUpserter.columns_of)
    keys = {int(name[len(_KEY):]): name for name in collected.column_names
            if name.startswith(_KEY)}
    out = []
    for b in collected.to_batches():
        n = b.num_rows
        op = b.column("op")
        has_before = pc.fill_null(pc.is_in(op, value_set=_WITH_BEFORE), False)
        before = pa.StructArray.from_arrays(
            [b.column(keys[i]) if i in keys else pa.nulls(n, f.type)
             for i, f in enumerate(image)], fields=list(image), mask=pc.invert(has_before))
        out.append(pa.RecordBatch.from_arrays(
            [op, pa.repeat(pa.scalar(db, pa.string()), n),
             pa.repeat(pa.scalar(table, pa.string()), n), before, b.column("after"),
             b.column("seq")] + ([b.column(SCHEMA_CHANGE)] if changes else []), schema=schema))
    return pa.Table.from_batches(out, schema=schema)
