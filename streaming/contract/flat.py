"""The flat layout (option ``layout=flat``, with ``table=db.t``): the table's own columns at the
top level, ready for a MERGE / AutoCDC flow keyed on the table's primary key.

Each row of the typed envelope (:mod:`streaming.contract.spark_schema`) becomes one row (two for an update
that changes the primary key) of this schema:

==============  =====================  ===========================================================
column          Spark type             meaning
==============  =====================  ===========================================================
*the table's    as in typed mode       the after image; for a delete (``d``) the before image
columns*
``_cdc_op``     string                 ``c`` insert, ``u`` update, ``d`` delete, ``r`` snapshot
                                       row (an upsert); a truncate row (``t``, where the source
                                       emits one) has every table column null
``_cdc_seq``    string                 the envelope's ``seq`` + ``":0"``; an update that changes
                                       the primary key gives ``seq:0`` (``d``: the old key, its
                                       before image) then ``seq:1`` (``u``: the new key, its
                                       after image). Sorts as text in change order: use it as
                                       ``sequence_by``
``_cdc_ts_ms``  long                   commit time of the transaction, epoch milliseconds
``_cdc_db``     string                 database
``_cdc_table``  string                 table
``_cdc_source`` struct                 the envelope's ``source`` (server_id, file, pos, gtid,
                                       row, xid)
==============  =====================  ===========================================================

A table column whose name starts with ``_cdc_`` and clashes with these is an error. Upserts
carry the whole row only with ``binlog_row_image=FULL`` (a MINIMAL after image leaves the
columns it does not hold null). The split works on the Arrow record batches the source yields
(:func:`flatten_batches`), so the two halves of a key change always travel together.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import LongType, StringType, StructField, StructType

from cdc.errors import SchemaError
from streaming._compat import to_arrow_schema
from streaming.contract.spark_schema import SOURCE_TYPE, image_struct

#: The change metadata columns of the flat layout, after the table's columns.
META_COLUMNS: dict[str, object] = {
    "_cdc_op": StringType(),
    "_cdc_seq": StringType(),
    "_cdc_ts_ms": LongType(),
    "_cdc_db": StringType(),
    "_cdc_table": StringType(),
    "_cdc_source": SOURCE_TYPE,
}


def flat_schema(columns) -> StructType:
    """The flat layout's schema for a table of *columns* (:class:`~cdc.values.types.ColumnDef`)."""
    image = image_struct(columns)
    clash = [f.name for f in image.fields if f.name.lower() in META_COLUMNS]
    if clash:
        raise SchemaError(f"layout=flat: the table has column(s) {', '.join(clash)}, which the "
                          f"flat layout uses for change metadata; read it with the envelope "
                          f"layout (no option layout)")
    return StructType(list(image.fields) + [StructField(n, t) for n, t in META_COLUMNS.items()])


def key_names(columns) -> list[str]:
    """The primary-key column names of *columns* (empty: the table has none)."""
    return [c.name for c in columns if getattr(c, "primary_key", False)]


def _distinct(a: pa.Array, b: pa.Array) -> pa.Array:
    """Null-safe ``a IS DISTINCT FROM b``."""
    ne = pc.fill_null(pc.not_equal(a, b), False)
    return pc.or_(ne, pc.xor(pc.is_null(a), pc.is_null(b)))


def flatten(batch: pa.RecordBatch, keys: list[str]) -> pa.RecordBatch:
    """One typed-envelope record batch in the flat layout (*keys*: the primary-key columns)."""
    op = batch.column("op")
    before = batch.column("before").flatten()     # children, with the struct's nulls
    after = batch.column("after").flatten()
    fields = list(batch.schema.field("after").type)
    is_delete = pc.fill_null(pc.equal(op, "d"), False)
    image = [pc.if_else(is_delete, b, a) for b, a in zip(before, after)]
    seq = batch.column("seq")
    meta = [op, pc.binary_join_element_wise(seq, ":0", ""), batch.column("ts_ms"),
            batch.column("db"), batch.column("table"), batch.column("source")]
    names = [f.name for f in fields] + list(META_COLUMNS)
    out = pa.RecordBatch.from_arrays(image + meta, names=names)
    if not keys or not len(batch):
        return out
    where = {f.name: j for j, f in enumerate(fields)}
    split = None
    for k in keys:
        d = _distinct(before[where[k]], after[where[k]])
        split = d if split is None else pc.or_(split, d)
    split = pc.and_(pc.fill_null(pc.equal(op, "u"), False), split)
    if not pc.any(split).as_py():
        return out
    # the old key's delete: the before image, op d, seq:0; the upsert of the new key gets seq:1
    idx = pc.indices_nonzero(split)
    olds = pa.RecordBatch.from_arrays(
        [b.take(idx) for b in before] +
        [pa.array(["d"] * len(idx), pa.string()), pc.binary_join_element_wise(
            seq.take(idx), ":0", "")] + [m.take(idx) for m in meta[2:]], names=names)
    seq1 = pc.if_else(split, pc.binary_join_element_wise(seq, ":1", ""), meta[1])
    out = out.set_column(len(fields) + 1, names[len(fields) + 1], seq1)
    n = len(batch)
    order = []
    k = 0
    for i, s in enumerate(split.to_pylist()):
        if s:
            order.append(n + k)
            k += 1
        order.append(i)
    both = pa.Table.from_batches([out, olds.cast(out.schema)])
    return both.take(pa.array(order, pa.int64())).combine_chunks().to_batches()[0]


def flatten_batches(batches: Iterable[pa.RecordBatch], columns) -> Iterator[pa.RecordBatch]:
    """The flat layout of a reader's typed-envelope batches (the table of *columns*)."""
    keys = key_names(columns)
    schema = to_arrow_schema(flat_schema(columns), timezone="UTC")
    for b in batches:
        f = flatten(b, keys)
        yield pa.RecordBatch.from_arrays(f.columns, schema=schema)
