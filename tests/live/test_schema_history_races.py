"""The schema history against DDL that runs while a stream starts, on MySQL 9.7 and MariaDB 10.11,
with and without ``binlog_row_metadata=FULL``: a stream started at the binlog's end, then DDL and
rows in quick succession. Every row carries the names and values SELECT returned right after it
was written; every schema-change record the columns information_schema showed right after its
statement. Each scenario is tried many times: the history read while statements run must never
be luck."""

from __future__ import annotations

import logging
import re
import queue
import threading
import time

import pytest

from cdc.embedded import embedded_server
from cdc.errors import SchemaError
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig, RetryPolicy
from cdc.schema.changes import type_text
from tests.conftest import start_or_skip

pytestmark = pytest.mark.servers("mysql-9.7", "mariadb-10.11")

TRIES = 20


@pytest.fixture(scope="module")
def minimal(server, tmp_path_factory):
    """A server of the test's kind whose table maps carry no column names (MariaDB: NO_LOG,
    its default; MySQL: MINIMAL, its default)."""
    mode = "NO_LOG" if server.FLAVOR == "mariadb" else "MINIMAL"
    s = embedded_server(server.server_name, basedir=tmp_path_factory.mktemp("minimal"),
                        extra_options={"binlog_row_metadata": mode})
    start_or_skip(s)
    try:
        yield s
    finally:
        s.cleanup()


@pytest.fixture(params=["minimal", "full"])
def source(request, server):
    return request.getfixturevalue("minimal") if request.param == "minimal" else server


_names = iter(range(1, 100000))


@pytest.fixture
def rdb(source):
    name = f"race{next(_names)}"
    source.execute(f"DROP DATABASE IF EXISTS {name}")
    source.execute(f"CREATE DATABASE {name}")
    yield name
    source.execute(f"DROP DATABASE IF EXISTS {name}")


class Stream:
    """A blocking replica client started at the binlog's end, read by a thread."""

    def __init__(self, server, db, **kw):
        p = server.cdc_params()
        self.client = ReplicaClient(
            ReplicaConfig(p["host"], p["port"], p["user"], p["password"], table_filter=[f"{db}.*"],
                          retry=RetryPolicy(max_attempts=2, initial_backoff=0.05), **kw),
            start="latest", blocking=True)
        self.out: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while self.client.dump_thread_starts == 0:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"the stream did not start: {self.take(0)}")
            time.sleep(0.005)

    def _run(self):
        try:
            for tx in self.client.transactions():
                for ch in tx.changes():
                    self.out.put(ch)
        except BaseException as e:      # noqa: BLE001 -- the test shows it
            self.out.put(e)

    def take(self, n, timeout=20.0) -> list:
        """The next *n* changes (an error the stream raised is raised here)."""
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n:
            try:
                item = self.out.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{len(got)} of {n} changes arrived: {got}") from None
            if isinstance(item, BaseException):
                raise item
            got.append(item)
        return got

    def close(self):
        self.client.close()
        self.thread.join(10)


