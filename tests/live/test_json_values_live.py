"""MySQL JSON documents through every output, against the server's own text of them.

On MySQL 9.7 one workload writes JSON documents of every kind -- the null literal next to SQL
NULL, top-level scalars (strings, numbers, DATE/TIME/DATETIME/TIMESTAMP, DECIMAL and opaque
values made with CAST), BLOB/BIT/VARBINARY/GEOMETRY/TIMESTAMP columns put into documents,
nested arrays and objects, a document over 64 KiB (the large binary format) -- then updates them
with ``binlog_row_value_options=PARTIAL_JSON`` (full images: the diffs are applied; a MINIMAL
image: :class:`cdc.values.kinds.JsonDiffs`) and deletes some.  After every statement the
reference is read back: ``SELECT CAST(j AS CHAR), j IS NULL`` (``JSON_EXTRACT`` of a diff's
path for the MINIMAL updates).  Checked against it:

* the library value (files with both row decoders, and ReplicaClient): SQL NULL is ``None``,
  the JSON null literal :data:`cdc.JSON_NULL`, and ``json_to_text(value)`` is the server's text;
* ``decode --format jsonl`` and the Spark source's JSON mode: the document as nested JSON whose
  numbers are the server's number texts and whose temporal/opaque scalars the server's strings;
  the JSON null literal is ``{"$json": null}``;
* the Spark source's typed mode and a DeltaUpserter's Delta tables (JSON and typed mode): the
  server's text itself, ``"null"`` for the null literal, a SQL NULL for SQL NULL;
* ``decode`` text: ``mysqlbinlog -v`` of the same files, line for line (the partial updates,
  which mysqlbinlog prints as JSON_REPLACE(...) calls, excepted).

MariaDB's JSON is LONGTEXT: its values stay text (``'null'`` is the string ``"null"``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cdc import JSON_NULL
from cdc.binlog.files import read_events
from cdc.binlog.transactions import TableFilter, assemble
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig
from cdc.values.jsonb import json_to_text
from cdc.values.kinds import ABSENT, JsonDiffs
from tests.support.type_matrix import loads_exact

pytestmark = pytest.mark.server

DB = "jv"

#: (id, SQL of the document) for ``t``; some read the helper table ``src``.
DOCS = [
    (1, "'null'"),
    (2, "NULL"),
    (3, "'\"str\"'"),
    (4, "'\"null\"'"),
    (5, "JSON_OBJECT('dt', CAST('2024-01-02 03:04:05' AS DATETIME), 'tm', CAST('12:00:00' AS TIME),"
        " 'bin', CAST(x'0102' AS BINARY))"),
    (6, "JSON_ARRAY(CAST('2024-01-02' AS DATE), CAST(1.50 AS DECIMAL(5,2)), "
        "CAST('2024-01-02 03:04:05.123' AS DATETIME(3)), CAST(b'101' AS JSON), "
        "CAST(-0.000000015 AS DECIMAL(20,10)))"),
    (7, "CAST(CAST('2024-01-02 03:04:05.5' AS DATETIME(1)) AS JSON)"),
    (8, "CAST(CAST('-838:59:59' AS TIME) AS JSON)"),
    (9, "CAST(ST_GeomFromText('POINT(1 1)') AS JSON)"),
    (10, "CAST(x'00ff' AS JSON)"),
    (11, "JSON_ARRAY(NULL, JSON_OBJECT('a', NULL))"),
    (12, "'1.5'"),
    (13, "'true'"),
    (14, "CAST(CAST(1.5 AS DECIMAL(3,1)) AS JSON)"),
    (15, "CAST(CAST('2024-02-29' AS DATE) AS JSON)"),
    (16, "(SELECT JSON_OBJECT('ts', ts, 'blob', bl, 'bit', bt, 'vb', vb, 'g', g, 'yr', yr, "
         "'tsa', JSON_ARRAY(ts)) FROM src)"),
    (17, "(SELECT CAST(ts AS JSON) FROM src)"),
    (18, "(SELECT CAST(bl AS JSON) FROM src)"),
    (19, "JSON_OBJECT('big', REPEAT('x', 70000), 'dt', CAST('2001-02-03 04:05:06.7' AS DATETIME(1)),"
         " 'arr', JSON_ARRAY(CAST('-01:02:03.25' AS TIME(2)), CAST(x'ff00' AS BINARY)))"),
    (20, "JSON_OBJECT('a', JSON_ARRAY(JSON_OBJECT('d', CAST('1000-01-01' AS DATE), "
         "'dec', CAST(12345678901.0123456789 AS DECIMAL(21,10))), JSON_ARRAY(JSON_ARRAY("
         "CAST('-838:59:58.999999' AS TIME(6))))), 'e', JSON_OBJECT())"),
    (21, "'[1e300, 1.5e-7, 0.1, -0.0, 123456789012345678, 1e15, 100000000000000.5]'"),
    (22, "'\"a\\\\nb\\\\\"c \\\\u0001 é 😀\"'"),
    (23, "'{\"k\": \"\\\\u0001\", \"\": []}'"),
    (24, "'\"\"'"),
]

#: Statements after the inserts, each changing one row of ``t``: (id, SQL).
UPDATES = [
    (5, "UPDATE t SET j = JSON_SET(j, '$.dt', CAST('2025-05-05 01:02:03.25' AS DATETIME(2)), "
        "'$.new', CAST(x'ff' AS BINARY)) WHERE id = 5"),
    (6, "UPDATE t SET j = JSON_REPLACE(j, '$[0]', CAST('23:59:59' AS TIME)) WHERE id = 6"),
    (6, "UPDATE t SET j = JSON_REMOVE(j, '$[1]') WHERE id = 6"),
    (19, "UPDATE t SET j = JSON_SET(j, '$.arr[1]', CAST('2030-01-01' AS DATE), '$.dt', "
         "CAST('12:00:00' AS TIME)) WHERE id = 19"),
    (20, "UPDATE t SET j = JSON_ARRAY_INSERT(j, '$.a[0]', CAST(2.50 AS DECIMAL(4,2))) WHERE id = 20"),
    (1, "UPDATE t SET j = '{\"a\": 1}' WHERE id = 1"),
    (3, "UPDATE t SET j = 'null' WHERE id = 3"),
    (4, "UPDATE t SET j = NULL WHERE id = 4"),
    (2, "UPDATE t SET j = CAST('null' AS JSON) WHERE id = 2"),
]

#: MINIMAL-image partial updates of ``tm`` (JsonDiffs): (id, SQL, [(op, path)]).
MINIMAL_DOC = ("JSON_OBJECT('tm', CAST('00:00:01' AS TIME), 'l', JSON_ARRAY(1, 2), "
               "'x', CAST(x'01' AS BINARY))")
MINIMAL_UPDATES = [
    (1, "UPDATE tm SET j = JSON_SET(j, '$.tm', CAST('01:00:00' AS TIME)) WHERE id = 1",
     [("replace", "$.tm")]),
    (1, "UPDATE tm SET j = JSON_SET(j, '$.d', CAST('2024-01-02 03:04:05' AS DATETIME), "
        "'$.x', CAST(x'0203' AS BINARY)) WHERE id = 1", [("insert", "$.d"), ("replace", "$.x")]),
    (1, "UPDATE tm SET j = JSON_REMOVE(j, '$.l[0]') WHERE id = 1", [("remove", "$.l[0]")]),
]

DELETES = [(9, "DELETE FROM t WHERE id = 9"), (16, "DELETE FROM t WHERE id = 16")]

#: ``ts``: documents that are JSON strings only (a Delta batch of them must still hold their text)
STRING_DOCS = [(1, "'\"str\"'"), (2, "NULL"), (3, "'\"null\"'"), (4, "'\"\"'")]


def _doc_ref(cur, table: str, ident: int):
    cur.execute(f"SELECT CAST(j AS CHAR), j IS NULL FROM `{table}` WHERE id = %s", (ident,))
    row = cur.fetchone()
    if row is None:
        return None
    text, is_null = row
    assert (text is None) == bool(is_null)
    return text


class Workload:
    """The statements' expected changes ``[(table, op, id, before, after)]`` in binlog order
    (``before``/``after``: a document's text, None for SQL NULL, ``ABSENT`` outside the image,
    ``("diff", [(op, path, value text)])`` for a MINIMAL partial update), the binlog files and
    the start position."""

    def __init__(self, server, start, files, changes, final):
        self.server, self.start, self.files, self.changes, self.final = \
            server, start, files, changes, final      # final: {table: {id: text}}


def _mysql_workload(server, tmp_path_factory) -> Workload:
    conn = server.connect()
    cur = conn.cursor()
    cur.execute("SET SESSION time_zone = '+00:00'")
    cur.execute(f"DROP DATABASE IF EXISTS {DB}")
    cur.execute(f"CREATE DATABASE {DB}")
    cur.execute(f"USE {DB}")
    cur.execute("CREATE TABLE src (ts TIMESTAMP(6) NULL, bl BLOB, bt BIT(12), vb VARBINARY(8), "
                "g GEOMETRY, yr YEAR)")
    cur.execute("INSERT INTO src VALUES ('2024-06-01 12:00:00.123456', x'00010203fe', b'101000001111',"
                " x'41', ST_GeomFromText('LINESTRING(0 0, 1 1.5)'), 2024)")
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, j JSON)")
    cur.execute("CREATE TABLE tm (id INT PRIMARY KEY, j JSON)")
    cur.execute("CREATE TABLE ts (id INT PRIMARY KEY, j JSON)")
    start = server.current_position()
    for ident, sql in STRING_DOCS:
        cur.execute(f"INSERT INTO ts VALUES ({ident}, {sql})")
    changes = []
    for ident, sql in DOCS:
        cur.execute(f"INSERT INTO t VALUES ({ident}, {sql})")
        changes.append(("t", "c", ident, None, _doc_ref(cur, "t", ident)))
    cur.execute("SET SESSION binlog_row_value_options = 'PARTIAL_JSON'")
    for ident, sql in UPDATES:
        before = _doc_ref(cur, "t", ident)
        cur.execute(sql)
        changes.append(("t", "u", ident, before, _doc_ref(cur, "t", ident)))
    cur.execute(f"INSERT INTO tm VALUES (1, {MINIMAL_DOC})")
    changes.append(("tm", "c", 1, None, _doc_ref(cur, "tm", 1)))
    cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
    for ident, sql, diffs in MINIMAL_UPDATES:
        cur.execute(sql)
        want = []
        for op, path in diffs:
            if op == "remove":
                want.append((op, path, ABSENT))
            else:
                cur.execute("SELECT CAST(JSON_EXTRACT(j, %s) AS CHAR) FROM tm WHERE id = %s",
                            (path, ident))
                want.append((op, path, cur.fetchone()[0]))
        changes.append(("tm", "u", ident, ABSENT, ("diff", want)))
    cur.execute("SET SESSION binlog_row_image = 'FULL'")
    for ident, sql in DELETES:
        before = _doc_ref(cur, "t", ident)
        cur.execute(sql)
        changes.append(("t", "d", ident, before, None))
    final = {}
    for table in ("t", "ts"):
        cur.execute(f"SELECT id, CAST(j AS CHAR) FROM {table}")
        final[table] = dict(cur.fetchall())
    conn.close()
    files = server.snapshot_binlogs(tmp_path_factory.mktemp("json-binlogs"), since_file=start[0])
    return Workload(server, start, files, changes, final)


@pytest.fixture(scope="module")
def mysql_json(mysql97, tmp_path_factory):
    return _mysql_workload(mysql97, tmp_path_factory)


# --- canonical forms: (table, op, id, before, after) with images reduced to the j column ----------

def _canon_library(v):
    """A library value: None (SQL NULL), ABSENT, ("diff", ...), or the document's text --
    the null literal only as JSON_NULL."""
    if v is None or v is ABSENT:
        return v
    if isinstance(v, JsonDiffs):
        return ("diff", [(d["op"], d["path"], json_to_text(d["value"]) if "value" in d else ABSENT)
                         for d in v.diffs])
    if v is not JSON_NULL and json_to_text(v) == "null":
        return ("a null that is not JSON_NULL", repr(v))
    return json_to_text(v)


def _expected_envelope(want):
    """The parsed (loads_exact) JSON-image value a document's text must give."""
    if want is None or want is ABSENT:
        return want
    if isinstance(want, tuple):
        return [("$json_diff", [[("op", op), ("path", path)] + ([] if v is ABSENT else
                                                                [("value", loads_exact(v))])
                                for op, path, v in want[1]])]
    if want == "null":
        return [("$json", None)]
    return loads_exact(want)


