"""Snapshot values (issue 14) on MariaDB 10.11, 11.8 and MySQL 9.7: a row read with a plain
SELECT -- ``cdc.snapshot.values``'s ``SESSION_SQL``, ``select_list`` and ``row_converter`` over
the chunk reader's connection (``connect_for_snapshot``, with each client library: PyMySQL and
mysqlclient) -- is the row the binlog decoder gives for the same row: the same Python type and
``repr`` for every value, and the same JSON text (``row_json`` and the compiled renderers), for
every column of the type matrix (:mod:`tests.support.type_matrix`), every character set of the
server (every collation), a table of edge values of our own, and MariaDB's pre-5.6 temporal
formats (a second server with ``mysql56_temporal_format=OFF``).

The binlog side is :class:`cdc.replica.client.ReplicaClient` (``binlog_row_metadata=FULL``), with
each row decoder; the snapshot side describes its columns with ``read_columns`` /
``ServerColumn.column_def`` as the snapshot will.  The snapshot connection starts with the
settings a badly configured server could impose (``PAD_CHAR_TO_FULL_LENGTH``, a non-UTC time
zone, utf8mb4 results): ``SESSION_SQL`` must undo them.
"""
from __future__ import annotations

import random
import re
import struct

import pytest
from conftest import start_or_skip

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.transactions import TableFilter
from cdc.embedded import EmbeddedMariaDB
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig
from cdc.replica.metadata import read_columns
from cdc.replica.sql import fetch_rows
from cdc.rows import backend
from cdc.snapshot.reader import CLIENTS, connect_for_snapshot
from cdc.snapshot.textrows import pymysql_batches
from cdc.snapshot.values import SESSION_SQL, row_converter, select_list
from cdc.values.render import compile_json_renderer, row_json
from tests.support import type_matrix as M

pytestmark = [pytest.mark.server, pytest.mark.servers()]

