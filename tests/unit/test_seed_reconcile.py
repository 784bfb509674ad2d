"""A read of information_schema reconciled with the binlog's DDL (without a server): which
tables a statement changes, where the read describes each table exactly, the versions a seed so
placed gives (unknown before a table's last change, never a later shape), the statement at that
point, persisting, the re-read at the binlog's end, and ``SHOW BINLOG EVENTS`` rows."""

from __future__ import annotations

from cdc.replica.binlog_ddl import PAGE, Statement, ddl_statements
from cdc.schema import SchemaHistory, TableSchema, Unknown, parse_ddl
from cdc.schema.columns import charset_collation
from cdc.schema.touched import changed_by, exact_from

UTF8MB4 = charset_collation("utf8mb4")
F = "mysql-bin.000001"


def _schema(create: str) -> TableSchema:
    h = SchemaHistory()
    h.seed({}, {"db": UTF8MB4})
    h.apply(create, schema="db", file=F, pos=1)
    t = h.lookup("db", parse_ddl(create).table.name, F, 2)[0]
    return TableSchema(t.columns, t.collation, t.primary_key, t.unique_keys, "information_schema")


def _st(pos, sql, schema="db"):
    return Statement(F, pos, pos + 50, schema, sql)


def test_the_tables_a_statement_changes():
    def names(sql, schema="db"):
        return changed_by(parse_ddl(sql), schema)
    assert names("ALTER TABLE t RENAME COLUMN a TO b") == [("db", "t")]
    assert names("ALTER TABLE t ADD c INT, RENAME TO o.u") == [("db", "t"), ("o", "u")]
    assert names("RENAME TABLE a TO b, x.c TO d") == [("db", "a"), ("db", "b"), ("x", "c"),
                                                       ("db", "d")]
    assert names("DROP DATABASE x") == [("x", None)]
    assert names("TRUNCATE TABLE t") == [] and names("CREATE DATABASE x") == []
    assert names("CREATE TABLE n LIKE t") == [("db", "n")]
    assert names("CREATE UNIQUE INDEX i ON t (a)", None) == [("", "t")]
    assert names("ALTER TABLE t ADD COLUMN x INT (((") == [("db", "t")]    # unparsed, named
    assert changed_by(parse_ddl("ALTER TABLE"), "db") is None               # cannot be told


def test_where_a_read_is_exact():
    h = SchemaHistory(captures=lambda name: not name.startswith("db.skip"))
    tables = {("db", "t"): None, ("db", "u"): None, ("o", "w"): None}
    since, conflicts = exact_from(h, [
        _st(100, "ALTER TABLE t ADD b INT"), _st(200, "CREATE TABLE skip1 (x INT)"),
        _st(300, "ALTER TABLE t RENAME COLUMN b TO c"), _st(400, "DROP DATABASE o"),
        _st(500, "TRUNCATE TABLE u")], tables, (F, 1000))
    assert since == {("db", "t"): (F, 350), ("o", "w"): (F, 450)} and conflicts == []
    # a change from the read's beginning on: the read may or may not show it
    since, conflicts = exact_from(h, [_st(100, "ALTER TABLE t ADD b INT"),
                                      _st(1000, "ALTER TABLE u ADD b INT"),
                                      _st(1100, "ALTER TABLE skip2 ADD b INT")], tables, (F, 1000))
    assert since == {("db", "t"): (F, 150)} and [c.pos for c in conflicts] == [1000]
    # a statement whose tables cannot be told touches every table read
    since, _ = exact_from(h, [_st(100, "ALTER TABLE")], tables, (F, 1000))
    assert set(since) == set(tables)


def test_a_seed_describes_a_changed_table_only_after_its_last_change():
    now = _schema("CREATE TABLE t (id INT PRIMARY KEY, c INT)")
    other = _schema("CREATE TABLE u (id INT PRIMARY KEY, v INT)")
    h = SchemaHistory()
    h.seed({("db", "t"): now, ("db", "u"): other}, {"db": UTF8MB4}, valid_from=(F, 1000),
           at=(F, 50), exact_from={("db", "t"): (F, 350)})
    assert isinstance(h.lookup("db", "t", F, 60)[0], Unknown)       # never the later names
    assert "changed by the statement ending at file" in h.lookup("db", "t", F, 60)[0].describe()
    assert h.lookup("db", "t", F, 400)[0] is now
    assert h.lookup("db", "u", F, 60)[0] is other                   # not changed: exact
    # the statements as the stream meets them: the one at the anchor gets the seed's shape
    h.apply("ALTER TABLE t ADD b INT", schema="db", file=F, pos=100, end_pos=150)
    assert isinstance(h.lookup("db", "t", F, 200)[0], Unknown)
    assert h.apply("ALTER TABLE t RENAME COLUMN b TO c", schema="db", file=F, pos=300,
                   end_pos=350) == ["db.t"]
    (record,) = h.last_changes
    assert not record.unsure and [c.name for c in record.columns] == ["id", "c"]
    assert record.renamed_columns == {"b": "c"}
    assert h.lookup("db", "t", F, 400)[0] is now


def test_a_table_created_after_the_position_is_followed_from_its_create():
    now = _schema("CREATE TABLE n (id INT PRIMARY KEY, y INT)")
    h = SchemaHistory()
    h.seed({("db", "n"): now}, {"db": UTF8MB4}, valid_from=(F, 1000), at=(F, 50),
           exact_from={("db", "n"): (F, 350)})
    h.apply("CREATE TABLE n (id INT PRIMARY KEY, x INT)", schema="db", file=F, pos=100,
            end_pos=150)
    assert h.lookup("db", "n", F, 200)[0].names == ["id", "x"]
    h.apply("ALTER TABLE n RENAME COLUMN x TO y", schema="db", file=F, pos=300, end_pos=350)
    assert h.lookup("db", "n", F, 400)[0].names == ["id", "y"]
    assert h.statements_applied == 2


