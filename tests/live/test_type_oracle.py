"""Differential type oracle (issue 12): every MariaDB column type and every charset (and every
collation) of the running server, written with ``binlog_row_metadata`` FULL, NO_LOG and MINIMAL
(with compressed events), and with ``mysql56_temporal_format=OFF``, decoded by every path we ship, must equal the server's
own SELECT.

The matrix and the canonical forms are in :mod:`tests.support.type_matrix`.  One workload per
level (a private server each): CREATE + multi-row INSERT, ``UPDATE .. SET id = id + 100000``
(every column in a before and an after image), DELETE of every other row.  References are
SELECTed after the INSERT and after the UPDATE.  Each case is its own test id
``[<decoder>-<level>-<group>-<source>]`` (group: ``types``, ``single`` (a one-column table),
``charset-<name>``, ``old-fsp0``/``old-fsp``); sources:

* ``replica``: :class:`cdc.ReplicaClient` row images (both row decoders);
* ``files``: ``read_events`` + ``assemble`` over the closed binlog files (both row decoders);
* ``cli``: ``binlog-cdc decode --format jsonl`` (``BINLOG_CDC_DECODER`` per decoder);
* ``spark-json`` / ``spark-typed``: a batch read of the files by the Spark source;
* ``spark-stream-json`` / ``spark-stream-typed``: an availableNow stream from the live server
  (Spark workers decode with their default decoder: the Spark sources run under ``[c]`` only).

What the binlog alone cannot tell is not demanded of file decoders: under NO_LOG (no charsets,
signedness, members, names) they use the documented default charset utf8mb4 and the columns
that need metadata (``Col.needs_metadata``) are not compared; under MINIMAL only ENUM/SET members
are missing; a typed batch read of such files is a ConfigurationError naming
binlog_row_metadata=FULL; old temporal formats with fractional seconds are an error naming
mysql56_temporal_format.  Live streams (which read information_schema) are held to every column.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import start_or_skip

from cdc.binlog.files import read_events
from cdc.binlog.transactions import TableFilter, assemble
from cdc.embedded import EmbeddedMariaDB
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig
from tests.support import type_matrix as M

pytestmark = pytest.mark.server

DB = "oracle"
LEVELS = {   # level -> server options
    "FULL": {"binlog_row_metadata": "FULL"},
    "NO_LOG": {"binlog_row_metadata": "NO_LOG"},
    "OLD_TEMPORAL": {"binlog_row_metadata": "FULL", "mysql56_temporal_format": "OFF"},
    # MINIMAL also with compressed events (MariaDB's log_bin_compress): every type through the
    # compressed rows-event path too
    "MINIMAL": {"binlog_row_metadata": "MINIMAL", "log_bin_compress": "ON",
                "log_bin_compress_min_len": 10},
}
#: MINIMAL (charsets and signedness, no names or ENUM/SET members): a few charsets suffice
MINIMAL_CHARSETS = ("latin1", "cp1251", "sjis", "ucs2", "utf8mb4")
SOURCES = ("replica", "files", "cli", "spark-json", "spark-typed", "spark-stream-json")
GROUPS = ("types", "single") + tuple("charset-" + cs for cs in M.CHARSETS)
CASES = ([(lv, g, s) for lv in ("FULL", "NO_LOG") for g in GROUPS for s in SOURCES]
         + [("FULL", g, "text") for g in GROUPS]
         + [(lv, "types", "spark-stream-typed") for lv in ("FULL", "NO_LOG")]
         + [("OLD_TEMPORAL", g, s) for g in ("old-fsp0", "old-fsp") for s in SOURCES]
         + [("MINIMAL", g, s) for g in ("types", "single", *("charset-" + c for c in MINIMAL_CHARSETS))
            for s in SOURCES])
UPDATE_SHIFT = 100000
#: tables whose binlog files cannot be decoded without the server (old temporal formats with
#: fractional seconds): file decoders must raise an error naming the setting
UNDECODABLE_FILES = {"old_fsp": "mysql56_temporal_format"}


class Workload:
    def __init__(self, level, server):
        self.level, self.server = level, server
        self.tables: dict = {}              # name -> M.Table
        self.expected: dict = {}            # table -> {(op, id): (before, after)} canonical
        self.sets: list = []                # [(start (file, pos), [binlog files], [tables])]
        self.cache: dict = {}               # (source, decoder, set) -> result or exception
        self.charsets: list = []

    def set_of(self, table: str) -> int:
        return next(k for k, (_, _, names) in enumerate(self.sets) if table in names)


def _start(basedir: Path, level: str) -> EmbeddedMariaDB:
    return start_or_skip(EmbeddedMariaDB(basedir, extra_options=LEVELS[level]))


def _reference(cur, table: M.Table) -> dict:
    exprs = ", ".join(M.ref_expr(c) for c in table.cols)
    cur.execute(f"SELECT {exprs} FROM `{table.name}`")
    out = {}
    for row in cur.fetchall():
        canon = tuple(M.canon_ref(c, v) for c, v in zip(table.cols, row))
        out[canon[0]] = canon
    return out


def _build(cur, version, only=None) -> list:
    cur.execute("SHOW CHARACTER SET")
    charsets = sorted((r[0], int(r[3])) for r in cur.fetchall() if not only or r[0] in only)
    tables = [M.types_table(version)]
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
    """CREATE, INSERT, UPDATE (id + UPDATE_SHIFT), DELETE (even ids): the expected changes."""
    cur.execute(f"CREATE TABLE `{t.name}` (" +
                ", ".join(f"`{c.name}` {c.ddl}" for c in t.cols) + ")")
    names = ", ".join(f"`{c.name}`" for c in t.cols)   # invisible columns too
    for k in range(0, len(t.rows), 50):
        cur.execute(f"INSERT INTO `{t.name}` ({names}) VALUES " + ", ".join(
            "(" + ", ".join(r) + ")" for r in t.rows[k:k + 50]))
    ins = _reference(cur, t)
    cur.execute(f"UPDATE `{t.name}` SET id = id + {UPDATE_SHIFT}")
    upd = _reference(cur, t)
    cur.execute(f"DELETE FROM `{t.name}` WHERE id % 2 = 0")
    exp = {}
    for key, row in ins.items():
        new = upd[str(int(key) + UPDATE_SHIFT)]
        exp[("c", key)] = (None, row)
        exp[("u", key)] = (row, new)
        if int(new[0]) % 2 == 0:
            exp[("d", new[0])] = (new, None)
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
        else:
            w.charsets, tables = _build(cur, server.version_tuple,
                                        MINIMAL_CHARSETS if level == "MINIMAL" else None)
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


def _spark_json(w: Workload, spark, k: int) -> dict:
    df = (spark.read.format("binlog-cdc").option("includeTables", f"{DB}.*")
          .load(str(w.sets[k][1][0].parent)))
    out: dict = {}
    for r in df.select("op", "table", "before", "after").collect():
        out.setdefault(r["table"], []).append((r["op"], _json_image(r["before"]),
                                               _json_image(r["after"]), "json"))
    return out


def _spark_typed(w: Workload, spark, k: int) -> dict:
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    out: dict = {}
    for name in w.sets[k][2]:
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
    """``### `` lines of mysqlbinlog -v style output, per table (``{table: [line]}``)."""
    per: dict = {}
    cur = None
    for line in out.split(b"\n"):
        if not line.startswith(b"### "):
            continue
        line = line.rstrip()
        for head in (b"### INSERT INTO ", b"### UPDATE ", b"### DELETE FROM "):
            if line.startswith(head):
                cur = line[len(head):].split(b".")[-1].strip(b"`").decode()
        per.setdefault(cur, []).append(line)
    return per