DB = "snapshot_values"
DECODERS = ("c", "python")


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _edge_table() -> M.Table:
    """Values the matrix does not hold: random FLOAT/DOUBLE bit patterns, FLOAT(M,D) and
    DOUBLE(M,D) (the text protocol prints them with D decimals), ZEROFILL decimals, CHAR with
    trailing spaces in wide charsets, BINARY ending in zero bytes, invalid ENUM/SET values,
    invalid dates (ALLOW_INVALID_DATES), ZEROFILL and nullable integers."""
    rnd = random.Random(14)
    floats, doubles = [], []
    while len(floats) < 60:
        x = struct.unpack("<f", rnd.getrandbits(32).to_bytes(4, "little"))[0]
        if x == x and abs(x) != float("inf"):
            floats.append(repr(x) if x != 0 else "0")
    while len(doubles) < 60:
        x = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        if x == x and abs(x) != float("inf"):
            doubles.append(repr(x) if x != 0 else "0")
    floats += [repr(_f32(v)) for v in (0.1, 1 / 3, 3.4028234663852886e38, 1.401298464324817e-45,
                                       1.1754942106924411e-38, 16777216.0, 0.5, 2.0 ** -126)]
    doubles += ["5e-324", "2.225073858507201e-308", "1.7976931348623157e308", "0.30000000000000004",
                "123456789.12345679", "1e-7", "1e21", "9007199254740993"]
    u32, u16 = "CHARACTER SET utf32", "CHARACTER SET ucs2"
    cols = [
        M.Col("fl_r", "FLOAT", "float", floats),
        M.Col("db_r", "DOUBLE", "float", doubles),
        M.Col("fl_72", "FLOAT(7,2)", "float", ["12345.67", "-0.01", "0.005", "99999.99", "1.5"]),
        M.Col("db_205", "DOUBLE(20,5)", "float",
              ["123456789012345.12345", "-0.00001", "0.1", "2.5", "1e-6"]),
        M.Col("db_103", "DOUBLE(10,3) UNSIGNED", "float", ["1234567.891", "0.001", "0"]),
        M.Col("dz", "DECIMAL(10,2) ZEROFILL", "decimal", ["12.5", "0", "99999999.99"]),
        M.Col("dc_65", "DECIMAL(65,30)", "decimal",
              ["-" + "9" * 35 + "." + "9" * 30, "0.000000000000000000000000000001", "-1"]),
        M.Col("ch_32", f"CHAR(5) {u32}", "text", ["'a  '", "'   '", "' a'", "''", "'😀 😀'"]),
        M.Col("ch_16", f"CHAR(5) {u16}", "text", ["'a  '", "'   '", "' a'"]),
        M.Col("vc_sp", "VARCHAR(8) CHARACTER SET utf8mb4", "text", ["'a  '", "'  '"]),
        M.Col("bn_z", "BINARY(5)", "binary", ["x'610000'", "x'0000000000'", "x'2020'"]),
        M.Col("en_x", "ENUM('a','b','')", "text", ["'zz'", "''", "3", "'b'"]),
        M.Col("st_x", "SET('a','b')", "text", ["'zz'", "''", "'b,a'", "3"]),
        M.Col("dt_x", "DATE", "temporal", ["'2024-02-30'", "'2023-02-29'", "'2024-04-31'"]),
        M.Col("dtm_x", "DATETIME(6)", "temporal", ["'2024-02-30 01:02:03.000004'"], fsp=6),
        M.Col("ts_d", "TIMESTAMP(6) NULL", "temporal",
              ["'1970-01-01 00:00:01'", "'2038-01-19 03:14:07.999999'", "'2021-03-28 02:30:00'"],
              fsp=6),
        M.Col("tm_x", "TIME(6)", "temporal",
              ["'-00:00:00.000001'", "'-838:59:59.999999'", "'100:00:00.5'", "'-1 02:03:04'"],
              fsp=6),
        M.Col("yr_2", "YEAR", "year", ["'00'", "'0'", "0", "'0000'", "'1901'"]),
        M.Col("bi_u", "BIGINT UNSIGNED NOT NULL DEFAULT 0", "int",
              ["18446744073709551615", "9223372036854775808"], fill="0"),
        M.Col("iz_1", "INT(1) ZEROFILL NULL", "int", ["0", "5", "NULL", "10"], fill="0"),
        M.Col("sz_3", "SMALLINT(3) ZEROFILL NULL", "int", ["NULL", "0", "65535", "7"]),
        M.Col("in_n", "INT NULL", "int", ["-2147483648", "NULL", "0", "-1"]),
    ]
    n = max(len(c.values) for c in cols)
    rows = [(str(k + 1),) + tuple(c.values[k] if k < len(c.values) else c.fill for c in cols)
            for k in range(n)]
    rows.append((str(n + 1),) + tuple(c.fill for c in cols))
    return M.Table("edges", "edges", [M.Col("id", "INT NOT NULL PRIMARY KEY", "int")] + cols,
                   rows)


def _types_tables(server) -> list:
    """The type tables of *server*'s flavour; on MySQL those of the MySQL type matrix, once
    tests/support/type_matrix has one (``mysql_types_tables``; until then the group skips)."""
    if server.FLAVOR == "mysql":
        return list(getattr(M, "mysql_types_tables", list)())
    return [M.types_table(server.version_tuple)]


def _build(cur, server) -> list:
    cur.execute("SHOW CHARACTER SET")
    charsets = sorted((r[0], int(r[3])) for r in cur.fetchall())
    cur.execute("SELECT COLLATION_NAME, CHARACTER_SET_NAME FROM information_schema.COLLATIONS "
                "WHERE IS_DEFAULT <> 'Yes' AND CHARACTER_SET_NAME IS NOT NULL")
    others: dict = {}
    for coll, cs in cur.fetchall():
        others.setdefault(cs, []).append(coll)
    tables = _types_tables(server) + [_edge_table()]
    for cs, maxlen in charsets:
        rep = M.discover_repertoire(cur, cs, maxlen)
        tables.append(M.charset_table(cs, rep, M.discover_members(cur, cs, rep),
                                      sorted(others.get(cs, []))))
    return tables