def _row(server, db, table, key) -> dict:
    """The row as SELECT returns it: {column: value}."""
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}` WHERE id = %s", (key,))
            values = cur.fetchone()
            return dict(zip([d[0] for d in cur.description], values))
    finally:
        conn.close()


def _columns(server, db, table) -> list[tuple]:
    """(name, type) of the table's columns, as information_schema shows them (the type as the
    records spell it: COLUMN_TYPE without integer display widths)."""
    return [(str(n), re.sub(r"int\(\d+\)", "int", str(t.decode() if isinstance(t, bytes) else t)))
            for n, t in
            server.execute("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                           "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                           (db, table))]


def _image(ch) -> dict:
    return ch.image("after")


def test_add_column_then_insert(source, rdb):
    """ALTER TABLE ... ADD COLUMN then an INSERT, right after a stream started at the end."""
    for i in range(TRIES):
        t = f"t{i}"
        source.execute(f"CREATE TABLE {rdb}.{t} (id INT PRIMARY KEY, a INT)")
        s = Stream(source, rdb)
        try:
            source.execute(f"ALTER TABLE {rdb}.{t} ADD COLUMN b INT")
            source.execute(f"INSERT INTO {rdb}.{t} VALUES (1, 10, 20)")
            (ch,) = s.take(1)
        finally:
            s.close()
        assert (ch.op, ch.table, _image(ch)) == ("c", t, _row(source, rdb, t, 1)), f"try {i}"


def test_alternating_renames(source, rdb):
    """RENAME COLUMN a TO b, INSERT, RENAME COLUMN b TO a, INSERT, ... as fast as they run:
    each row with the name of its own time."""
    for i in range(TRIES // 4):
        t = f"t{i}"
        source.execute(f"CREATE TABLE {rdb}.{t} (id INT PRIMARY KEY, a INT)")
        s = Stream(source, rdb)
        expected = []
        try:
            for k in range(8):
                old, new = ("a", "b") if k % 2 == 0 else ("b", "a")
                source.execute(f"ALTER TABLE {rdb}.{t} RENAME COLUMN {old} TO {new}")
                source.execute(f"INSERT INTO {rdb}.{t} VALUES ({k}, {k})")
                expected.append(_row(source, rdb, t, k))
                assert expected[-1] == {"id": k, new: k}
            got = [_image(ch) for ch in s.take(len(expected))]
        finally:
            s.close()
        assert got == expected, f"try {i}"


def _records_then_row(source, rdb, t, statements, insert, i):
    """Run *statements* on ``rdb.t`` then *insert*, right after a stream with schema-change
    records started at the binlog's end; check each record against information_schema right
    after its statement and the row against SELECT. Returns the records."""
    s = Stream(source, rdb, include_schema_changes=True)
    wanted = []
    try:
        for sql in statements:
            source.execute(sql.format(t=f"{rdb}.{t}"))
            wanted.append(_columns(source, rdb, t))
        source.execute(insert.format(t=f"{rdb}.{t}"))
        *records, row = s.take(len(statements) + 1)
    finally:
        s.close()
    for ch, want in zip(records, wanted):
        sc = ch.schema_change
        assert ch.op == "s" and not sc.unsure and sc.columns is not None, (f"try {i}", sc)
        assert [(c.name, type_text(c)) for c in sc.columns] == want, f"try {i}"
    assert (row.op, _image(row)) == ("c", _row(source, rdb, t, 1)), f"try {i}"
    return [ch.schema_change for ch in records]


def test_schema_change_records_of_add_then_rename(source, rdb):
    """--schema-changes: ALTER ... ADD, then RENAME COLUMN at once: two records, each with the
    columns information_schema showed right after its statement."""
    for i in range(TRIES):
        t = f"t{i}"
        source.execute(f"CREATE TABLE {rdb}.{t} (id INT PRIMARY KEY, a INT)")
        add, rename = _records_then_row(
            source, rdb, t, ["ALTER TABLE {t} ADD COLUMN b VARCHAR(5)",
                             "ALTER TABLE {t} RENAME COLUMN b TO c"],
            "INSERT INTO {t} VALUES (1, 2, 'x')", i)
        assert (add.type, rename.type, rename.renamed_columns) == ("ALTER", "ALTER", {"b": "c"})


def test_create_if_not_exists_then_alter(source, rdb, caplog):
    """CREATE TABLE IF NOT EXISTS then ALTER, after a stream started at the end: followed
    exactly and quietly (no warning), rows with their own names."""
    caplog.set_level(logging.WARNING, logger="cdc")
    for i in range(TRIES // 2):
        create, alter = _records_then_row(
            source, rdb, f"t{i}", ["CREATE TABLE IF NOT EXISTS {t} (id INT PRIMARY KEY, a INT)",
                                   "ALTER TABLE {t} ADD COLUMN b INT"],
            "INSERT INTO {t} VALUES (1, 2, 3)", i)
        assert (create.type, alter.type) == ("CREATE", "ALTER")
    for i in range(TRIES // 4):         # without records (FULL: the history is read at the DDL)
        t = f"u{i}"
        s = Stream(source, rdb)
        try:
            source.execute(f"CREATE TABLE IF NOT EXISTS {rdb}.{t} (id INT PRIMARY KEY, a INT)")
            source.execute(f"ALTER TABLE {rdb}.{t} ADD COLUMN b INT")
            source.execute(f"INSERT INTO {rdb}.{t} VALUES (1, 2, 3)")
            (row,) = s.take(1)
        finally:
            s.close()
        assert _image(row) == _row(source, rdb, t, 1), f"try {i}"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def _rows(server, db, start) -> tuple[list[dict], Exception | None]:
    """The row images of a non-blocking stream from *start*, and the error that stopped it."""
    p = server.cdc_params()
    client = ReplicaClient(ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                                         table_filter=[f"{db}.*"]),
                           start=start, blocking=False)
    rows = []
    try:
        for tx in client.transactions():
            rows += [_image(ch) for ch in tx.changes()]
    except SchemaError as e:
        return rows, e
    finally:
        client.close()
    return rows, None


def test_a_stream_from_before_a_rename_never_gives_rows_its_names(source, rdb):
    """A stream from an older position, the table renamed a column since: the history read now
    does not describe the rows before the rename. Without full metadata such a row stops the
    stream with a SchemaError saying what to do (it was printed with the new name); from a
    position after the rename the rows come with their names."""
    source.execute(f"CREATE TABLE {rdb}.t (id INT PRIMARY KEY, a INT)")
    before = source.current_position()
    source.execute(f"INSERT INTO {rdb}.t VALUES (1, 1)")
    first = _row(source, rdb, "t", 1)
    between = source.current_position()
    source.execute(f"ALTER TABLE {rdb}.t RENAME COLUMN a TO b")
    source.execute(f"INSERT INTO {rdb}.t VALUES (2, 2)")
    second = _row(source, rdb, "t", 2)
    assert (first, second) == ({"id": 1, "a": 1}, {"id": 2, "b": 2})
    full = source.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0] == "FULL"
    rows, error = _rows(source, rdb, before)
    if full:
        assert (rows, error) == ([first, second], None)
    else:
        assert rows == [] and error is not None
        msg = str(error)
        at = re.search(rf"the TABLE_MAP of {rdb}\.t at file (\S+), position (\d+) ", msg)
        assert at and at.group(1) == before[0] and before[1] < int(at.group(2)) < between[1]
        assert "changed by the statement ending at" in msg and "binlog_row_metadata=FULL" in msg
    assert _rows(source, rdb, between) == ([second], None)


def test_tail_at_latest_then_alter_and_insert(source, rdb):
    """``binlog-cdc tail`` (blocking, from now) while ALTER TABLE ... ADD COLUMN and an INSERT
    run: the schema change and the row are printed with their own columns, every try."""
    import json
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    p = source.cdc_params()
    env = dict(os.environ, BINLOG_CDC_PASSWORD=p["password"], PYTHONPATH=str(root))
    source.execute(f"CREATE TABLE {rdb}.mark (id INT PRIMARY KEY)")
    for i in range(TRIES // 4):
        t = f"t{i}"
        source.execute(f"CREATE TABLE {rdb}.{t} (id INT PRIMARY KEY, a INT)")
        proc = subprocess.Popen(
            [sys.executable, "-m", "cdc", "tail", "--host", p["host"], "--port", str(p["port"]),
             "--user", p["user"], "--server-id", str(7400 + i), "--format", "jsonl",
             "--schema-changes", "--tables", f"{rdb}.*"],
            env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(json.loads(x)) for x in proc.stdout],
                         daemon=True).start()
        try:
            for k in range(200):            # until tail prints a row written after it started
                source.execute(f"INSERT INTO {rdb}.mark VALUES ({i * 1000 + k})")
                try:
                    lines.get(timeout=0.3)
                    break
                except queue.Empty:
                    assert proc.poll() is None, proc.stderr.read()
            source.execute(f"ALTER TABLE {rdb}.{t} ADD COLUMN b INT")
            source.execute(f"INSERT INTO {rdb}.{t} VALUES (1, 10, 20)")
            got = []
            while len(got) < 2:
                line = lines.get(timeout=20)
                if line["table"] == t:
                    got.append(line)
        finally:
            proc.send_signal(signal.SIGTERM)
            err = proc.communicate(timeout=30)[1]
        assert proc.returncode == 0 and "Traceback" not in err, err
        change, row = got
        assert change["op"] == "s" and not change["schema_change"]["unsure"], (i, change, err)
        assert [(c["name"], c["type"]) for c in change["schema_change"]["columns"]] == \
            _columns(source, rdb, t)
        assert (row["op"], row["after"]) == ("c", _row(source, rdb, t, 1)), (i, row, err)