def _members(h, table, pos):
    return {c.name: c.members for c in h.lookup("db", table, F, pos)[0].columns
            if c.data_type in ("enum", "set")}


def test_a_created_tables_members_are_its_statements_not_information_schemas():
    # information_schema keeps member names as utf8mb3: a 4-byte character reads '?'
    shown = _schema("CREATE TABLE n (id INT PRIMARY KEY, e ENUM('a','?x'), s SET('?','b'), "
                    "o ENUM('?c'))")
    create = ("CREATE TABLE n (id INT PRIMARY KEY, e ENUM('a','\U0001F600x'), "
              "s SET('\U0001F42C','b'), o ENUM('\u00e9c'))")
    exact = {"e": ["a", "\U0001F600x"], "s": ["\U0001F42C", "b"],
             "o": ["?c"]}     # o: not a character utf8mb3 lacks -- information_schema's

    def seeded(table=shown):
        h = SchemaHistory()
        h.seed({("db", "n"): table}, {"db": UTF8MB4}, valid_from=(F, 1000), at=(F, 50),
               exact_from={("db", "n"): (F, 150)})
        return h
    h = seeded()
    state = h.to_json(F, 50)
    assert _members(h, "n", 200)["e"] == ["a", "?x"]         # the read, until the stream tells
    h.apply(create, schema="db", file=F, pos=100, end_pos=150)
    assert _members(h, "n", 200) == exact and _members(h, "n", 1100) == exact
    assert [c.name for c in h.lookup("db", "n", F, 1100)[0].columns] == ["id", "e", "s", "o"]
    # persisted before the statement: the stream that resumes there meets it again
    back = SchemaHistory.from_json(state)
    back.apply(create, schema="db", file=F, pos=100, end_pos=150)
    assert _members(back, "n", 200) == exact and _members(back, "n", 1100) == exact
    # a shape the statements do not tell (created before the stream's position): the read's
    h = seeded(_schema("CREATE TABLE n (id INT PRIMARY KEY, e ENUM('a','?x'), z INT)"))
    h.apply("ALTER TABLE n ADD z INT", schema="db", file=F, pos=100, end_pos=150)
    assert _members(h, "n", 200)["e"] == ["a", "?x"]


def test_persisted_before_the_anchor_restores_it():
    now = _schema("CREATE TABLE t (id INT PRIMARY KEY, c INT)")
    h = SchemaHistory()
    h.seed({("db", "t"): now}, {"db": UTF8MB4}, valid_from=(F, 1000), at=(F, 50),
           exact_from={("db", "t"): (F, 350)})
    state = h.to_json(F, 200)
    assert state["exact_from"] == [["db", "t", F, 350]]
    back = SchemaHistory.from_json(state)
    assert isinstance(back.lookup("db", "t", F, 200)[0], Unknown)
    assert back.lookup("db", "t", F, 400)[0].names == ["id", "c"]
    back.apply("ALTER TABLE t RENAME COLUMN b TO c", schema="db", file=F, pos=300, end_pos=350)
    assert [c.name for c in back.last_changes[0].columns] == ["id", "c"]
    assert "exact_from" not in h.to_json(F, 400)


def test_a_re_read_at_the_end_is_kept_only_if_the_end_did_not_move():
    ends = iter([True, False])
    reads = []

    def read_table(db, table):
        reads.append(table)
        return _schema("CREATE TABLE t (id INT, later INT)")

    h = SchemaHistory(read_table=read_table, at_end=lambda file, pos: next(ends))
    h.seed({("db", "t"): _schema("CREATE TABLE t (id INT)")}, {"db": UTF8MB4},
           valid_from=(F, 10))
    h.apply("ALTER TABLE t ADD SYSTEM VERSIONING", schema="db", file=F, pos=100, end_pos=150)
    assert reads == ["t"] and isinstance(h.lookup("db", "t", F, 200)[0], Unknown)


def test_ddl_statements_from_show_binlog_events():
    files = {"b.000001": [(4, "Format_desc", 120, "Server ver"),
                          (120, "Query", 200, "use `d``b`; ALTER TABLE t ADD x INT /* xid=9 */"),
                          (200, "Query", 260, "BEGIN"), (260, "Table_map", 300, "table_id: 1"),
                          (300, "Rotate", 340, "b.000002;pos=4")],
             "b.000002": [(4, "Format_desc", 120, "Server ver")] +
                         [(120 + i, "Query", 121 + i, f"DROP TABLE t{i}") for i in range(PAGE + 3)]}
    asked = []

    def query(sql, args):
        if sql == "SHOW BINARY LOGS":
            return [(f, 0) for f in files]
        start = int(sql.split(" FROM ")[1].split()[0])
        skip, limit = (int(x) for x in sql.split(" LIMIT ")[1].split(","))
        asked.append((args[0], start))
        rows = [(args[0], p, kind, 1, end, info) for p, kind, end, info in files[args[0]]
                if p >= start]
        return rows[skip:skip + limit]

    got = ddl_statements(query, ("b.000001", 120), ("b.000002", 120 + PAGE + 1))
    assert got[0] == Statement("b.000001", 120, 200, "d`b", "ALTER TABLE t ADD x INT /* xid=9 */")
    assert [s.sql for s in got[1:]] == [f"DROP TABLE t{i}" for i in range(PAGE + 1)]
    assert asked[0] == ("b.000001", 120) and asked[1] == ("b.000002", 4)
    assert ddl_statements(query, ("b.000002", 9), ("b.000002", 9)) == []
