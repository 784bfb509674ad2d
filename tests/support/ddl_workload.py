"""The schema-history workload (issue 15): ~34 DDL statements interleaved with DML on 3 tables
(add/drop/rename/reorder columns, type and charset changes, primary keys added and dropped, a
table renamed, truncated, dropped and recreated, partitioning), recording each row change as
SELECT shows it right after it was written. Used by tests/live/test_schema_history_live.py (rows
decoded with the columns of their time) and test_schema_delta_kills.py (Delta follows it)."""

from __future__ import annotations

import datetime as dt
import decimal


def norm(v):
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.replace(tzinfo=None)
    if isinstance(v, float):
        return decimal.Decimal(str(v))
    return v


class Recorder:
    """Runs the workload, recording each row change as SELECT shows the row right after (and,
    for updates and deletes, right before) it was written."""

    def __init__(self, server, db: str):
        self.conn = server.connect(database=db)
        self.expected: list[tuple] = []
        self.ddl = 0

    def sql(self, statement: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute(statement)
        self.ddl += 1

    def _row(self, table: str, where: str):
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table} WHERE {where}")
            rows = cur.fetchall()
            names = [d[0] for d in cur.description]
        assert len(rows) == 1, (table, where, rows)
        return names, tuple(norm(v) for v in rows[0])

    def insert(self, table: str, values: str, where: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table} VALUES {values}")
        names, row = self._row(table, where)
        self.expected.append(("c", table, names, None, row))

    def update(self, table: str, assign: str, where: str, where_after: str | None = None):
        names, before = self._row(table, where)
        with self.conn.cursor() as cur:
            cur.execute(f"UPDATE {table} SET {assign} WHERE {where}")
        _names, after = self._row(table, where_after or where)
        self.expected.append(("u", table, names, before, after))

    def delete(self, table: str, where: str) -> None:
        names, before = self._row(table, where)
        with self.conn.cursor() as cur:
            cur.execute(f"DELETE FROM {table} WHERE {where}")
        self.expected.append(("d", table, names, before, None))