def _text(w: Workload, decoder: str, k: int) -> dict:
    """``binlog-cdc decode`` (text) and ``mariadb-binlog -v`` of set *k*: ``{table: (ours,
    reference)}`` -- the reference decoder prints the stored bytes of every value."""
    files = list(map(str, w.sets[k][1]))
    env = dict(os.environ, BINLOG_CDC_DECODER=decoder)
    ours = subprocess.run([sys.executable, "-m", "cdc", "decode", *files], capture_output=True,
                          env=env, timeout=300)
    if ours.returncode != 0:
        raise AssertionError(f"decode exited {ours.returncode}: {ours.stderr[-2000:]!r}")
    ref = subprocess.run(["mariadb-binlog", "--no-defaults", "-v", "--base64-output=decode-rows",
                          *files], capture_output=True, check=True, timeout=300).stdout
    a, b = _rows_text(ours.stdout), _rows_text(ref)
    return {t: (a.get(t, []), b.get(t, [])) for t in set(a) | set(b)}


def _text_problems(table: M.Table, ours: list, ref: list) -> list:
    if len(ours) != len(ref):
        return [f"{len(ours)} lines, mariadb-binlog printed {len(ref)}"]
    bad: dict = {}
    for a, b in zip(ours, ref):
        if a != b:
            n = int(b.split(b"=")[0].split(b"@")[1]) - 1 if b"@" in b else -1
            bad.setdefault(n, []).append(f"ours {a[:160]!r} != mariadb-binlog {b[:160]!r}")
    return [f"column {table.cols[n].name} {table.cols[n].ddl[:60]}: {len(m)} lines differ, e.g. "
            + m[0] if n >= 0 else f"{len(m)} lines differ: {m[0]}" for n, m in bad.items()]


