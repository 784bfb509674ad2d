"""A server without binlog_row_metadata (MariaDB's default NO_LOG) and with the pre-5.6 temporal
format (mysql56_temporal_format=OFF): a live stream takes names, charsets, signedness, members,
primary keys and temporal precision from information_schema and decodes what the server's own
SELECT returns; binlog files alone use a default charset, never pad CHAR, and refuse hires
temporals they cannot size."""

from __future__ import annotations

import datetime as dt
import subprocess

import pytest

from cdc.binlog.files import read_events
from cdc.binlog.transactions import assemble
from cdc.errors import ParseError, SchemaError
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig, RetryPolicy
from tests.conftest import start_or_skip

from cdc.embedded import EmbeddedMariaDB

COLUMNS = [
    ("id", "INT UNSIGNED NOT NULL PRIMARY KEY"),
    ("c", "CHAR(5) CHARACTER SET utf8mb4"),
    ("cl", "CHAR(4) CHARACTER SET latin1"),
    ("v", "VARCHAR(20) CHARACTER SET utf8mb4"),
    ("t", "TEXT CHARACTER SET utf8mb4"),
    ("b", "BINARY(4)"),
    ("vb", "VARBINARY(8)"),
    ("e", "ENUM('x','y''z')"),
    ("s", "SET('a','b','c')"),
    ("ti", "TINYINT UNSIGNED"),
    ("bi", "BIGINT UNSIGNED"),
    ("dt3", "DATETIME(3)"),
    ("dt6", "DATETIME(6)"),
    ("dt0", "DATETIME"),
    ("ts6", "TIMESTAMP(6) NULL"),
    ("ts1", "TIMESTAMP(1) NULL"),
    ("tm2", "TIME(2)"),
    ("tm5", "TIME(5)"),
    ("tm0", "TIME"),
    ("dc", "DECIMAL(10,2)"),
]
ROWS = [
    "(1, 'ab', 'é', 'ünï', 'text ✓', 'x', 'ab', 'y''z', 'a,c', 255, 18446744073709551615, "
    "'2024-02-29 23:59:58.123', '1999-12-31 23:59:59.999999', '2000-01-01 00:00:00', "
    "'2024-05-06 07:08:09.654321', '2030-01-02 03:04:05.6', '-838:59:58.99', '12:34:56.78901', "
    "'-01:02:03', -12345678.90)",
    "(2, '', NULL, '', NULL, NULL, '', 'x', '', 0, 0, '0000-00-00 00:00:00.000', "
    "'1000-01-01 00:00:00.000001', NULL, NULL, '1970-01-01 00:00:01.5', '00:00:00.01', "
    "'-00:00:00.00001', '838:59:59', 0)",
]


@pytest.fixture(scope="module")
def old_server(tmp_path_factory):
    server = start_or_skip(EmbeddedMariaDB(
        tmp_path_factory.mktemp("nolog"),
        extra_options={"binlog_row_metadata": "NO_LOG", "mysql56_temporal_format": "OFF"}))
    try:
        yield server
    finally:
        server.cleanup()


def _client(server, start) -> ReplicaClient:
    p = server.cdc_params()
    return ReplicaClient(ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                                       server_id=7301,
                                       retry=RetryPolicy(max_attempts=2, initial_backoff=0.05)),
                         start=start, blocking=False)


def _select(server, db: str) -> tuple[list[str], list[tuple]]:
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute("SELECT * FROM m ORDER BY id")
            return [d[0] for d in cur.description], list(cur.fetchall())
    finally:
        conn.close()


def _comparable(v):
    """Our value as PyMySQL returns the server's: naive UTC TIMESTAMPs, SET/ENUM text."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.replace(tzinfo=None)
    return v


def _setup(server, db: str):
    server.execute(f"CREATE DATABASE `{db}`")
    server.execute(f"CREATE TABLE m ({', '.join(f'{n} {t}' for n, t in COLUMNS)})", database=db)
    start = Start.at(*server.current_position())
    server.execute("SET SESSION sql_mode = ''", database=db)
    server.execute(f"INSERT INTO m VALUES {', '.join(ROWS)}", database=db)
    return start


def test_no_log_table_maps_really_lack_metadata(old_server):
    """The premise: the binlog's table map has no names/charsets and old temporal codes."""
    db = "premise"
    start = _setup(old_server, db)
    client = _client(old_server, start)
    client.metadata.complete = lambda tmap, **kw: None      # no information_schema
    tx = next(iter(client.transactions()))
    client.close()
    tmap = tx.rows_events[0].table
    assert not tmap.has_optional_metadata
    assert [c.name for c in tmap.columns] == [None] * len(COLUMNS)
    assert [c.type for c in tmap.columns[11:19]] == [12, 12, 12, 7, 7, 11, 11, 11]


def test_stream_equals_select_with_information_schema(old_server):
    db = "stream"
    start = _setup(old_server, db)
    names, expected = _select(old_server, db)
    client = _client(old_server, start)
    changes = [c for tx in client.transactions() for c in tx.changes() if c.table == "m"]
    client.close()
    assert client.metadata.reads == 1
    assert [c.columns for c in changes] == [names, names]
    got = [tuple(_comparable(v) for v in c.after) for c in changes]
    for row_got, row_expected in zip(got, expected):
        for name, g, e in zip(names, row_got, row_expected):
            if isinstance(e, (set, frozenset)):
                e = ",".join(x for x in ("a", "b", "c") if x in e)
            assert (name, g) == (name, e)
    assert changes[0].after[1] == "ab"                      # CHAR not padded, str
    assert changes[0].after[5] == b"x\0\0\0"                # BINARY(4) padded
    assert changes[0].after[10] == 18446744073709551615     # unsigned from information_schema
    assert changes[0].key() == {"id": 1}


