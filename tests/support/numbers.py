"""Rows numbered 1..n in plain SQL, on every server: MariaDB's ``seq_1_to_n`` tables (the
Sequence engine) do not exist on MySQL."""

from __future__ import annotations

_DIGITS = "(SELECT 0 AS d UNION ALL " + " UNION ALL ".join(f"SELECT {i}" for i in range(1, 10)) \
    + ")"


def seq_rows(n: int) -> str:
    """A derived table ``(...) AS s`` with one column ``seq``: 1, 2, ... *n* (unordered), for
    ``INSERT ... SELECT f(seq) FROM {seq_rows(n)}``."""
    places = max(1, len(str(max(n - 1, 0))))
    number = " + ".join(f"{10 ** i} * d{i}.d" for i in range(places))
    joins = " CROSS JOIN ".join(f"{_DIGITS} AS d{i}" for i in range(places))
    return f"(SELECT 1 + {number} AS seq FROM {joins} WHERE {number} < {int(n)}) AS s"
