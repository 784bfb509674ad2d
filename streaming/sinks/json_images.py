"""JSON row images (the source's ``before``/``after`` texts) into Arrow columns by pyarrow's
JSON reader, one pass per Arrow chunk over the texts where they lie (no copy: the reader takes
objects back to back): the fast path of :class:`streaming.sinks.delta.upserter.DeltaUpserter`
(a Python ``json.loads`` per image and a converter per value cost ~80 % of a micro-batch).

Only for tables whose Delta columns the reader parses exactly as the upserter's per-value path
does: integers, floats, DECIMAL (from the JSON number's digits), text, DATETIME/TIMESTAMP (ISO
8601, ``Z`` for UTC), DATE (read as text, then cast). Anything else -- binary columns (base64),
VECTOR, MySQL JSON documents, a value the reader refuses (a zero date, ``{"$binary": ...}`` text, a number in a text
column) -- raises :class:`NotFast` and the caller takes the per-value path, which also gives the
precise error where there is one.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from cdc.binlog.constants import ColumnType

__all__ = ["NotFast", "as_type", "reader_schema", "read_images"]


class NotFast(Exception):
    """These images need the per-value path."""


def _readable(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t)
            or pa.types.is_timestamp(t) or pa.types.is_date32(t))


def reader_schema(schema: pa.Schema, columns=()) -> pa.Schema | None:
    """The schema to read images of a table of *schema* with (dates as text), or None when a
    column type is not read exactly by the JSON reader; *columns* (the table's ColumnDefs): a
    MySQL JSON column is never (its image value is the document as nested JSON, its Delta value
    that document's text: the reader would give a string document ``"s"`` as ``s``)."""
    if not all(_readable(f.type) for f in schema) or \
            any(c.real_type == ColumnType.JSON for c in columns):
        return None
    return pa.schema([pa.field(f.name, pa.string()) if pa.types.is_date32(f.type) else f
                      for f in schema])


def _texts(arr) -> list[tuple[pa.Buffer, int]]:
    """The texts of each chunk of a string array (no nulls) as ``(buffer, count)``: the chunk's
    own character data, the texts back to back (no copy; the reader is told that objects need
    no newline between them)."""
    out = []
    for c in (arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]):
        if not len(c):
            continue
        offsets = np.frombuffer(c.buffers()[1], dtype=np.int32, count=len(c) + 1,
                                offset=c.offset * 4)
        data = c.buffers()[2]
        if data is None:                        # only empty texts
            raise NotFast("an empty image")
        out.append((data[int(offsets[0]):int(offsets[-1])], len(c)))
    return out


def read_images(texts, schema: pa.Schema, read_schema: pa.Schema,
                need: list[str], only_need: bool = False) -> pa.Table:
    """The images *texts* (JSON objects: a list of str, or an Arrow string array without
    nulls) as a table of *schema*. Every image must hold the columns *need* (an absent column
    reads as null, so presence is checked on the text: the source writes ``"name": `` for every
    column an image holds). *only_need*: read only those columns (the others are null; a
    column the schema lacks goes unnoticed)."""
    if not len(texts):
        return schema.empty_table()
    if only_need:
        read_schema = pa.schema([read_schema.field(k) for k in need])
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        arr = texts
        if arr.null_count or not pa.types.is_string(arr.type):
            raise NotFast("a null image or not a string array")
        sources = [(pa.BufferReader(buf), n, True) for buf, n in _texts(arr)]
    else:
        arr = pa.array(texts, pa.string())
        sources = [(io.BytesIO("\n".join(texts).encode("utf-8", "surrogatepass")), len(texts),
                    False)]
    parts = []
    for source, n, packed in sources:
        try:
            part = pj.read_json(source, read_options=pj.ReadOptions(block_size=1 << 26),
                                parse_options=pj.ParseOptions(
                                    explicit_schema=read_schema, newlines_in_values=packed,
                                    unexpected_field_behavior="ignore" if only_need else
                                    "error"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise NotFast(str(e)) from None
        if part.num_rows != n:
            raise NotFast("an image is not one JSON object")
        parts.append(part)
    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    for name in need:
        # an absent column reads as null: only the texts of the nulls can lack it
        col = table.column(name)
        if col.null_count and not pc.all(pc.match_substring(
                pc.filter(arr, pc.is_null(col)), json.dumps(name) + ": ")).as_py():
            raise NotFast(f"an image lacks column {name}")
    return pa.Table.from_arrays([as_type(table.column(f.name), f.type)
                                 if f.name in read_schema.names else pa.nulls(len(texts), f.type)
                                 for f in schema], schema=schema)


def as_type(col, type: pa.DataType):
    """*col* cast to *type* where it differs; :class:`NotFast` when Arrow cannot cast it."""
    if col.type == type:
        return col
    try:
        return pc.cast(col, type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise NotFast(str(e)) from None
