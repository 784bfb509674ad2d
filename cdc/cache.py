"""A bounded cache of things built once and reused (generated readers and renderers)."""

from __future__ import annotations

from typing import Any, Callable, Hashable


class BoundedCache(dict):
    """A dict that empties itself when it would grow past *limit* entries: for generated code
    keyed by a table's shape, where a long-running stream may see many shapes over time."""

    def __init__(self, limit: int = 512):
        super().__init__()
        self.limit = limit

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        value = self.get(key)
        if value is None:
            value = build()
            if len(self) >= self.limit:
                self.clear()
            self[key] = value
        return value
