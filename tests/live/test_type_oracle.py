"""Differential type oracle (issue 12): every column type and every charset (and every
collation) of MariaDB 10.11 and of MySQL 9.7, written at several binlog levels, decoded by every
path we ship, must equal the server's own SELECT.

Levels (a private server each): MariaDB ``FULL``, ``NO_LOG``, ``MINIMAL`` (``binlog_row_metadata``;
MINIMAL with compressed events) and ``OLD_TEMPORAL`` (``mysql56_temporal_format=OFF``); MySQL
``mysql-FULL``, ``mysql-MINIMAL`` (with compressed transactions), ``mysql-PARTIAL_JSON`` and
``mysql-PARTIAL_JSON_MINIMAL`` (``binlog_row_value_options=PARTIAL_JSON``, full and
primary-key-only before images: JSON diffs decode to the document, or to diffs that applied to
the document before give the document after).

The matrix and the canonical forms are in :mod:`tests.support.type_matrix`.  One workload per
level: CREATE + multi-row INSERT, the table's UPDATEs (each ``SET id = id + 100000``, every
column in a before and an after image, and its assignments), DELETE of every other row.
References are SELECTed after the INSERT and after each UPDATE.  Each case is its own test id
``[<decoder>-<level>-<group>-<source>]`` (group: ``types``, ``single`` (a one-column table),
``charset-<name>``, ``old-fsp0``/``old-fsp``; MySQL also ``geometry``, ``json``,
``json-strings``, ``json-null``, ``partial-json``); sources:

* ``replica``: :class:`cdc.ReplicaClient` row images (both row decoders);
* ``files``: ``read_events`` + ``assemble`` over the closed binlog files (both row decoders);
* ``cli``: ``binlog-cdc decode --format jsonl`` (``BINLOG_CDC_DECODER`` per decoder);
* ``text``: ``binlog-cdc decode`` against ``mariadb-binlog -v`` / ``mysqlbinlog -vv`` (not for
  MySQL's geometry, which mysqlbinlog does not print, nor partial JSON, which it prints as
  ``JSON_REPLACE(@2, ...)``);
* ``spark-json`` / ``spark-typed``: a batch read of the files by the Spark source;
* ``spark-stream-json`` / ``spark-stream-typed``: an availableNow stream from the live server
  (Spark workers decode with their default decoder: the Spark sources run under ``[c]`` only;
  on MySQL for a subset of the groups, :data:`MYSQL_SPARK_GROUPS`).

What the binlog alone cannot tell is not demanded of file decoders: under NO_LOG (no charsets,
signedness, members, names) they use the documented default charset utf8mb4 and the columns
that need metadata (``Col.needs_metadata``) are not compared; under MINIMAL only ENUM/SET members
are missing; a typed batch read of such files is a ConfigurationError naming
binlog_row_metadata=FULL; old temporal formats with fractional seconds are an error naming
mysql56_temporal_format.  Live streams (which read information_schema) are held to every column.
MySQL 5.7's binary JSON is the format 9.7 writes: the MySQL levels cover it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import _start_named

from cdc.binlog.files import read_events
from cdc.binlog.transactions import TableFilter, assemble
from cdc.embedded import EmbeddedMariaDB
from cdc.values.kinds import ABSENT
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig
from tests.support import type_matrix as M

pytestmark = pytest.mark.server

DB = "oracle"
MYSQL = "mysql-9.7"
LEVELS = {   # level (workload) -> (server, server options)
    "FULL": ("mariadb-10.11", {"binlog_row_metadata": "FULL"}),
    "NO_LOG": ("mariadb-10.11", {"binlog_row_metadata": "NO_LOG"}),
    "OLD_TEMPORAL": ("mariadb-10.11", {"binlog_row_metadata": "FULL",
                                       "mysql56_temporal_format": "OFF"}),
    # MINIMAL also with compressed events (MariaDB's log_bin_compress): every type through the
    # compressed rows-event path too
    "MINIMAL": ("mariadb-10.11", {"binlog_row_metadata": "MINIMAL", "log_bin_compress": "ON",
                                  "log_bin_compress_min_len": 10}),
    "mysql-FULL": (MYSQL, {"binlog_row_metadata": "FULL"}),
    # MINIMAL with compressed transactions (TRANSACTION_PAYLOAD events)
    "mysql-MINIMAL": (MYSQL, {"binlog_row_metadata": "MINIMAL",
                              "binlog_transaction_compression": "ON"}),
    # JSON_SET/JSON_REPLACE/JSON_REMOVE logged as JSON diffs, after a full before image
    # (decoded to the document) or after a primary-key-only one (decoded to the diffs)
    "mysql-PARTIAL_JSON": (MYSQL, {"binlog_row_value_options": "PARTIAL_JSON"}),
    "mysql-PARTIAL_JSON_MINIMAL": (MYSQL, {"binlog_row_value_options": "PARTIAL_JSON",
                                           "binlog_row_image": "MINIMAL"}),
}
#: MINIMAL (charsets and signedness, no names or ENUM/SET members): a few charsets suffice
MINIMAL_CHARSETS = ("latin1", "cp1251", "sjis", "ucs2", "utf8mb4")
SOURCES = ("replica", "files", "cli", "spark-json", "spark-typed", "spark-stream-json")
PLAIN_SOURCES = ("replica", "files", "cli", "text")
SPARK_SOURCES = ("spark-json", "spark-typed", "spark-stream-json")
GROUPS = ("types", "single") + tuple("charset-" + cs for cs in M.CHARSETS)
#: MySQL: every group through the decoders; the Spark sources (CPU-heavy) on a subset
MYSQL_GROUPS = (("types", "geometry", "single", "json", "json-strings", "json-null")
                + tuple("charset-" + cs for cs in M.MYSQL_CHARSETS))
MYSQL_SPARK_GROUPS = ("types", "geometry", "single", "json", "json-strings", "json-null",
                      "charset-gb18030", "charset-sjis", "charset-utf16")
CASES = ([(lv, g, s) for lv in ("FULL", "NO_LOG") for g in GROUPS for s in SOURCES]
         + [("FULL", g, "text") for g in GROUPS]
         + [(lv, "types", "spark-stream-typed") for lv in ("FULL", "NO_LOG")]
         + [("OLD_TEMPORAL", g, s) for g in ("old-fsp0", "old-fsp") for s in SOURCES]
         + [("MINIMAL", g, s) for g in ("types", "single", *("charset-" + c for c in MINIMAL_CHARSETS))
            for s in SOURCES]
         # mysqlbinlog -v prints no GEOMETRY value: no text reference for that group
         + [("mysql-FULL", g, s) for g in MYSQL_GROUPS for s in PLAIN_SOURCES
            if (g, s) != ("geometry", "text")]
         + [("mysql-FULL", g, s) for g in MYSQL_SPARK_GROUPS for s in SPARK_SOURCES]
         + [("mysql-FULL", g, "spark-stream-typed") for g in ("types", "geometry", "json")]
         + [("mysql-MINIMAL", g, s) for g in ("types", "single", "json", "charset-gb18030",
                                              *("charset-" + c for c in MINIMAL_CHARSETS))
            for s in PLAIN_SOURCES]
         + [("mysql-MINIMAL", g, s) for g in ("types", "json") for s in SPARK_SOURCES]
         + [(lv, "partial-json", s) for lv in ("mysql-PARTIAL_JSON", "mysql-PARTIAL_JSON_MINIMAL")
            for s in ("replica", "files", "cli", *SPARK_SOURCES, "spark-stream-typed")])
UPDATE_SHIFT = 100000
#: tables whose binlog files cannot be decoded without the server (old temporal formats with
#: fractional seconds): file decoders must raise an error naming the setting
UNDECODABLE_FILES = {"old_fsp": "mysql56_temporal_format"}


class Workload:
    def __init__(self, level, server):
        self.level, self.server = level, server
        options = LEVELS[level][1]
        self.flavor = server.FLAVOR                   # "mariadb" / "mysql"
        self.meta = options.get("binlog_row_metadata", "FULL")
        self.row_image = options.get("binlog_row_image", "FULL")
        self.tables: dict = {}              # name -> M.Table
        #: table -> {(op, id): (before, after, columns assigned)} canonical; the assigned
        #: columns (indexes) of an UPDATE, else None
        self.expected: dict = {}
        self.sets: list = []                # [(start (file, pos), [binlog files], [tables])]
        self.cache: dict = {}               # (source, decoder, set) -> result or exception
        self.charsets: list = []

    def set_of(self, table: str) -> int:
        return next(k for k, (_, _, names) in enumerate(self.sets) if table in names)


def _start(basedir: Path, level: str) -> EmbeddedMariaDB:
    name, options = LEVELS[level]
    return _start_named(name, basedir=basedir, extra_options=options)


def _reference(cur, table: M.Table) -> dict:
    exprs = ", ".join(M.ref_expr(c) for c in table.cols)
    cur.execute(f"SELECT {exprs} FROM `{table.name}`")
    out = {}
    for row in cur.fetchall():
        canon = tuple(M.canon_ref(c, v) for c, v in zip(table.cols, row))
        out[canon[0]] = canon
    return out


def _build(cur, server, only=None) -> list:
    cur.execute("SHOW CHARACTER SET")
    charsets = sorted((r[0], int(r[3])) for r in cur.fetchall() if not only or r[0] in only)
    if server.FLAVOR == "mysql":
        tables = M.mysql_types_tables()
    else:
        tables = [M.types_table(server.version_tuple)]
    cur.execute("SELECT COLLATION_NAME, CHARACTER_SET_NAME FROM information_schema.COLLATIONS "
                "WHERE IS_DEFAULT <> 'Yes' AND CHARACTER_SET_NAME IS NOT NULL")
    others: dict = {}
    for coll, cs in cur.fetchall():
        others.setdefault(cs, []).append(coll)
    for cs, maxlen in charsets:
        rep = M.discover_repertoire(cur, cs, maxlen)
        tables.append(M.charset_table(cs, rep, M.discover_members(cur, cs, rep),
                                      sorted(others.get(cs, []))))
    return charsets, tables


def _write(cur, t: M.Table) -> dict:
    """CREATE, INSERT, the UPDATEs (each: id + UPDATE_SHIFT and ``t.updates``' assignments),
    DELETE (even ids): the expected changes."""
    for sql in t.setup:
        cur.execute(sql)
    cur.execute(f"CREATE TABLE `{t.name}` (" +
                ", ".join(f"`{c.name}` {c.ddl}" for c in t.cols) + ")")
    names = ", ".join(f"`{c.name}`" for c in t.cols)   # invisible columns too
    for k in range(0, len(t.rows), 50):
        cur.execute(f"INSERT INTO `{t.name}` ({names}) VALUES " + ", ".join(
            "(" + ", ".join(r) + ")" for r in t.rows[k:k + 50]))
    refs = [_reference(cur, t)]
    index = {c.name: i for i, c in enumerate(t.cols)}
    for assignments in t.updates:
        cur.execute(f"UPDATE `{t.name}` SET id = id + {UPDATE_SHIFT}"
                    + "".join(f", `{c}` = {e}" for c, e in assignments))
        refs.append(_reference(cur, t))
    cur.execute(f"DELETE FROM `{t.name}` WHERE id % 2 = 0")
    exp = {}
    for key, row in refs[0].items():
        exp[("c", key)] = (None, row, None)
        for k, assignments in enumerate(t.updates):
            new = refs[k + 1][str(int(row[0]) + UPDATE_SHIFT)]
            exp[("u", row[0])] = (row, new, frozenset([0, *(index[c] for c, _ in assignments)]))
            row = new
        if int(row[0]) % 2 == 0:
            exp[("d", row[0])] = (row, None, None)
    return exp


@pytest.fixture(scope="module")
def workload(request, tmp_path_factory):
    level = request.param
    server = _start(tmp_path_factory.mktemp(f"oracle-{level}"), level)
    w = Workload(level, server)
    try:
        conn = server.connect()
        cur = conn.cursor()
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(f"USE {DB}")
        if level == "OLD_TEMPORAL":
            sets = [[t] for t in M.old_temporal_tables()]   # one binlog file set each
        elif level.startswith("mysql-PARTIAL_JSON"):
            sets = [[M.partial_json_table()]]
        else:
            only = {"MINIMAL": MINIMAL_CHARSETS,
                    "mysql-MINIMAL": (*MINIMAL_CHARSETS, "gb18030")}.get(level)
            w.charsets, tables = _build(cur, server, only)
            tables.append(M.single_table())
            sets = [tables]
        for k, tables in enumerate(sets):
            start = server.current_position()
            for t in tables:
                w.tables[t.name] = t
                w.expected[t.name] = _write(cur, t)
            files = server.snapshot_binlogs(tmp_path_factory.mktemp(f"oracle-{level}-{k}"),
                                            since_file=start[0])
            w.sets.append((start, files, [t.name for t in tables]))
        conn.close()
        yield w
    finally:
        server.cleanup()


# --- the sources --------------------------------------------------------------------------------

def _from_python(changes) -> dict:
    out: dict = {}
    for c in changes:
        out.setdefault(c.table, []).append((c.op, c.before, c.after, None))
    return out


def _replica(w: Workload, decoder: str, k: int) -> dict:
    s = w.server
    cfg = ReplicaConfig(s.host, s.port, s.CDC_USER, s.CDC_PASSWORD, row_decoder=decoder,
                        table_filter=TableFilter([f"{DB}.{t}" for t in w.sets[k][2]]))
    client = ReplicaClient(cfg, start=Start.at(*w.sets[k][0]), blocking=False)
    return _from_python(c for tx in client.transactions() for c in tx.changes())


def _files(w: Workload, decoder: str, k: int) -> dict:
    return _from_python(c for tx in assemble(read_events(w.sets[k][1], row_decoder=decoder),
                                             TableFilter([f"{DB}.*"])) for c in tx.changes())


def _json_image(text):
    return None if text is None else M.loads_exact(text) if isinstance(text, str) else text


def _cli(w: Workload, decoder: str, k: int) -> dict:
    env = dict(os.environ, BINLOG_CDC_DECODER=decoder)
    res = subprocess.run([sys.executable, "-m", "cdc", "decode", "--format", "jsonl",
                          "--include-tables", f"{DB}.*", *map(str, w.sets[k][1])],
                         capture_output=True, env=env, timeout=300)
    if res.returncode != 0:
        raise AssertionError(f"decode --format jsonl exited {res.returncode}: "
                             f"{res.stderr.decode(errors='replace')[-2000:]}")
    out: dict = {}
    for line in res.stdout.decode("utf-8").split("\n"):
        if not line:
            continue
        obj = dict(M.loads_exact(line))
        out.setdefault(obj["table"], []).append((obj["op"], obj["before"], obj["after"], "json"))
    return out


def _table_name(group: str) -> str:
    return "cs_" + group.removeprefix("charset-") if group.startswith("charset-") \
        else group.replace("-", "_")


def _case_tables(w: Workload, source: str, k: int) -> list:
    """The tables of set *k* that *source* has cases for (a Spark source: maybe a subset)."""
    groups = {g for lv, g, s in CASES if lv == w.level and s == source}
    return [t for t in w.sets[k][2] if w.tables[t].group in groups]


def _spark_json(w: Workload, spark, k: int) -> dict:
    tables = ",".join(f"{DB}.{t}" for t in _case_tables(w, "spark-json", k))
    df = (spark.read.format("binlog-cdc").option("includeTables", tables)
          .load(str(w.sets[k][1][0].parent)))
    out: dict = {}
    for r in df.select("op", "table", "before", "after").collect():
        out.setdefault(r["table"], []).append((r["op"], _json_image(r["before"]),
                                               _json_image(r["after"]), "json"))
    return out


def _spark_typed(w: Workload, spark, k: int) -> dict:
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    out: dict = {}
    for name in _case_tables(w, "spark-typed", k):
        try:
            df = (spark.read.format("binlog-cdc").option("table", f"{DB}.{name}")
                  .load(str(w.sets[k][1][0].parent)))
            rows = df.select("op", "before", "after").collect()
        except Exception as e:   # noqa: BLE001 - reported per table by the test
            out[name] = e
            continue
        out[name] = [(r["op"], None if r["before"] is None else tuple(r["before"]),
                      None if r["after"] is None else tuple(r["after"]), "spark") for r in rows]
    return out


def _rows_text(out: bytes) -> dict:
    """``### `` lines of mysqlbinlog -v style output, per table (``{table: [line]}``); the
    column-type comment ``mysqlbinlog -vv`` ends a value line with is left out."""
    per: dict = {}
    cur = None
    for line in out.split(b"\n"):
        if not line.startswith(b"### "):
            continue
        line = line.rstrip()
        if line.endswith(b" */") and b"=" in line:
            line = line[:line.rindex(b" /* ")].rstrip()
        for head in (b"### INSERT INTO ", b"### UPDATE ", b"### DELETE FROM "):
            if line.startswith(head):
                cur = line[len(head):].split(b".")[-1].strip(b"`").decode()
        per.setdefault(cur, []).append(line)
    return per


def _reference_decoder(w: Workload) -> list:
    """The server's own binlog decoder, printing rows: ``mariadb-binlog -v`` or
    ``mysqlbinlog -vv`` (whose type comments :func:`_rows_text` drops)."""
    if w.flavor == "mysql":
        return [w.server.program("mysqlbinlog"), "--no-defaults", "-vv"]
    return [w.server.program("mariadb-binlog"), "--no-defaults", "-v"]


def _text(w: Workload, decoder: str, k: int) -> dict:
    """``binlog-cdc decode`` (text) and the reference decoder's rows of set *k*: ``{table: (ours,
    reference)}`` -- the reference decoder prints the stored bytes of every value."""
    files = list(map(str, w.sets[k][1]))
    env = dict(os.environ, BINLOG_CDC_DECODER=decoder)
    ours = subprocess.run([sys.executable, "-m", "cdc", "decode", *files], capture_output=True,
                          env=env, timeout=300)
    if ours.returncode != 0:
        raise AssertionError(f"decode exited {ours.returncode}: {ours.stderr[-2000:]!r}")
    ref = subprocess.run([*_reference_decoder(w), "--base64-output=decode-rows", *files],
                         capture_output=True, check=True, timeout=300).stdout
    a, b = _rows_text(ours.stdout), _rows_text(ref)
    return {t: (a.get(t, []), b.get(t, [])) for t in set(a) | set(b)}


def _text_problems(table: M.Table, ours: list, ref: list) -> list:
    if len(ours) != len(ref):
        return [f"{len(ours)} lines, the reference decoder printed {len(ref)}"]
    bad: dict = {}
    for a, b in zip(ours, ref):
        if a != b:
            n = int(b.split(b"=")[0].split(b"@")[1]) - 1 if b"@" in b else -1
            bad.setdefault(n, []).append(f"ours {a[:160]!r} != reference {b[:160]!r}")
    return [f"column {table.cols[n].name} {table.cols[n].ddl[:60]}: {len(m)} lines differ, e.g. "
            + m[0] if n >= 0 else f"{len(m)} lines differ: {m[0]}" for n, m in bad.items()]


def _spark_stream(w: Workload, spark, k: int, table: str | None) -> dict:
    """An availableNow streaming read from the live server over set *k* (JSON mode, or typed
    mode of *table*): the tasks decode over their own replication connections."""
    s = w.server
    (file, pos), _, _ = w.sets[k]
    opts = {"host": s.host, "port": str(s.port), "user": s.CDC_USER, "password": s.CDC_PASSWORD,
            "serverId": "7100", "startingPosition": json.dumps({"file": file, "pos": pos})}
    if table:
        opts["table"] = f"{DB}.{table}"
    else:
        opts["includeTables"] = ",".join(f"{DB}.{t}" for t in _case_tables(
            w, "spark-stream-json", k))
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    reader = spark.readStream.format("binlog-cdc")
    for key, v in opts.items():
        reader = reader.option(key, v)
    qname = f"oracle_{w.level.lower().replace('-', '_')}_{k}_" + (f"typed_{table}" if table
                                                                    else "json")
    ckpt = Path(w.server.basedir) / f"ckpt-{qname}"
    q = (reader.load().writeStream.format("memory").queryName(qname)
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    if not q.awaitTermination(240):
        q.stop()
        raise AssertionError("the availableNow stream did not stop in 240 s")
    if q.exception() is not None:
        raise AssertionError(f"stream failed: {q.exception()}")
    out: dict = {}
    for r in spark.sql(f"SELECT op, `table`, before, after FROM {qname} ORDER BY seq").collect():
        if table:
            out.setdefault(r["table"], []).append(
                (r["op"], None if r["before"] is None else tuple(r["before"]),
                 None if r["after"] is None else tuple(r["after"]), "spark"))
        else:
            out.setdefault(r["table"], []).append((r["op"], _json_image(r["before"]),
                                                   _json_image(r["after"]), "json"))
    return out


def _decoded(w: Workload, source: str, decoder: str, spark_fixture, k: int, table: str):
    """The changes of binlog file set *k* by *source*: ``{table: [(op, before, after, how)]}``
    (Spark typed: per table, or the exception), or the exception that stopped the source.
    A typed stream reads *table* alone."""
    key = (source, decoder if not source.startswith("spark") else "default", k,
           table if source == "spark-stream-typed" else None)
    if key not in w.cache:
        try:
            if source == "replica":
                w.cache[key] = _replica(w, decoder, k)
            elif source == "files":
                w.cache[key] = _files(w, decoder, k)
            elif source == "cli":
                w.cache[key] = _cli(w, decoder, k)
            elif source == "spark-json":
                w.cache[key] = _spark_json(w, spark_fixture(), k)
            elif source == "text":
                w.cache[key] = _text(w, decoder, k)
            elif source == "spark-stream-json":
                w.cache[key] = _spark_stream(w, spark_fixture(), k, None)
            elif source == "spark-stream-typed":
                w.cache[key] = _spark_stream(w, spark_fixture(), k, table)
            else:
                w.cache[key] = _spark_typed(w, spark_fixture(), k)
        except Exception as e:   # noqa: BLE001 - the test reports it
            w.cache[key] = e
    return w.cache[key]


# --- comparison ---------------------------------------------------------------------------------

def _first_diff(a, b) -> str:
    if isinstance(a, (str, bytes)) and isinstance(b, type(a)):
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return (f"len {len(a)} vs {len(b)}, first difference at {k}: expected "
                f"{a[max(0, k - 3):k + 4]!r} got {b[max(0, k - 3):k + 4]!r}")
    return f"expected {a!r:.300} got {b!r:.300}"


def _canon(col, v, how, level):
    if how == "json":
        return M.canon_json(col, v)
    if how == "spark":
        return M.canon_spark(col, v)
    return M.canon_value(col, v)


def _image(table, values, how, problems, where):
    """A decoded image -> tuple of canonical values (JSON objects by position; their keys are
    checked against the column names or ``@n``)."""
    if values is None:
        return None
    if how == "json":   # columns left out of the image (binlog_row_image=MINIMAL): ABSENT
        given = dict(values)
        keys = [k for k, _ in values]
        for names in ([c.name for c in table.cols], [f"@{i + 1}" for i in range(len(table.cols))]):
            if keys == [n for n in names if n in given]:
                values = [given.get(n, ABSENT) for n in names]
                break
        else:
            problems.append(f"{where}: JSON keys {keys[:8]}... != column names "
                            f"{[c.name for c in table.cols][:8]}...")
            values = [v for _, v in values]
    if len(values) != len(table.cols):
        problems.append(f"{where}: {len(values)} values for {len(table.cols)} columns")
        return None
    return tuple(_canon(c, v, how, None) for c, v in zip(table.cols, values))


def _spark_expected(col, v):
    """Typed mode holds no zero dates (documented: null there)."""
    if col.kind == "temporal" and not col.name.startswith("tm_") and M.is_zero_temporal(v):
        return None
    return v


def _in_image(w: Workload, op: str, name: str, assigned) -> frozenset | None:
    """The columns (indexes) of an image, None: all.  binlog_row_image=MINIMAL: the primary key
    before, the assigned columns after an UPDATE."""
    if w.row_image != "MINIMAL" or (op, name) == ("c", "after"):
        return None
    return frozenset([0]) if name == "before" else assigned


def _compare(w: Workload, table: M.Table, changes, source: str) -> list:
    problems: list = []
    live = source in ("replica", "spark-stream-json", "spark-stream-typed")
    if live or w.meta == "FULL":
        cols = range(len(table.cols))
    elif w.meta == "MINIMAL":
        cols = [i for i, c in enumerate(table.cols) if not c.needs_members]
    else:
        cols = [i for i, c in enumerate(table.cols) if not c.needs_metadata]
    exp = w.expected[table.name]
    seen = Counter()
    bad: dict = {}
    for op, before, after, how in changes:
        image_before = _image(table, before, how, problems, f"{op} before")
        image_after = _image(table, after, how, problems, f"{op} after")
        ident = (image_before or image_after or (None,))[0]
        if (op, ident) not in exp:
            problems.append(f"unexpected change {op} id={ident}")
            continue
        seen[(op, ident)] += 1
        want_before, want_after, assigned = exp[(op, ident)]
        for name, want, got in (("before", want_before, image_before),
                                ("after", want_after, image_after)):
            if (want is None) != (got is None):
                problems.append(f"{op} id={ident}: {name} image {got!r:.100} (expected "
                                f"{'none' if want is None else 'one'})")
                continue
            if want is None:
                continue
            present = _in_image(w, op, name, assigned)
            for i in cols:
                col = table.cols[i]
                wv = _spark_expected(col, want[i]) if how == "spark" else want[i]
                if present is not None and i not in present:
                    wv = None if how == "spark" else ABSENT   # typed mode: null
                elif present is not None and M.json_diffs(got[i]) is not None:
                    # a partial JSON update without the document before: its diffs, which
                    # applied to the document before must give the document after
                    got = got[:i] + (M.apply_diffs(want_before[i], M.json_diffs(got[i])),) \
                        + got[i + 1:]
                if wv != got[i]:
                    bad.setdefault(i, []).append(f"{op} {name} id={ident}: {_first_diff(wv, got[i])}")
    missing = [k for k in exp if seen[k] == 0]
    if missing:
        problems.append(f"{len(missing)} expected changes missing, e.g. {missing[:5]}")
    problems += [f"{k} delivered {n} times" for k, n in seen.items() if n > 1]
    for i, msgs in bad.items():
        col = table.cols[i]
        problems.append(f"column {col.name} {col.ddl[:60]}: {len(msgs)} wrong values, e.g. "
                        + " | ".join(msgs[:3]))
    return problems


@pytest.fixture
def spark_lazy(request):
    """The module's SparkSession, started only by a test that needs it."""
    return lambda: request.getfixturevalue("spark")