def _expected_text(want):
    """The text of a typed-mode string column (and of Delta's)."""
    if want is None or want is ABSENT or not isinstance(want, tuple):
        return want
    return ('{"$json_diff": [' + ", ".join(
        '{"op": "%s", "path": "%s"%s}' % (op, path, "" if v is ABSENT else ', "value": ' + v)
        for op, path, v in want[1]) + "]}")


def _mismatches(want, got, canon_want) -> list:
    out = []
    if len(want) != len(got):
        out.append(f"{len(got)} changes, expected {len(want)}: {got[:3]}...")
    for w, g in zip(want, got):
        table, op, ident, before, after = w
        exp = (table, op, ident, canon_want(before), canon_want(after))
        if exp != g:
            out.append(f"expected {exp!r:.400}\n      got {g!r:.400}")
    return out


def _image_j(image, names):
    if image is None:
        return None
    values = dict(zip(names, image))
    return values.get("j", ABSENT)


def _from_changes(changes) -> list:
    out = []
    for c in changes:
        if c.schema != DB or c.table not in ("t", "tm"):
            continue
        image = c.after if c.after is not None else c.before
        ident = image[0] if image[0] is not ABSENT else c.before[0]
        out.append((c.table, c.op, ident, _canon_library(_image_j(c.before, c.columns)),
                    _canon_library(_image_j(c.after, c.columns))))
    return out


