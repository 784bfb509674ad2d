"""Delta tables through delta-rs, no JVM: :mod:`.upserter` (:class:`DeltaUpserter`, for
``foreachBatch``), :mod:`.ddl` (schema changes as Delta schema evolution), :mod:`.types` (Delta and
Arrow types of MySQL columns)."""

from __future__ import annotations

__all__ = ["DeltaUpserter"]


def __getattr__(name: str):
    if name == "DeltaUpserter":
        from streaming.sinks.delta.upserter import DeltaUpserter
        return DeltaUpserter
    raise AttributeError(f"module 'streaming.sinks.delta' has no attribute {name!r}")
