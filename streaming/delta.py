"""``from streaming.delta import DeltaUpserter``: the delta-rs upserter, which lives in
:mod:`streaming.sinks.delta.upserter`."""

from streaming.sinks.delta.upserter import DeltaUpserter

__all__ = ["DeltaUpserter"]