# --- the library ----------------------------------------------------------------------------------

@pytest.mark.parametrize("decoder", ["python", "c"])
def test_files_library_values_equal_the_servers_text(mysql_json, decoder, row_decoder):
    if decoder == "c":
        pytest.importorskip("cdc.rows._rowdecode")
    txs = assemble(read_events(mysql_json.files, row_decoder=decoder), TableFilter([f"{DB}.*"]))
    got = _from_changes(c for tx in txs for c in tx.changes())
    problems = _mismatches(mysql_json.changes, got, lambda v: v)
    assert not problems, "\n".join(problems)


def test_replica_library_values_equal_the_servers_text(mysql_json):
    s = mysql_json.server
    cfg = ReplicaConfig(s.host, s.port, s.CDC_USER, s.CDC_PASSWORD,
                        table_filter=TableFilter([f"{DB}.t", f"{DB}.tm"]))
    client = ReplicaClient(cfg, start=Start.at(*mysql_json.start), blocking=False)
    got = _from_changes(c for tx in client.transactions() for c in tx.changes())
    problems = _mismatches(mysql_json.changes, got, lambda v: v)
    assert not problems, "\n".join(problems)


def test_json_null_is_not_sql_null():
    """The sentinel: falsy like None, yet not None; one object, kept by pickling and copying."""
    import copy
    import pickle

    assert JSON_NULL is not None and not JSON_NULL and repr(JSON_NULL) == "JSON_NULL"
    assert pickle.loads(pickle.dumps(JSON_NULL)) is JSON_NULL
    assert copy.deepcopy(JSON_NULL) is JSON_NULL and json_to_text(JSON_NULL) == "null"


