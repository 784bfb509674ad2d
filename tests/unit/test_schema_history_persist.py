"""Issue 15 item 4, without a server: a schema history saved as of a binlog position
(:meth:`SchemaHistory.to_json`) and restored (:meth:`SchemaHistory.from_json`) continues exactly
as the history it came from, and the saved text depends only on the state."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.errors import ConfigurationError
from cdc.schema import SchemaHistory, TableSchema, Unknown
from cdc.schema.columns import charset_collation

UTF8MB4 = charset_collation("utf8mb4")
F = "mysql-bin.000001"

STATEMENTS = [
    "ALTER TABLE t ADD COLUMN c1 INT UNSIGNED FIRST",
    "ALTER TABLE t ADD COLUMN c2 VARCHAR(7) CHARACTER SET latin1 AFTER id",
    "ALTER TABLE t DROP COLUMN a",
    "ALTER TABLE t RENAME COLUMN a TO title",
    "ALTER TABLE t CHANGE title a VARCHAR(9) NOT NULL",
    "ALTER TABLE t ADD COLUMN e ENUM('x','y''s') DEFAULT 'x', ADD UNIQUE KEY uk (e)",
    "ALTER TABLE t DROP PRIMARY KEY",
    "ALTER TABLE t ADD PRIMARY KEY (id)",
    "ALTER TABLE t CONVERT TO CHARACTER SET latin1",
    "ALTER TABLE t ADD SYSTEM VERSIONING",
    "RENAME TABLE t TO u",
    "RENAME TABLE u TO t",
    "DROP TABLE IF EXISTS t",
    "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5), s SET('p','q'))",
    "CREATE TABLE IF NOT EXISTS u (k CHAR(2) NOT NULL, UNIQUE KEY (k))",
    "TRUNCATE TABLE t",
    "CREATE DATABASE d2 CHARACTER SET latin1",
    "CREATE TABLE d2.w (v VARCHAR(3))",
    "DROP DATABASE IF EXISTS d2",
]


def _seeded(valid_from=(F, 4)) -> SchemaHistory:
    h = SchemaHistory()
    h.seed({}, {"db": UTF8MB4})
    h.apply("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5))", schema="db", file=F, pos=1)
    t = h.lookup("db", "t", F, 2)[0]
    t = TableSchema(t.columns, t.collation, t.primary_key, t.unique_keys, "information_schema")
    out = SchemaHistory()
    out.seed({("db", "t"): t}, {"db": UTF8MB4}, valid_from=valid_from)
    return out


def _text(h: SchemaHistory, pos=None) -> str:
    return json.dumps(h.to_json(F if pos is not None else None, pos))


def _run(h: SchemaHistory, workload, since: int = 0) -> None:
    for pos, sql in workload:
        if pos >= since:
            h.apply(sql, schema="db", file=F, pos=pos, end_pos=pos + 5)


def _workload(picks) -> list[tuple[int, str]]:
    return [(100 + 10 * i, STATEMENTS[k]) for i, k in enumerate(picks)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, len(STATEMENTS) - 1), max_size=14), st.integers(0, 15))
def test_a_restored_history_continues_as_the_original(picks, cut):
    """Saved at a statement's position and restored, then fed the statements from there: the
    same versions at every later position, and the same saved text at the end."""
    workload = _workload(picks)
    whole = _seeded()
    _run(whole, workload)
    pos = 100 + 10 * cut                 # a statement's position (or past the last one)
    upto = _seeded()
    _run(upto, [w for w in workload if w[0] < pos])
    saved = _text(upto, pos)
    assert saved == _text(whole, pos)    # later statements do not change the state before pos
    restored = SchemaHistory.from_json(saved)
    assert _text(restored, pos) == saved
    _run(restored, workload, since=pos)
    for p in range(pos, 100 + 10 * len(workload) + 10, 5):
        for table in ("t", "u"):
            assert restored.lookup("db", table, F, p) == whole.lookup("db", table, F, p), (p, table)
    end = 100 + 10 * len(workload) + 10
    assert _text(restored, end) == _text(whole, end)
    assert _text(restored) == _text(whole)


def test_the_state_is_before_a_statement_at_the_position():
    h = _seeded()
    h.apply("ALTER TABLE t RENAME COLUMN a TO b", schema="db", file=F, pos=100)
    before = SchemaHistory.from_json(h.to_json(F, 100))
    after = SchemaHistory.from_json(h.to_json(F, 101))
    assert before.lookup("db", "t", F, 100)[0].names == ["id", "a"]
    assert after.lookup("db", "t", F, 101)[0].names == ["id", "b"]
    # the restored history applies the statement at its position (it was not applied there)
    assert before.apply("ALTER TABLE t RENAME COLUMN a TO b", schema="db", file=F,
                        pos=100) == ["db.t"]


def test_the_saved_text_depends_only_on_the_state():
    """Two histories built apart (seeded in another order, one fed further statements) save the
    same text for a position; it is JSON with a fixed key order, and every value survives:
    columns, keys, members, unknowns."""
    t = _seeded().lookup("db", "t", F, 5)[0]
    u = TableSchema(t.columns[:1], t.collation, (), (), "information_schema")
    a, b = SchemaHistory(), SchemaHistory()
    a.seed({("db", "t"): t, ("db", "u"): u}, {"db": UTF8MB4, "e": 8}, valid_from=(F, 4))
    b.seed({("db", "u"): u, ("db", "t"): t}, {"e": 8, "db": UTF8MB4}, valid_from=(F, 4))
    for h in (a, b):
        h.apply("CREATE TABLE x (k INT NOT NULL, e ENUM('a','b''c'), UNIQUE KEY (k))",
                schema="db", file=F, pos=10)
        h.apply("CREATE TABLE y (k INT NOT NULL, e ENUM('a','b''c'), UNIQUE KEY (k))",
                schema="db", file=F, pos=11)
        h.apply("ALTER TABLE x ADD SYSTEM VERSIONING", schema="db", file=F, pos=20)
    b.apply("CREATE DATABASE later", schema="db", file=F, pos=40)
    b.apply("ALTER TABLE y DROP COLUMN e", schema="db", file=F, pos=41)
    assert json.dumps(a.to_json(F, 30)) == json.dumps(b.to_json(F, 30))
    assert json.dumps(a.to_json(F, 30)) != json.dumps(b.to_json(F, 50))
    data = a.to_json(F, 30)
    assert list(data) == ["format", "mariadb", "version", "lower", "databases", "seed_point",
                          "tables"]
    r = SchemaHistory.from_json(json.dumps(data))
    y = r.lookup("db", "y", F, 30)[0]
    assert isinstance(y, TableSchema) and y.columns[1].members == ["a", "b'c"]
    assert y.columns[0].primary_key and y.unique_keys == a.lookup("db", "y", F, 30)[0].unique_keys
    x = r.lookup("db", "x", F, 30)[0]
    assert isinstance(x, Unknown) and x.since == (F, 20) and "versioning" in x.reason


def test_a_history_saved_before_its_seed_point_keeps_the_seed():
    """Restored before the point information_schema was read: a change in between leaves the
    table unknown up to that point, and the seed holds again from there (as unsaved)."""
    h = _seeded(valid_from=(F, 1000))
    saved = h.to_json(F, 300)
    assert "seed" in saved and "seed" not in h.to_json(F, 1000)
    r = SchemaHistory.from_json(saved)
    r.apply("ALTER TABLE t ADD COLUMN b INT", schema="db", file=F, pos=500)
    assert isinstance(r.lookup("db", "t", F, 600)[0], Unknown)
    assert r.lookup("db", "t", F, 1000)[0].names == ["id", "a"]


def test_not_a_saved_history():
    with pytest.raises(ConfigurationError, match="not a schema history"):
        SchemaHistory.from_json({"format": 99})


def test_column_defaults_survive_the_round_trip():
    """A restored history keeps each column's DEFAULT (schema-change records of later DDL carry
    it; a Delta table gets it for its existing rows)."""
    h = _seeded()
    h.apply("ALTER TABLE t ADD COLUMN n INT NOT NULL DEFAULT 7, ADD COLUMN ts DATETIME "
            "DEFAULT CURRENT_TIMESTAMP, ADD COLUMN s VARCHAR(3) DEFAULT 'a''b'",
            schema="db", file=F, pos=10)
    original = h.lookup("db", "t", F, 11)[0]
    restored = SchemaHistory.from_json(json.loads(_text(h, 11))).lookup("db", "t", F, 11)[0]
    assert [c.default for c in restored.columns] == [c.default for c in original.columns]
    assert [c.default for c in original.columns][-3:] == [("num", "7"), ("expr", "CURRENT_TIMESTAMP"),
                                                          ("str", "a'b")]


def test_a_restored_history_follows_latin2_czech_cs_without_the_servers_names():
    """latin2_czech_cs (id 2) decodes differently from latin2's other collations: a history
    restored in a Spark task (which has not read the server's collation names) must still give
    a column declared with it that id (the type oracle's NO_LOG latin2 stream case found it
    falling back to latin2_general_ci)."""
    h = _seeded()
    restored = SchemaHistory.from_json(json.loads(_text(h, 5)))
    restored.apply("CREATE TABLE cz (id INT PRIMARY KEY, k VARCHAR(9) CHARACTER SET latin2 "
                   "COLLATE latin2_czech_cs, g VARCHAR(9) CHARACTER SET latin2)",
                   schema="db", file=F, pos=10)
    cols = restored.lookup("db", "cz", F, 11)[0].columns
    assert [c.collation for c in cols] == [None, 2, 9]
