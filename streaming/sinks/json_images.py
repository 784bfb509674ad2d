"""JSON row images (the source's ``before``/``after`` texts) into Arrow columns by pyarrow's
JSON reader, one pass per Arrow chunk over the texts where they lie (no copy: the reader takes
objects back to back): the fast path of :class:`streaming.sinks.delta.upserter.DeltaUpserter`
(a Python ``json.loads`` per image and a converter per value cost ~80 % of a micro-batch).

Only for tables whose Delta columns the reader parses exactly as the upserter's per-value path
does: integers, floats, DECIMAL (from the JSON number's digits), text, DATETIME/TIMESTAMP (ISO
8601, ``Z`` for UTC), DATE (read as text, then cast), binary columns (their base64 read as text,
then decoded a column at a time), GEOMETRY (``{"srid": n, "wkb": base64}`` read as a struct, then
joined into the SRID's four little-endian bytes and the WKB). Anything else -- VECTOR, MySQL JSON
documents, a value the reader refuses (a zero date, ``{"$binary": ...}`` text, a number in a
text column, base64 that is not the encoder's) -- raises :class:`NotFast` and the caller takes the
per-value path, which also gives the precise error where there is one.
"""

from __future__ import annotations

import io
import json
import os
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from cdc.binlog.constants import ColumnType
from cdc.values.jsonb import json_to_text
from cdc.values.render import document_of_image

__all__ = ["NotFast", "as_type", "document_text", "parse_image", "reader_schema",
           "read_images"]


class NotFast(Exception):
    """These images need the per-value path."""


class _ExponentNumber(Decimal):
    """A JSON image's number written with an exponent (``1e300``): only doubles are (FLOAT and
    DOUBLE columns, doubles in MySQL JSON documents). Exact like any Decimal; a document renders
    it back as the double it is (MySQL's ``1e300``, not ``1000...0``)."""

    __slots__ = ()


def _image_number(text: str) -> Decimal:
    return _ExponentNumber(text) if "e" in text or "E" in text else Decimal(text)


parse_image = json.JSONDecoder(parse_float=_image_number).decode
"""A JSON image (the source's ``before``/``after`` text) as a dict; numbers with a fraction or
an exponent exact as ``Decimal``."""


def _document(v):
    """A MySQL JSON column's value of a parsed image as the decoded document it renders from."""
    t = type(v)
    if t is dict:
        return {k: _document(x) for k, x in v.items()}
    if t is list:
        return [_document(x) for x in v]
    if t is _ExponentNumber:
        return float(v)
    return v


def document_text(v) -> str:
    """A MySQL JSON column's (non-null) value of a parsed image as its Delta value: the
    document's text as MySQL prints it."""
    return json_to_text(_document(document_of_image(v)))


def _readable(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_boolean(t)
            or pa.types.is_timestamp(t) or pa.types.is_date32(t) or pa.types.is_binary(t))


_GEOMETRY = pa.struct([("srid", pa.int64()), ("wkb", pa.string())])
"""How the reader reads a GEOMETRY value of an image."""


_DOCUMENT = {b"binlog_cdc": b"json document"}
"""The metadata of a reader schema's field that is a MySQL JSON column."""


def _read_as(f: pa.Field, col) -> pa.Field:
    """The field the reader reads a column of Delta field *f* (source column *col*) as."""
    if col is not None and col.real_type == ColumnType.JSON:
        return f.with_metadata(_DOCUMENT)
    if pa.types.is_binary(f.type):
        return pa.field(f.name, _GEOMETRY if col is not None and
                        col.real_type == ColumnType.GEOMETRY else pa.string())
    return pa.field(f.name, pa.string()) if pa.types.is_date32(f.type) else f