# --- decode: jsonl and text -------------------------------------------------------------------------

def _envelope_changes(rows) -> list:
    """(table, op, before, after) with parsed (loads_exact) images -> canonical changes."""
    out = []
    for t, op, b, a in rows:
        if t not in ("t", "tm"):
            continue
        b, a = (None if x is None else dict(x) for x in (b, a))
        ident = int((a if a is not None and "id" in a else b)["id"][1])
        out.append((t, op, ident, None if b is None else b.get("j", ABSENT),
                    None if a is None else a.get("j", ABSENT)))
    return out


def test_decode_jsonl_equals_the_servers_text(mysql_json):
    res = subprocess.run([sys.executable, "-m", "cdc", "decode", "--format", "jsonl",
                          "--include-tables", f"{DB}.*", *map(str, mysql_json.files)],
                         capture_output=True, timeout=300, check=True)
    # numbers as the server wrote them: take the images' text from the line itself
    rows = []
    for line in res.stdout.decode().splitlines():
        obj = dict(loads_exact(line))
        rows.append((obj["table"], obj["op"], obj["before"], obj["after"]))
    problems = _mismatches(mysql_json.changes, _envelope_changes(rows), _expected_envelope)
    assert not problems, "\n".join(problems)


def _rows_lines(out: bytes) -> list:
    """The ``### `` lines of table ``t`` (without -vv's comments); a value that spans lines
    (mysqlbinlog's nested JSON_INSERT(JSON_REPLACE(...)) calls) joined into one."""
    lines, skip = [], False
    for line in out.split(b"\n"):
        if not line.startswith(b"### "):
            continue
        line = line.split(b" /* ")[0].rstrip()
        if line.startswith(b"###      "):
            if not skip:
                lines[-1] += line[9:]
            continue
        if line.startswith((b"### INSERT INTO ", b"### UPDATE ", b"### DELETE FROM ")):
            skip = not line.split(b"`")[3] == b"t"
        if not skip:
            lines.append(line)
    return lines


