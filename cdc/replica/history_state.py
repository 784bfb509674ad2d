"""A replica client's schema history, saved and given back: so that a stream that resumes (a
Spark query from its checkpoint, ``binlog-cdc tail --schema-file``) decodes from its position
with the tables' shapes *of that position*, not with today's information_schema.

:func:`saved_history` is the history of a client as of a binlog position
(:meth:`SchemaHistory.to_json`: deterministic JSON; None while the client's history is not in
use), :func:`use_history` makes a client continue from a saved (or shared) one before it reads
anything.
"""

from __future__ import annotations

from cdc.schema.history import SchemaHistory

__all__ = ["saved_history", "use_history", "restore_history"]


def saved_history(client, file: str | None, pos: int | None) -> dict | None:
    """The client's schema history as of (*file*, *pos*), before any statement there; None when
    it has none or has not needed one yet (a FULL-metadata stream that met no DDL)."""
    h = client.metadata.history
    if h is None or not h.seeded:
        return None
    return h.to_json(file, pos)


def restore_history(client, state) -> SchemaHistory | None:
    """A history made from *state* (:meth:`SchemaHistory.to_json`'s dict or text) with the
    client's options: its table filter, ``on_unparsed_ddl`` and information_schema callbacks
    (None: the client keeps no history, ``schema_history=False``)."""
    own = client.metadata.history
    if own is None:
        return None
    h = SchemaHistory.from_json(state, captures=own.captures, on_unparsed=own.on_unparsed,
                                read_table=own.read_table, at_end=own.at_end)
    h.collations.update(own.collations)
    return h


def use_history(client, history: SchemaHistory | None) -> None:
    """Make *client* (not yet iterated) follow and use *history*: a restored one, or one shared
    with other clients (a Spark driver's, across its scans). A history that is not seeded yet
    is seeded by the client when it first needs it, as its own would be."""
    if history is not None and client.metadata.history is not None:
        client.metadata.history = history