#: Known wrong values, open defects (strict: a fix makes these tests fail until removed here).
KNOWN_DEFECTS: dict = {}


# one parameter for group and source, its value holding the level: pytest groups the tests of a
# module-scoped parameter by value, so a shared ("types", "files") would interleave the levels'
# tests and start each level's server many times
@pytest.mark.parametrize("workload,case", [(c[0], c) for c in CASES],
                         ids=["-".join(c) for c in CASES], indirect=["workload"], scope="module")
def test_decoded_equals_select(workload, case, row_decoder, spark_lazy, request):
    _, group, source = case
    known = KNOWN_DEFECTS.get((workload.level, group, source))
    if known and not (source.startswith("spark") and row_decoder == "python"):
        request.applymarker(pytest.mark.xfail(strict=True, reason=known))
    if source.startswith("spark") and row_decoder == "python":
        pytest.skip("Spark workers decode with their default decoder: checked under [c]")
    if group.startswith("charset-") and group.removeprefix("charset-") not in dict(
            workload.charsets):
        pytest.skip(f"{group}: not in this server's SHOW CHARACTER SET")
    name = _table_name(group)
    table = workload.tables[name]
    got = _decoded(workload, source, row_decoder or "c", spark_lazy, workload.set_of(name), name)
    if source == "spark-typed" and not isinstance(got, Exception):
        got = got[name]
    if source == "text" and not isinstance(got, Exception):
        problems = _text_problems(table, *got.get(name, ([], [])))
        assert not problems, (f"{workload.level} text {group}: {len(problems)} problems\n"
                              + "\n".join(p[:1000] for p in problems[:40]))
        return
    if source not in ("replica", "spark-stream-json") and name in UNDECODABLE_FILES:
        # never a wrong value: an error that names the server setting
        assert isinstance(got, Exception), f"{source} decoded {name} without the server"
        assert UNDECODABLE_FILES[name] in str(got), str(got)[:2000]
        return
    if source == "spark-typed" and workload.meta in ("NO_LOG", "MINIMAL"):
        assert isinstance(got, Exception) and "binlog_row_metadata=FULL" in str(got), got
        return
    if isinstance(got, Exception):
        raise AssertionError(f"{source} failed on {workload.level}: {type(got).__name__}: "
                             f"{str(got)[:3000]}") from got
    changes = got if source == "spark-typed" else got.get(table.name, [])
    problems = _compare(workload, table, changes, source)
    assert not problems, (f"{workload.level} {source} {group}: {len(problems)} problems\n"
                          + "\n".join(p[:1500] for p in problems[:40]))


