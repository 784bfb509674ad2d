"""One change as a JSON line: the object of ``decode --format jsonl`` and
``tail --format jsonl``.

``op`` is ``c``/``u``/``d`` for a row inserted/updated/deleted, ``t`` for a ``TRUNCATE TABLE``
(``before``, ``after`` and ``key`` null; ``row`` its index among the transaction's changes),
``s`` for a DDL statement's schema change (``tail --schema-changes``): like ``t``, and a last key
``schema_change`` holding the record (:mod:`cdc.schema.changes`)."""

from __future__ import annotations

from cdc.values.render import row_json, to_json_text


def image_json(change, values) -> str:
    """One image (*values*: ``change.before`` or ``change.after``) of a change as a JSON object
    text, rendered with the table's column types (:func:`cdc.values.render.row_json`)."""
    if values is None:
        return "null"
    return row_json(change.columns, values, change.table_map.columns)


def change_json(change) -> str:
    """One change (:class:`~cdc.binlog.transactions.RowChange`, a truncate too) as a JSON line
    (the CLI's jsonl format)."""
    tx = change.tx
    key = change.key()
    return ("{" f'"op": "{change.op}", "db": {to_json_text(change.schema)}, '
            f'"table": {to_json_text(change.table)}, '
            f'"before": {image_json(change, change.before)}, '
            f'"after": {image_json(change, change.after)}, '
            f'"key": {to_json_text(key)}, "file": {to_json_text(tx.file)}, "pos": {to_json_text(tx.pos)}, '
            f'"end_pos": {to_json_text(tx.end_pos)}, "gtid": {to_json_text(tx.gtid)}, '
            f'"xid": {to_json_text(tx.xid)}, "row": {change.index}, "ts": {tx.timestamp}, '
            f'"server_id": {tx.server_id}'
            + (f', "schema_change": {change.schema_change.to_json()}'
               if change.schema_change is not None else "") + "}")
