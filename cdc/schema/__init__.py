"""The schema history: each captured table's columns, types, character sets, ENUM/SET members,
signedness and key as of any binlog position (sans-IO, no Spark).

* :mod:`cdc.schema.ddl` -- :func:`~cdc.schema.ddl.parse_ddl`: what a DDL statement of a QUERY
  event does to tables (sqlglot's MySQL tokenizer, our grammar: :mod:`cdc.schema.grammar`,
  :mod:`cdc.schema.sqltext`).
* :mod:`cdc.schema.columns` -- :class:`~cdc.schema.columns.ServerColumn` (a column as
  information_schema shows it), built from DDL too, and compared with TABLE_MAP events.
* :mod:`cdc.schema.tables` -- :class:`~cdc.schema.tables.TableSchema`, one version of a table,
  and the column/key changes of CREATE/ALTER TABLE.
* :mod:`cdc.schema.history` -- :class:`~cdc.schema.history.SchemaHistory`: seeded from
  information_schema at a stream's start, then following the binlog's DDL.

:class:`cdc.replica.metadata.TableMetadata` completes the TABLE_MAPs that lack metadata from it.
"""

from cdc.schema.columns import ServerColumn
from cdc.schema.ddl import parse_ddl
from cdc.schema.history import ON_UNPARSED_DDL, SchemaHistory, Unknown, point_key
from cdc.schema.tables import TableSchema

__all__ = ["SchemaHistory", "TableSchema", "Unknown", "ServerColumn", "parse_ddl", "point_key",
           "ON_UNPARSED_DDL"]