@pytest.mark.parametrize("workload", ["FULL", "NO_LOG", "mysql-FULL"], indirect=True,
                         scope="module")
def test_every_server_charset_is_in_the_matrix(workload):
    known = M.MYSQL_CHARSETS if workload.flavor == "mysql" else M.CHARSETS
    assert {cs for cs, _ in workload.charsets} <= set(known)
    level = workload.server.execute("SELECT @@binlog_row_metadata")[0][0]
    assert level == workload.meta
    # the oracle itself is not vacuous: repertoires and members were found
    for cs, maxlen in workload.charsets:
        t = workload.tables["cs_" + cs]
        assert len(t.rows) >= 3
        if maxlen == 1 and cs != "binary":
            assert any(c.name == "e" for c in t.cols), cs


@pytest.mark.parametrize("workload", ["OLD_TEMPORAL"], indirect=True, scope="module")
def test_old_temporal_workload_is_written_in_the_old_formats(workload):
    """The OLD_TEMPORAL cases test what they claim: TIME/DATETIME/TIMESTAMP as type codes
    11/12/7 (MariaDB's pre-5.6 layouts), fractional seconds included."""
    from cdc.binlog.events import TableMapEvent

    codes = {}
    for _, files, _ in workload.sets:
        for ev in read_events(files):
            if isinstance(ev, TableMapEvent) and ev.table.schema == DB:
                codes[ev.table.table] = [c.type for c in ev.table.columns[1:]]
    assert codes["old_fsp0"] == [11, 12, 7]
    assert codes["old_fsp"] == [11, 12, 7] * 6


