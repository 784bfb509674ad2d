"""What the Delta upserter (:mod:`streaming.sinks.delta.upserter`) refuses of the captured tables, as findings
of ``binlog-cdc check`` (:mod:`cdc.check`'s *sink_check*; the job runner's ``--check`` and its
start): a column named :data:`~streaming.sinks.delta.upserter.OP_COLUMN` (the upserter's own column in its
MERGE) and a column of a type binlog-cdc has no Delta type for. (A table without a primary key
is the keys check's, with ``upsert``.)"""

from __future__ import annotations

from typing import Callable, Sequence

from cdc.check import FAIL, PASS, Finding
from cdc.errors import SchemaError
from cdc.replica.metadata import read_columns

from streaming.sinks.delta.upserter import OP_COLUMN

__all__ = ["sink_check"]


def sink_check(query: Callable, tables: Sequence[str]) -> list[Finding]:
    """One finding: FAIL naming each column the upserter refuses, else PASS."""
    refused = []
    for name in tables:
        db, _, table = name.partition(".")
        for i, c in enumerate(read_columns(query, db, table)):
            if c.name.lower() == OP_COLUMN:
                refused.append(f"{name}.{c.name} (the name the Delta upserter gives the change "
                               f"kind in its MERGE: rename the column)")
            elif c.column_def(i) is None:
                refused.append(f"{name}.{c.name} (type {c.column_type}, which binlog-cdc has no "
                               f"Delta type for)")
    if refused:
        return [Finding(FAIL, "sink", (
            f"the Delta upserter refuses {'; '.join(refused)}; or leave the table out with "
            f"excludeTables"), SchemaError)]
    return [Finding(PASS, "sink", f"the Delta upserter takes every column of the {len(tables)} "
                                  f"captured table(s)")]
