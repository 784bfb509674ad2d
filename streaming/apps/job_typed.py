"""Which table the job runner (:mod:`streaming.apps.job`) streams in typed mode.

Typed mode (the source's option ``table``: row images as Arrow structs from the tasks to the
Delta write, no JSON on the way) is the faster path into Delta, for one table. A job whose
``[source]`` names exactly one table (``includeTables = "shop.orders"``: no glob, no
``excludeTables``, no ``signalTable``, no ``table`` or ``layout`` of its own) streams it typed
when the server has that table under one spelling and typed mode can map every column; any other
job reads JSON images as configured. The Delta tables are the same either way.

Typed mode stops its query at a DDL statement that changes the table's shape
(:class:`cdc.errors.ShapeChangedError`); the job then starts the query again from its checkpoint
(:func:`shape_changed`): it reads the new shape and re-runs that micro-batch exactly once.
"""

from __future__ import annotations

from cdc.errors import ConfigurationError, SchemaError, ShapeChangedError

__all__ = ["named_table", "typed_table", "with_typed_table", "shape_changed"]

_GLOB = frozenset("*?[]")


def named_table(source: dict[str, str]) -> tuple[str, str] | None:
    """``(db, table)`` as the job's ``[source]`` options name their one table exactly, or None
    (several tables, globs, exclusions, a signal table, or typed mode/layout chosen already)."""
    lower = {k.lower(): v for k, v in source.items()}
    if "table" in lower or "layout" in lower or "signaltable" in lower \
            or (lower.get("excludetables") or "").strip():
        return None
    names = [n.strip() for n in (lower.get("includetables") or "").split(",") if n.strip()]
    if len(names) != 1:
        return None
    parts = names[0].split(".")
    if len(parts) != 2 or any(not p or _GLOB & set(p) or "`" in p for p in parts):
        return None
    return parts[0], parts[1]


def typed_table(source: dict[str, str], config) -> str | None:
    """``db.table`` in the server's spelling when the job streams it in typed mode (the
    :func:`named_table`, on the server under one spelling -- ``includeTables`` matches names
    case-insensitively --, every column with a Spark type); else None. *config*: the source's
    :class:`~cdc.replica.config.ReplicaConfig` (one short connection)."""
    named = named_table(source)
    if named is None:
        return None
    from cdc.replica.sql import connect
    from streaming.contract.tables import columns_from_server
    conn = connect(config)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE "
                        "LOWER(TABLE_SCHEMA) = LOWER(%s) AND LOWER(TABLE_NAME) = LOWER(%s) "
                        "AND TABLE_TYPE = 'BASE TABLE'", named)
            found = [(str(db), str(t)) for db, t in cur.fetchall()]
        if len(found) != 1 or any("." in part for part in found[0]):
            return None
        try:
            columns_from_server(conn, *found[0])
        except (ConfigurationError, SchemaError):
            return None
        return ".".join(found[0])
    finally:
        conn.close()


def with_typed_table(source: dict[str, str], table: str | None) -> dict[str, str]:
    """The ``[source]`` options the job's query reads with: *table* (from :func:`typed_table`)
    as option ``table`` instead of ``includeTables``; unchanged when *table* is None."""
    if table is None:
        return dict(source)
    out = {k: v for k, v in source.items() if k.lower() != "includetables"}
    out["table"] = table
    return out


def shape_changed(error: BaseException) -> ShapeChangedError | None:
    """The :class:`ShapeChangedError` a typed query failed with (*error*: what Spark raised,
    the Python error inside it as text), else None."""
    from streaming.apps.runtime import cdc_error
    found = cdc_error(error)
    return found if isinstance(found, ShapeChangedError) else None