@pytest.mark.parametrize("workload", ["MINIMAL"], indirect=True, scope="module")
def test_minimal_workload_is_compressed(workload):
    """The MINIMAL cases also go through MariaDB's compressed rows events."""
    from cdc.binlog.constants import EventType

    types = {ev.type_code for _, files, _ in workload.sets for ev in read_events(files)}
    assert types & set(range(EventType.MARIA_WRITE_ROWS_COMPRESSED_V1, 172)), types


@pytest.mark.parametrize("workload", ["mysql-MINIMAL"], indirect=True, scope="module")
def test_mysql_minimal_workload_is_compressed(workload):
    """The mysql-MINIMAL cases also go through compressed transactions (TRANSACTION_PAYLOAD)."""
    from cdc.binlog.constants import EventType

    types = Counter(ev.type_code for _, files, _ in workload.sets for ev in read_events(files))
    assert types[EventType.TRANSACTION_PAYLOAD] > 10, types


@pytest.mark.parametrize("workload", ["mysql-PARTIAL_JSON", "mysql-PARTIAL_JSON_MINIMAL"],
                         indirect=True, scope="module")
def test_partial_json_workload_writes_json_diffs(workload):
    """The partial-json cases decode JSON diffs: every UPDATE is a PARTIAL_UPDATE_ROWS event
    and (without the document before) most JSON values after an UPDATE are diffs."""
    from cdc.binlog.constants import EventType
    from cdc.values.kinds import JsonDiffs

    (_, files, _), = workload.sets
    types = Counter(ev.type_code for ev in read_events(files))
    assert types[EventType.PARTIAL_UPDATE_ROWS] == len(M.partial_json_table().updates), types
    diffs = [v for tx in assemble(read_events(files), TableFilter([f"{DB}.partial_json"]))
             for c in tx.changes() if c.op == "u" for v in c.after if isinstance(v, JsonDiffs)]
    assert len(diffs) >= (20 if workload.row_image == "MINIMAL" else 0), diffs
