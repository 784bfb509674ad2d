"""MySQL's binary JSON: documents (JSON columns in row events) and partial-update diffs.

One module per job, every public name re-exported here:

* :mod:`cdc.values.jsonb.binary` -- decode a binary JSON document to Python values
  (:func:`decode_json`);
* :mod:`cdc.values.jsonb.text` -- render decoded documents the way ``SELECT json_col`` prints
  them (:func:`json_to_text`), or as ``json.dumps``-safe values (:func:`to_jsonable`);
* :mod:`cdc.values.jsonb.diff` -- read and apply the JSON diffs of PARTIAL_UPDATE_ROWS events
  (binlog_row_value_options=PARTIAL_JSON): :func:`read_json_diffs`, :func:`apply_json_diffs`.

Opaque scalars decode to :class:`cdc.values.kinds.JsonOpaque` (re-exported here).
"""

from __future__ import annotations

from cdc.values.jsonb.binary import MAX_DEPTH, JsonBinaryError, decode_json, decode_json_at
from cdc.values.jsonb.diff import (INSERT, REMOVE, REPLACE, JsonDiff, JsonDiffError,
                                   apply_json_diffs, parse_json_path, read_json_diffs)
from cdc.values.jsonb.text import format_double, json_to_text, to_jsonable
from cdc.values.kinds import JsonOpaque

__all__ = [
    "decode_json", "decode_json_at", "json_to_text", "to_jsonable", "format_double",
    "read_json_diffs", "apply_json_diffs", "parse_json_path",
    "JsonDiff", "JsonOpaque", "JsonBinaryError", "JsonDiffError",
    "REPLACE", "INSERT", "REMOVE", "MAX_DEPTH",
]