def test_files_use_the_default_charset_and_refuse_hires_temporals(old_server, tmp_path):
    db = "files"
    old_server.execute(f"CREATE DATABASE `{db}`")
    old_server.execute("CREATE TABLE f (id INT PRIMARY KEY, c CHAR(6), v VARCHAR(9))",
                       database=db)
    old_server.execute("CREATE TABLE h (id INT PRIMARY KEY, d DATETIME(6))", database=db)
    file, _ = old_server.current_position()
    old_server.execute("INSERT INTO f VALUES (1, 'ab', 'ünï')", database=db)
    old_server.execute("INSERT INTO h VALUES (1, '2024-02-29 23:59:58.123456')", database=db)
    old_server.execute("FLUSH BINARY LOGS")
    path = old_server.log_bin_path.parent / file
    for decoder in ("python", "c"):
        txs = list(assemble(read_events(path, row_decoder=decoder)))
        f_rows = [ev for tx in txs for ev in tx.rows_events if ev.table.table == "f"]
        assert f_rows[0].rows == [(1, "ab", "ünï")]
        h_rows = [ev for tx in txs for ev in tx.rows_events if ev.table.table == "h"]
        with pytest.raises(ParseError) as e:
            h_rows[0].decode_rows()
        msg = str(e.value)
        assert "DATETIME" in msg and "mysql56_temporal_format" in msg and file in msg
    raw = list(assemble(read_events(path, charset="binary")))
    f_raw = [ev for tx in raw for ev in tx.rows_events if ev.table.table == "f"]
    assert f_raw[0].rows == [(1, b"ab", "ünï".encode())]
    out = subprocess.run(["python3", "-m", "cdc.cli.main", "decode", "--format", "jsonl",
                          "--include-tables", f"{db}.f", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"ab"' in out.stdout and "ünï" in out.stdout


def test_changed_table_is_a_schema_error(old_server):
    db = "altered"
    old_server.execute(f"CREATE DATABASE `{db}`")
    old_server.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(9))", database=db)
    start = Start.at(*old_server.current_position())
    old_server.execute("INSERT INTO a VALUES (1, 'x')", database=db)
    old_server.execute("ALTER TABLE a ADD COLUMN w INT", database=db)
    client = _client(old_server, start)
    with pytest.raises(SchemaError) as e:
        for _tx in client.transactions():
            pass
    client.close()
    msg = str(e.value)
    # the history read after the ALTER does not describe the row before it: no names at all
    assert f"the TABLE_MAP of altered.a at file {start.file}, position " in msg
    assert "lacks column metadata" in msg and "changed by the statement ending at" in msg
    assert "binlog_row_metadata=FULL" in msg and "resume the stream from a position after" in msg


def test_enum_set_members_with_4_byte_characters(old_server, caplog):
    """information_schema (and SHOW CREATE TABLE) show a member with a 4-byte character as '?'
    (utf8mb3 metadata): the members are read from the server's values instead -- on MariaDB
    through TYPE OF variables even when no row holds them any more; where that statement is not
    available (MySQL), from rows that hold them, and a member no row holds is a warning."""
    from cdc.replica.metadata import read_columns

    db = "emoji"
    old_server.execute(f"CREATE DATABASE `{db}`")
    old_server.execute("CREATE TABLE e (id INT PRIMARY KEY, "
                       "e ENUM('a😀', '?', 'b''q', 'ü𝄞') CHARACTER SET utf8mb4, "
                       "s SET('x😀', 'y', '🐍z') CHARACTER SET utf8mb4)", database=db)
    start = Start.at(*old_server.current_position())
    old_server.execute("INSERT INTO e VALUES (1, 'a😀', 'x😀,🐍z'), (2, '?', 'y'), "
                       "(3, 'ü𝄞', '🐍z')", database=db)
    old_server.execute("DELETE FROM e WHERE id IN (1, 3)", database=db)   # no row holds them now
    conn = old_server.connect()

    def query(sql, args):
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    try:
        # the premise: information_schema has lost the characters
        raw = query("SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = 'e' AND COLUMN_NAME = 'e'", (db,))
        assert raw[0][0] == "enum('a?','?','b''q','ü?')"
        cols = {c.name: c for c in read_columns(query, db, "e")}
        assert cols["e"].members == ["a😀", "?", "b'q", "ü𝄞"]
        assert cols["s"].members == ["x😀", "y", "🐍z"]

        # without TYPE OF variables (MySQL): rows holding the members, the rest a warning
        from cdc.errors import CdcError

        def no_compound(sql, args):
            if "NOT ATOMIC" in sql:
                raise CdcError("syntax")
            return query(sql, args)
        old_server.execute("INSERT INTO e VALUES (4, 'ü𝄞', 'x😀,y')", database=db)
        caplog.clear()
        cols = {c.name: c for c in read_columns(no_compound, db, "e")}
        assert cols["e"].members == ["a?", "?", "b'q", "ü𝄞"]
        assert cols["s"].members == ["x😀", "y", "?z"]
        warned = " ".join(r.getMessage() for r in caplog.records)
        assert "'a?'" in warned and "'?z'" in warned and "binlog_row_metadata=FULL" in warned
    finally:
        conn.close()

    client = _client(old_server, start)
    changes = [c for tx in client.transactions() for c in tx.changes() if c.table == "e"]
    client.close()
    assert [(c.op, c.after or c.before) for c in changes][:3] == [
        ("c", (1, "a😀", "x😀,🐍z")), ("c", (2, "?", "y")), ("c", (3, "ü𝄞", "🐍z"))]