def _write(cur, t: M.Table) -> None:
    for sql in getattr(t, "setup", ()):     # helper tables the values read (MySQL's matrix)
        cur.execute(sql)
    cur.execute(f"CREATE TABLE `{t.name}` (" +
                ", ".join(f"`{c.name}` {c.ddl}" for c in t.cols) + ")")
    names = ", ".join(f"`{c.name}`" for c in t.cols)
    for k in range(0, len(t.rows), 50):
        cur.execute(f"INSERT INTO `{t.name}` ({names}) VALUES " + ", ".join(
            "(" + ", ".join(r) + ")" for r in t.rows[k:k + 50]))


class World:
    def __init__(self, server, start, tables):
        self.server, self.start, self.tables = server, start, tables
        self.binlog: dict = {}      # decoder -> {table: (table-map columns, {id: after image})}
        # client library -> {table: (column defs, {id: converted row})}
        self.snapshot: dict = {c: {} for c in CLIENTS}
        self.raw: dict = {c: {} for c in CLIENTS}      # the same rows as the client read them

    def from_binlog(self, decoder: str) -> dict:
        if decoder not in self.binlog:
            s = self.server
            cfg = ReplicaConfig(s.host, s.port, s.CDC_USER, s.CDC_PASSWORD, row_decoder=decoder,
                                table_filter=TableFilter([f"{DB}.*"]))
            out: dict = {}
            client = ReplicaClient(cfg, start=Start.at(*self.start), blocking=False)
            for tx in client.transactions():
                for c in tx.changes():
                    assert c.op == "c", c
                    cols, rows = out.setdefault(c.table, (list(c.table_map.columns), {}))
                    rows[c.after[0]] = c.after
            self.binlog[decoder] = out
        return self.binlog[decoder]


def _read_snapshot(server, client: str, query, tables, out: dict, raw: dict) -> None:
    """The tables read by *client*'s chunk connection (:func:`connect_for_snapshot`): session
    settings SESSION_SQL has to undo first, then SESSION_SQL again; *raw*: the rows as the
    client returned them."""
    p = server.cdc_params()
    conn = connect_for_snapshot(ReplicaConfig(p["host"], p["port"], p["user"], p["password"]),
                                client)
    try:
        rc = conn.cursor()
        rc.execute("SET SESSION sql_mode = 'PAD_CHAR_TO_FULL_LENGTH'")
        rc.execute("SET SESSION time_zone = '+05:30'")
        rc.execute("SET SESSION character_set_results = utf8mb4")
        for stmt in SESSION_SQL:
            rc.execute(stmt)
        for t in tables:
            defs = [s.column_def(i) for i, s in enumerate(read_columns(query, DB, t.name))]
            rc.execute(f"SELECT {select_list(defs)} FROM `{DB}`.`{t.name}` ORDER BY 1")
            convert = row_converter(defs)
            raw_rows = rc.fetchall()
            out[t.name] = (defs, {r[0]: r for r in map(convert, raw_rows)})
            raw[t.name] = raw_rows
            if client == "pymysql":     # the same rows by cdc.snapshot.textrows, 7 at a time
                rc.execute(f"SELECT {select_list(defs)} FROM `{DB}`.`{t.name}` ORDER BY 1")
                raw[("textrows", t.name)] = [list(b) for b in pymysql_batches(rc, 7)]
    finally:
        conn.close()


def _workload(server, tables_of) -> World:
    """Write the tables *tables_of(cursor)* builds on *server* (one INSERT workload), read them
    back with the snapshot's SELECTs."""
    conn = server.connect()
    cur = conn.cursor()
    cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
    cur.execute("SET SESSION time_zone = '+00:00'")
    cur.execute(f"DROP DATABASE IF EXISTS {DB}")
    cur.execute(f"CREATE DATABASE {DB}")
    cur.execute(f"USE {DB}")
    tables = tables_of(cur)
    start = server.current_position()
    for t in tables:
        _write(cur, t)
    w = World(server, start, {t.name: t for t in tables})

    # the snapshot: column descriptions from information_schema (an ordinary connection),
    # values from a raw connection that starts with settings SESSION_SQL has to undo
    def query(sql, args):
        return fetch_rows(conn, sql, args)

    try:
        for client in CLIENTS:
            if client == "mysqlclient" and not MYSQLCLIENT:
                continue
            _read_snapshot(server, client, query, tables, w.snapshot[client], w.raw[client])
    finally:
        conn.close()
    return w