def run_workload(r: Recorder, *, b_unique_key: bool = False) -> None:
    """*b_unique_key*: table ``b`` has a UNIQUE key on its NOT NULL column from the start, so it
    always has a key a row can be matched by (an upsert target needs one) while its primary key
    is added and dropped."""
    r.sql("CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20) CHARACTER SET latin1, "
          "qty SMALLINT UNSIGNED)")                                                          # 1
    r.sql("CREATE TABLE b (k INT NOT NULL, v TEXT, e ENUM('x','y','z')"
          + (", UNIQUE KEY bk (k))" if b_unique_key else ")"))                              # 2
    r.sql("CREATE TABLE c (id BIGINT UNSIGNED PRIMARY KEY, amount DECIMAL(8,2), "
          "note CHAR(4)) DEFAULT CHARSET=utf8mb4")                                           # 3
    r.insert("a", "(1, 'café', 65535)", "id = 1")
    r.insert("b", "(1, 'hello ✓', 'y')", "k = 1")
    r.insert("c", "(18446744073709551615, 12.34, 'ab')", "id = 18446744073709551615")
    r.sql("ALTER TABLE a ADD COLUMN extra INT AFTER id")                                     # 4
    r.insert("a", "(2, 7, 'b', 3)", "id = 2")
    r.sql("ALTER TABLE a DROP COLUMN qty")                                                   # 5
    r.update("a", "name = 'crème'", "id = 1")
    r.sql("ALTER TABLE a RENAME COLUMN name TO title")                                       # 6
    r.insert("a", "(3, NULL, 'naïve')", "id = 3")
    r.sql("ALTER TABLE a MODIFY title VARCHAR(30) CHARACTER SET utf8mb4 FIRST")              # 7
    r.insert("a", "('ü✓😀', 4, 40)", "id = 4")
    r.sql("ALTER TABLE b ADD PRIMARY KEY (k)")                                               # 8
    r.update("b", "v = 'bye'", "k = 1")
    r.sql("ALTER TABLE b CHANGE v body MEDIUMTEXT CHARACTER SET latin1")                     # 9
    r.insert("b", "(2, 'señor', 'z')", "k = 2")
    r.sql("ALTER TABLE b MODIFY e ENUM('x','y','z','w')")                                    # 10
    r.insert("b", "(3, 'w!', 'w')", "k = 3")
    r.sql("ALTER TABLE c CONVERT TO CHARACTER SET latin1")                                   # 11
    r.insert("c", "(5, -1.5, 'ñ')", "id = 5")
    r.sql("ALTER TABLE c ADD COLUMN tag VARCHAR(5) FIRST, ADD COLUMN n2 INT AFTER amount")   # 12
    r.insert("c", "('t', 6, 2.5, 9, 'x')", "id = 6")
    r.sql("RENAME TABLE c TO c2")                                                            # 13
    r.insert("c2", "('u', 7, 3.5, 10, 'y')", "id = 7")
    r.sql("ALTER TABLE c2 RENAME TO c")                                                      # 14
    r.delete("c", "id = 5")
    r.sql("TRUNCATE TABLE a")                                                                # 15
    r.expected.append(("t", "a", [], None, None))       # a truncate is a change too (op 't')
    r.insert("a", "('again', 5, 50)", "id = 5")
    r.sql("ALTER TABLE b DROP PRIMARY KEY")                                                  # 16
    r.insert("b", "(4, 'no key', 'x')", "k = 4")
    r.sql("ALTER TABLE b ADD UNIQUE KEY uk (k)")                                             # 17
    r.update("b", "e = 'z'", "k = 4")
    r.sql("DROP TABLE a")                                                                    # 18
    r.sql("CREATE TABLE a (id INT PRIMARY KEY, title TEXT, flag TINYINT)")                   # 19
    r.insert("a", "(1, 'recreated', -5)", "id = 1")
    r.sql("ALTER TABLE a ADD COLUMN d DATETIME(3), ALGORITHM=INPLACE")                       # 20
    r.insert("a", "(2, 'dated', 1, '2024-02-29 23:59:58.123')", "id = 2")
    r.update("a", "flag = 5", "id = 1")
    r.sql("ALTER TABLE a MODIFY flag TINYINT UNSIGNED")                                      # 21
    r.insert("a", "(3, 'unsigned', 200, NULL)", "id = 3")
    r.sql("ALTER TABLE c MODIFY note VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")  # 22
    r.update("c", "note = 'ωmega'", "id = 6")
    r.sql("ALTER TABLE c DROP COLUMN tag, DROP COLUMN n2")                                   # 23
    r.insert("c", "(8, 0.01, '🙂')", "id = 8")
    r.sql("CREATE INDEX ix ON c (note)")                                                     # 24
    r.sql("DROP INDEX ix ON c")                                                              # 25
    r.sql("ALTER TABLE b ENGINE=InnoDB")                                                     # 26
    r.sql("ALTER TABLE b CHANGE COLUMN body v2 VARCHAR(100) CHARACTER SET utf8mb4 AFTER k")  # 27
    r.insert("b", "(5, 'vee two', 'y')", "k = 5")
    r.sql("ALTER TABLE c ADD COLUMN st ENUM('on','off') NOT NULL DEFAULT 'on' AFTER id")      # 28
    r.insert("c", "(9, 'off', 9.99, 'st')", "id = 9")
    r.sql("ALTER TABLE a CHANGE id id BIGINT")                                               # 29
    r.insert("a", "(-9000000000, 'big', 0, NULL)", "id = -9000000000")
    r.sql("ALTER TABLE b RENAME COLUMN k TO kk, RENAME INDEX uk TO uk2")                     # 30
    r.update("b", "v2 = 'renamed key'", "kk = 5")
    r.sql("DROP TABLE c")                                                                    # 31
    r.sql("CREATE TABLE c LIKE b")                                                           # 32
    r.insert("c", "(1, 'like b', 'w')", "kk = 1")
    r.sql("ALTER TABLE a PARTITION BY HASH (id) PARTITIONS 2")                               # 33
    r.insert("a", "(10, 'partitioned', 2, '2000-01-01 00:00:00')", "id = 10")
    r.sql("ALTER TABLE a REMOVE PARTITIONING")                                               # 34
    r.delete("a", "id = 10")