def reader_schema(schema: pa.Schema, columns=()) -> pa.Schema | None:
    """The schema to read images of a table of *schema* with (dates and base64 as text,
    GEOMETRY as a struct), or None when a column type is not read exactly by the JSON reader;
    *columns*: the table's ColumnDefs. A MySQL JSON column's image value is the document as
    nested JSON and its Delta value that document's text, which the reader cannot give: its
    field is marked (:data:`_DOCUMENT`) and :func:`read_images` takes it from each image parsed
    by :func:`parse_image`, the other columns still from the reader."""
    if not all(_readable(f.type) for f in schema):
        return None
    by_name = {c.name: c for c in columns}
    return pa.schema([_read_as(f, by_name.get(f.name)) for f in schema])


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
    documents = [f.name for f in read_schema if f.metadata == _DOCUMENT]
    if documents:
        read_schema = pa.schema([f for f in read_schema if f.metadata != _DOCUMENT])
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        arr = texts
        if arr.null_count or not pa.types.is_string(arr.type):
            raise NotFast("a null image or not a string array")
        sources = [(pa.BufferReader(buf), n, True) for buf, n in _texts(arr)]
    else:
        arr = pa.array(texts, pa.string())
        sources = [(io.BytesIO("\n".join(texts).encode("utf-8", "surrogatepass")), len(texts),
                    False)]
    def read(source_n_packed) -> pa.Table:
        source, n, packed = source_n_packed
        try:
            part = pj.read_json(source, read_options=pj.ReadOptions(block_size=1 << 26,
                                                                    use_threads=False),
                                parse_options=pj.ParseOptions(
                                    explicit_schema=read_schema, newlines_in_values=packed,
                                    unexpected_field_behavior="ignore" if only_need or documents
                                    else "error"))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise NotFast(str(e)) from None
        if part.num_rows != n:
            raise NotFast("an image is not one JSON object")
        return part
    # the chunks side by side (the reader lets go of the GIL; one block per chunk)
    parts = [read(sources[0])] if len(sources) == 1 else list(_pool().map(read, sources))
    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    for name in need:
        # an absent column reads as null: only the texts of the nulls can lack it
        if name in documents:
            continue
        col = table.column(name)
        if col.null_count and not pc.all(pc.match_substring(
                pc.filter(arr, pc.is_null(col)), json.dumps(name) + ": ")).as_py():
            raise NotFast(f"an image lacks column {name}")
    if documents:
        columns = _documents(texts, documents, [k for k in need if k in documents],
                             None if only_need else set(schema.names))
        table = table.drop_columns([k for k in documents if k in table.column_names])
        for name in documents:
            table = table.append_column(name, columns[name])
    return pa.Table.from_arrays([as_type(table.column(f.name), f.type)
                                 if f.name in table.column_names else pa.nulls(len(texts), f.type)
                                 for f in schema], schema=schema)


_POOL = None


def _pool():
    """The threads :func:`read_images` reads an array's chunks with (one per core)."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor
        _POOL = ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1)),
                                   thread_name_prefix="binlog-cdc-json")
    return _POOL


def _documents(texts, names: list[str], need: list[str], known: set | None) -> dict:
    """The MySQL JSON columns *names* of the images *texts*, each image parsed whole: their
    Delta values (:func:`document_text`); :class:`NotFast` when an image lacks a column of
    *need* or (*known*: the table's columns) holds one the table lacks."""
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = texts.to_pylist()
    values: dict[str, list] = {name: [] for name in names}
    for text in texts:
        row = parse_image(text)
        if type(row) is not dict:
            raise NotFast("an image is not one JSON object")
        if known is not None and not known.issuperset(row):
            raise NotFast("an image holds a column the table lacks")
        for name in names:
            v = row.get(name)
            if v is None and name in need and name not in row:
                raise NotFast(f"an image lacks column {name}")
            values[name].append(None if v is None else document_text(v))
    return {name: pa.array(v, pa.string()) for name, v in values.items()}


def as_type(col, type: pa.DataType):
    """*col* cast to *type* where it differs (base64 text and GEOMETRY structs to binary
    decoded); :class:`NotFast` when Arrow cannot cast it."""
    if col.type == type:
        return col
    if pa.types.is_binary(type) and pa.types.is_string(col.type):
        return base64_column(col)
    if pa.types.is_binary(type) and col.type == _GEOMETRY:
        return _geometry(col)
    try:
        return pc.cast(col, type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise NotFast(str(e)) from None


_SEXTETS = np.full(256, 255, np.uint8)
_SEXTETS[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                       np.uint8)] = np.arange(64, dtype=np.uint8)
_PAD = 64
_SEXTETS[ord("=")] = _PAD


def _offsets(arr: pa.Array) -> np.ndarray:
    return np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1,
                         offset=arr.offset * 4)