def test_decode_text_equals_mysqlbinlog(mysql_json):
    """Row images of ``t`` as ``mysqlbinlog -v`` prints them: a JSON null literal ``'null'``,
    top-level strings and temporal/opaque scalars unquoted (``'str'``).  The updates logged as
    partial JSON (mysqlbinlog prints them as ``JSON_REPLACE(@2, ...)`` calls; decode prints the
    document the diffs make) are left out."""
    files = list(map(str, mysql_json.files))
    ours = subprocess.run([sys.executable, "-m", "cdc", "decode", *files], capture_output=True,
                          timeout=300, check=True).stdout
    ref = subprocess.run([mysql_json.server.program("mysqlbinlog"), "--no-defaults", "-vv",
                          "--base64-output=decode-rows", *files], capture_output=True,
                         timeout=300, check=True).stdout
    a, b = _rows_lines(ours), _rows_lines(ref)
    assert len(a) == len(b), (len(a), len(b))
    partial = {i for i, line in enumerate(b) if b"=JSON_" in line}
    diff = [(x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y and i not in partial]
    assert not diff, "\n".join(f"ours {x!r:.300}\nref  {y!r:.300}" for x, y in diff[:20])
    texts = [line for line in b if line.startswith(b"###   @2='")]
    assert b"###   @2='null'" in texts and b"###   @2='str'" in texts   # not vacuous
    assert len(partial) >= 4


# --- Spark: JSON and typed mode, and Delta ------------------------------------------------------------

@pytest.mark.spark
def test_spark_json_and_typed_modes_equal_the_servers_text(mysql_json, spark):
    pytest.importorskip("pyspark")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    folder = str(mysql_json.files[0].parent)
    df = spark.read.format("binlog-cdc").option("includeTables", f"{DB}.*").load(folder)
    rows = [(r["table"], r["op"], r["before"] and loads_exact(r["before"]),
             r["after"] and loads_exact(r["after"]))
            for r in df.select("table", "op", "before", "after").collect()]
    problems = _mismatches(mysql_json.changes, _envelope_changes(rows), _expected_envelope)
    assert not problems, "JSON mode:\n" + "\n".join(problems)

    df = spark.read.format("binlog-cdc").option("table", f"{DB}.t").load(folder)
    got = [("t", r["op"], (r["after"] or r["before"])["id"],
            None if r["before"] is None else r["before"]["j"],
            None if r["after"] is None else r["after"]["j"])
           for r in df.select("op", "before", "after").collect()]
    want = [c for c in mysql_json.changes if c[0] == "t"]
    problems = _mismatches(want, got, _expected_text)
    assert not problems, "typed mode:\n" + "\n".join(problems)


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["json", "typed"])
def test_delta_tables_hold_the_servers_text(mysql_json, spark, tmp_path, mode):
    pytest.importorskip("deltalake")
    from deltalake import DeltaTable

    from test_delta import run_available_now

    from streaming.sinks.delta.upserter import DeltaUpserter
    from tests.support.spark_support import source_options

    s = mysql_json.server
    p = s.cdc_params()
    opts = source_options(s, DB, mysql_json.start, serverId=7301 if mode == "json" else 7302)
    if mode == "typed":
        del opts["includeTables"]
        opts["table"] = f"{DB}.t"
    else:
        opts["includeTables"] = f"{DB}.t,{DB}.ts"
    up = DeltaUpserter(str(tmp_path / "delta"), host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id=f"json-{mode}")
    q = run_available_now(spark, opts, up, tmp_path / "chk", timeout=240)
    assert q.exception() is None, q.exception()
    for name in ("t", "ts") if mode == "json" else ("t",):
        table = DeltaTable(str(tmp_path / "delta" / DB / name)).to_pyarrow_table()
        got = dict(zip(table.column("id").to_pylist(), table.column("j").to_pylist()))
        assert got == mysql_json.final[name], name


# --- MariaDB: JSON is text ----------------------------------------------------------------------------

@pytest.mark.servers("mariadb-10.11", "mariadb-11.8")
def test_mariadb_json_stays_text(server, db, binlog_snapshot):
    start = server.current_position()
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, j JSON)")
    server.execute(f"INSERT INTO `{db}`.t VALUES (1, 'null'), (2, NULL), (3, '\"s\"'), "
                   f"(4, '{{\"a\": [1.50, null]}}')")
    ref = dict(server.execute(f"SELECT id, j FROM `{db}`.t"))
    files = binlog_snapshot(server, since_file=start[0])
    txs = assemble(read_events(files), TableFilter([f"{db}.t"]))
    got = {c.after[0]: c.after[1] for tx in txs for c in tx.changes()}
    assert got == ref and got[1] == "null" and type(got[1]) is str and got[2] is None
    out = subprocess.run([sys.executable, "-m", "cdc", "decode", "--format", "jsonl",
                          *map(str, files)], capture_output=True, check=True, timeout=120).stdout
    after = [json.loads(line)["after"] for line in out.decode().splitlines()
             if json.loads(line)["table"] == "t" and json.loads(line)["db"] == db]
    assert [a["j"] for a in after] == ["null", None, '"s"', '{"a": [1.50, null]}']