@pytest.fixture(scope="module")
def world(mariadb):
    w = _workload(mariadb, lambda cur: _build(cur, mariadb))
    try:
        yield w
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")


@pytest.fixture(scope="module")
def old_world(tmp_path_factory):
    """A server writing MariaDB's pre-5.6 TIME/DATETIME/TIMESTAMP formats
    (``mysql56_temporal_format=OFF``): the binlog carries no precision, SELECT text is the same."""
    server = start_or_skip(EmbeddedMariaDB(tmp_path_factory.mktemp("snapshot-old-temporal"),
                                           extra_options={"mysql56_temporal_format": "OFF"}))
    try:
        yield _workload(server, lambda cur: M.old_temporal_tables())
    finally:
        server.cleanup()


def _same(a, b) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


#: every charset of MariaDB and MySQL (a server lacking one skips it)
CHARSETS = sorted(set(M.CHARSETS) | set(getattr(M, "MYSQL_CHARSETS", ["gb18030"])))
GROUPS = ("types", "edges") + tuple("charset-" + cs for cs in CHARSETS)


def _table_name(group: str) -> str:
    return "cs_" + group.removeprefix("charset-") if group.startswith("charset-") else group


def _group_table(world, group: str) -> str:
    """The table of *group* (skipped when the server has no such charset or type table)."""
    name = _table_name(group)
    if name not in world.tables:
        pytest.skip(f"{group}: not in this server's SHOW CHARACTER SET (or type matrix)")
    return name


try:
    import MySQLdb  # noqa: F401
    MYSQLCLIENT = True
except ImportError:
    MYSQLCLIENT = False


@pytest.fixture(params=CLIENTS)
def client(request):
    """The client library that read the snapshot side."""
    if request.param == "mysqlclient" and not MYSQLCLIENT:
        pytest.skip("mysqlclient is not installed")
    return request.param


@pytest.fixture(params=DECODERS)
def decoder(request):
    if request.param == "c" and not backend.c_decoder_available():
        pytest.skip(f"the compiled row decoder is not built ({backend.C_MISSING})")
    return request.param


@pytest.mark.parametrize("group", GROUPS)
def test_snapshot_row_equals_binlog_row(world, decoder, client, group):
    name = _group_table(world, group)
    _check_table(world, decoder, client, name)


@pytest.mark.parametrize("name", ["old_fsp0", "old_fsp"])
def test_old_temporal_formats(old_world, decoder, client, name):
    _check_table(old_world, decoder, client, name)
    tmap_cols = old_world.from_binlog(decoder)[name][0]
    assert {c.type for c in tmap_cols[1:]} == {T.TIME, T.DATETIME, T.TIMESTAMP}   # not vacuous


def _check_table(world, decoder, client, name):
    table = world.tables[name]
    tmap_cols, binlog = world.from_binlog(decoder)[name]
    defs, snap = world.snapshot[client][name]
    names = [c.name for c in table.cols]
    assert len(binlog) == len(table.rows) and sorted(binlog) == sorted(snap), (
        f"rows: binlog {sorted(binlog)[:10]} snapshot {sorted(snap)[:10]}")
    bad: dict = {}
    for key, want in binlog.items():
        got = snap[key]
        assert len(got) == len(want) == len(names)
        for i, (w, g) in enumerate(zip(want, got)):
            if not _same(w, g):
                bad.setdefault(names[i], []).append(
                    f"id={key}: binlog {type(w).__name__} {w!r:.120} snapshot "
                    f"{type(g).__name__} {g!r:.120}")
    assert not bad, "\n".join(f"{table.cols[names.index(n)].ddl[:50]} `{n}`: {len(m)} wrong, "
                              f"e.g. " + " | ".join(m[:3]) for n, m in bad.items())
    # the JSON images: row_json and the compiled renderers (each side with its own columns)
    keys = sorted(binlog)
    want_json = [row_json(names, binlog[k], tmap_cols) for k in keys]
    assert [row_json(names, snap[k], defs) for k in keys] == want_json
    assert compile_json_renderer(defs, names)([snap[k] for k in keys]) == want_json
    assert compile_json_renderer(tmap_cols, names)([binlog[k] for k in keys]) == want_json