def _spark_stream(w: Workload, spark, k: int, table: str | None) -> dict:
    """An availableNow streaming read from the live server over set *k* (JSON mode, or typed
    mode of *table*): the tasks decode over their own replication connections."""
    s = w.server
    (file, pos), _, names = w.sets[k]
    opts = {"host": s.host, "port": str(s.port), "user": s.CDC_USER, "password": s.CDC_PASSWORD,
            "serverId": "7100", "startingPosition": json.dumps({"file": file, "pos": pos})}
    if table:
        opts["table"] = f"{DB}.{table}"
    else:
        opts["includeTables"] = ",".join(f"{DB}.{t}" for t in names)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    reader = spark.readStream.format("binlog-cdc")
    for key, v in opts.items():
        reader = reader.option(key, v)
    qname = f"oracle_{w.level.lower()}_{k}_{table or 'json'}"
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


def _decoded(w: Workload, source: str, decoder: str, spark_fixture, k: int):
    """The changes of binlog file set *k* by *source*: ``{table: [(op, before, after, how)]}``
    (Spark typed: per table, or the exception), or the exception that stopped the source."""
    key = (source, decoder if not source.startswith("spark") else "default", k)
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
                w.cache[key] = _spark_stream(w, spark_fixture(), k, "types")
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
    if how == "json":
        keys = [k for k, _ in values]
        names = [c.name for c in table.cols]
        if keys != names and keys != [f"@{i + 1}" for i in range(len(names))]:
            problems.append(f"{where}: JSON keys {keys[:8]}... != column names {names[:8]}...")
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


def _compare(w: Workload, table: M.Table, changes, source: str) -> list:
    problems: list = []
    live = source in ("replica", "spark-stream-json", "spark-stream-typed")
    if live or w.level in ("FULL", "OLD_TEMPORAL"):
        cols = range(len(table.cols))
    elif w.level == "MINIMAL":
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
        for name, want, got in (("before", exp[(op, ident)][0], image_before),
                                ("after", exp[(op, ident)][1], image_after)):
            if (want is None) != (got is None):
                problems.append(f"{op} id={ident}: {name} image {got!r:.100} (expected "
                                f"{'none' if want is None else 'one'})")
                continue
            if want is None:
                continue
            for i in cols:
                col = table.cols[i]
                wv = _spark_expected(col, want[i]) if how == "spark" else want[i]
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


@pytest.mark.parametrize("workload,group,source", CASES, indirect=["workload"], scope="module")
def test_decoded_equals_select(workload, group, source, row_decoder, spark_lazy, request):
    known = KNOWN_DEFECTS.get((workload.level, group, source))
    if known and not (source.startswith("spark") and row_decoder == "python"):
        request.applymarker(pytest.mark.xfail(strict=True, reason=known))
    if source.startswith("spark") and row_decoder == "python":
        pytest.skip("Spark workers decode with their default decoder: checked under [c]")
    if group.startswith("charset-"):
        cs = group.removeprefix("charset-")
        if cs not in dict(workload.charsets):
            pytest.skip(f"charset {cs} is not in this server's SHOW CHARACTER SET")
        name = "cs_" + cs
    else:
        name = group.replace("-", "_")
    table = workload.tables[name]
    got = _decoded(workload, source, row_decoder or "c", spark_lazy, workload.set_of(name))
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
    if source == "spark-typed" and workload.level in ("NO_LOG", "MINIMAL"):
        assert isinstance(got, Exception) and "binlog_row_metadata=FULL" in str(got), got
        return
    if isinstance(got, Exception):
        raise AssertionError(f"{source} failed on {workload.level}: {type(got).__name__}: "
                             f"{str(got)[:3000]}") from got
    changes = got if source == "spark-typed" else got.get(table.name, [])
    problems = _compare(workload, table, changes, source)
    assert not problems, (f"{workload.level} {source} {group}: {len(problems)} problems\n"
                          + "\n".join(p[:1500] for p in problems[:40]))


@pytest.mark.parametrize("workload", ["FULL", "NO_LOG"], indirect=True, scope="module")
def test_every_server_charset_is_in_the_matrix(workload):
    assert {cs for cs, _ in workload.charsets} <= set(M.CHARSETS)
    level = workload.server.execute("SELECT @@binlog_row_metadata")[0][0]
    assert level == LEVELS[workload.level]["binlog_row_metadata"]
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