def _binary(offsets: np.ndarray, data: np.ndarray, valid) -> pa.Array:
    """A binary array of *offsets* (from 0) into *data*, null where *valid* (a boolean array,
    or None) is false."""
    n = len(offsets) - 1
    array = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                   pa.py_buffer(data)])
    if valid is None:
        return array
    return pc.if_else(valid, array, pa.nulls(n, pa.binary()))


def base64_column(col) -> pa.Array:
    """A column of base64 texts (as :func:`base64.b64encode` writes them: padded, no newlines)
    decoded to binary at once -- four characters are three bytes, less the padding, so the
    texts back to back decode group by group; :class:`NotFast` for any other text."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not len(arr):
        return pa.array([], pa.binary())
    offsets = _offsets(arr).astype(np.int64)
    lengths = np.diff(offsets)
    if (lengths % 4).any():
        raise NotFast("base64 of a length not a multiple of four")
    data = arr.buffers()[2]
    chars = (np.frombuffer(data, np.uint8)[offsets[0]:offsets[-1]] if data is not None
             else np.empty(0, np.uint8))
    sextets = _SEXTETS[chars].reshape(-1, 4)
    if (sextets == 255).any():
        raise NotFast("a character that is not base64")
    pad = sextets == _PAD
    pads = pad.sum(axis=1)
    group_at = (offsets - offsets[0]) // 4          # each text's first group
    last = np.zeros(len(sextets), bool)
    last[group_at[1:][lengths > 0] - 1] = True
    if (pad[:, 0] | pad[:, 1] | (pad[:, 2] & ~pad[:, 3])).any() or \
            (pads.astype(bool) & ~last).any():
        raise NotFast("base64 padding inside a text")
    s = np.where(pad, 0, sextets).astype(np.uint32)
    n = (s[:, 0] << 18) | (s[:, 1] << 12) | (s[:, 2] << 6) | s[:, 3]
    triples = np.empty((len(s), 3), np.uint8)
    triples[:, 0], triples[:, 1], triples[:, 2] = n >> 16, (n >> 8) & 255, n & 255
    decoded = triples[np.arange(3) < (3 - pads)[:, None]]
    padded = np.concatenate([[0], np.cumsum(pads)])
    return _binary(group_at * 3 - padded[group_at], decoded,
                   pc.is_valid(arr) if arr.null_count else None)


def _geometry(col) -> pa.Array:
    """GEOMETRY structs ``{srid, wkb}`` as the bytes Delta stores: the SRID as four
    little-endian bytes, then the WKB."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    srid, wkb = pc.struct_field(arr, [0]), pc.struct_field(arr, [1])
    valid = pc.is_valid(arr)
    if pc.any(pc.and_(valid, pc.or_(pc.is_null(srid), pc.is_null(wkb)))).as_py():
        raise NotFast("a GEOMETRY without srid or wkb")
    srid = as_type(pc.fill_null(srid, 0), pa.uint32()).to_numpy().astype("<u4")
    wkb = base64_column(pc.fill_null(wkb, ""))
    w_offsets = _offsets(wkb).astype(np.int64)
    w_data = wkb.buffers()[2]
    w_bytes = (np.frombuffer(w_data, np.uint8)[w_offsets[0]:w_offsets[-1]] if w_data is not None
               else np.empty(0, np.uint8))
    offsets = w_offsets - w_offsets[0] + 4 * np.arange(len(arr) + 1)
    out = np.empty(offsets[-1], np.uint8)
    starts = offsets[:-1]
    out[(starts[:, None] + np.arange(4)).ravel()] = srid.view(np.uint8)
    body = np.ones(len(out), bool)
    body[(starts[:, None] + np.arange(4)).ravel()] = False
    out[body] = w_bytes
    return _binary(offsets, out, valid if arr.null_count else None)