@pytest.mark.parametrize("group", GROUPS)
def test_columnar_json_images_equal_row_json(world, client, group):
    """The snapshot's column-by-column JSON images (streaming.source.snapshot_columns, the
    Spark source's path) of the rows as the client read them are the compiled renderer's texts
    of the converted rows, keys too; in batches of 7 rows as well (a column takes the fast or
    the exact path per batch)."""
    pytest.importorskip("pyarrow")
    from streaming.source.snapshot_columns import JsonImages
    name = _group_table(world, group)
    defs = world.snapshot[client][name][0]
    raw = world.raw[client][name]
    rows = list(map(row_converter(defs), raw))
    names = [c.name for c in defs]
    want = compile_json_renderer(defs, names)(rows)
    want_key = compile_json_renderer(defs, names, [0])(rows)
    images = JsonImages(defs, names, [0])
    after, key = images.images(raw)
    assert after.to_pylist() == want
    assert key.to_pylist() == want_key
    got = [t for k in range(0, len(raw), 7) for t in images.images(raw[k:k + 7])[0].to_pylist()]
    assert got == want


@pytest.mark.parametrize("typed", [False, True], ids=["json", "typed"])
@pytest.mark.parametrize("group", GROUPS)
def test_column_path_batches_equal_row_path(world, client, group, typed):
    """The Spark source's snapshot batches (streaming.source.snapshot: each fetched batch
    column by column) equal the row path's (row_converter -> BatchBuilder) in every field, JSON
    envelope and typed, on the rows as the client read them; in batches of 7 rows as well."""
    pytest.importorskip("pyspark")
    from tests.support.snapshot_paths import both_paths
    name = _group_table(world, group)
    defs = world.snapshot[client][name][0]
    raw = world.raw[client][name]
    for rows_per_batch in (8192, 7):
        old, new = both_paths(defs, raw, typed=typed, rows_per_batch=rows_per_batch)
        assert old.num_rows == new.num_rows == len(raw)
        for field in old.column_names:
            assert old[field].combine_chunks().equals(new[field].combine_chunks()), field


@pytest.mark.parametrize("group", GROUPS)
def test_text_protocol_reader_equals_pymysql(world, group):
    """cdc.snapshot.textrows (the chunk reader's PyMySQL path) parses every row of the matrix
    into exactly the bytes PyMySQL's own fetch gives, in batches of 7 rows."""
    name = _group_table(world, group)
    batches = world.raw["pymysql"][("textrows", name)]
    assert all(len(b) == 7 for b in batches[:-1]) and 0 < len(batches[-1]) <= 7
    assert [r for b in batches for r in b] == list(world.raw["pymysql"][name])


def test_the_matrix_is_not_vacuous(world, decoder, client):
    """Every table of the matrix reached both sides, with every column and non-NULL values of
    every column somewhere."""
    binlog = world.from_binlog(decoder)
    helpers = {name for t in world.tables.values() for sql in getattr(t, "setup", ())
               for name in re.findall(r"CREATE TABLE (\w+)", sql)}   # what values are read from
    assert set(binlog) - helpers == set(world.tables) == set(world.snapshot[client])
    for name, table in world.tables.items():
        rows = list(world.snapshot[client][name][1].values())
        for i, col in enumerate(table.cols):
            if col.values or col.fill == "DEFAULT":
                assert any(r[i] is not None for r in rows), (name, col.name)
