"""Issue 15 item 4 on a real MariaDB with binlog_row_metadata=NO_LOG: the Spark source's schema
history is persisted with the query (in its offsets). A query stopped, then restarted from its
checkpoint after the table was altered meanwhile, decodes the rows written before each ALTER
with the columns of their time -- not with today's information_schema -- also when the last
batch is replayed; the offset of a position is the same text every time it is made."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from streaming._compat import ReadAllAvailable  # noqa: E402

from streaming.source.datasource import BinlogCdcDataSource  # noqa: E402
from support.spark_support import batch_rows, fresh_database, source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]


@pytest.fixture
def nolog(mariadb_nolog):
    return mariadb_nolog


_dbs = iter(range(1, 1000))


def _database(server) -> str:
    return fresh_database(server, f"shs{next(_dbs)}")


def run_batches(spark, options: dict, checkpoint, timeout: float = 180) -> dict:
    """Run the stream with availableNow into foreachBatch: {batch id: [(op, after dict as
    decoded, its column order)]}."""
    return batch_rows(spark, options, checkpoint, lambda r: (
        r.op, json.loads(r.after), list(json.loads(r.after))), timeout)


def _rows(batches: dict) -> list:
    return [r for _, rows in sorted(batches.items()) for r in rows]


def _offsets(ckpt) -> dict[int, str]:
    """Batch id -> the source's offset as the checkpoint holds it (JSON text)."""
    out = {}
    for p in (ckpt / "offsets").glob("[0-9]*"):
        out[int(p.name)] = p.read_text().strip().splitlines()[-1]
    return out


def test_restarted_query_decodes_rows_of_before_an_alter_with_their_columns(spark, nolog,
                                                                            tmp_path):
    db = _database(nolog)
    conn = nolog.connect(database=db)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b INT)")
    start = nolog.current_position()
    cur.execute("INSERT INTO t VALUES (1, 'one', 10), (2, 'two', 20)")
    opts = source_options(nolog, db, start)
    ckpt = tmp_path / "ckpt"

    first = _rows(run_batches(spark, opts, ckpt))
    assert [(op, after) for op, after, _ in first] == [
        ("c", {"id": 1, "a": "one", "b": 10}), ("c", {"id": 2, "a": "two", "b": 20})]

    # the query is stopped: the table changes, with rows before and after each change
    cur.execute("INSERT INTO t VALUES (3, 'three', 30)")
    cur.execute("ALTER TABLE t RENAME COLUMN a TO title")
    cur.execute("INSERT INTO t VALUES (4, 'four', 40)")
    cur.execute("ALTER TABLE t ADD COLUMN c VARCHAR(5) AFTER id, DROP COLUMN b")
    cur.execute("INSERT INTO t VALUES (5, 'x', 'five')")
    conn.close()
    expected = [("c", {"id": 3, "a": "three", "b": 30}, ["id", "a", "b"]),
                ("c", {"id": 4, "title": "four", "b": 40}, ["id", "title", "b"]),
                ("c", {"id": 5, "c": "x", "title": "five"}, ["id", "c", "title"])]

    second = run_batches(spark, opts, ckpt)
    assert _rows(second) == expected

    # the last batch replayed (its commit lost, as after a kill): planned by a new driver
    # from the checkpoint's offsets alone
    offsets = _offsets(ckpt)
    last = max(offsets)
    (ckpt / "commits" / str(last)).unlink()
    (ckpt / "commits" / f".{last}.crc").unlink(missing_ok=True)
    replayed = run_batches(spark, opts, ckpt)
    assert list(replayed) == [last] and replayed[last] == second[last]

    # the offsets carry the history (NO_LOG needs it), and a new reader (a restarted driver)
    # makes the same text for the same position: Spark compares offsets as text
    assert all('"schema"' in text for text in offsets.values())
    reader = BinlogCdcDataSource(opts).streamReader(None)
    again = reader.latestOffset(json.loads(offsets[last]), ReadAllAvailable())
    assert json.dumps(again) == offsets[last]
    reader.stop()


def test_full_metadata_offsets_without_ddl_carry_no_history(spark, mariadb, tmp_path):
    db = _database(mariadb)
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10))")
    start = mariadb.current_position()
    mariadb.execute(f"INSERT INTO {db}.t VALUES (1, 'one'), (2, 'two')")
    ckpt = tmp_path / "ckpt"
    rows = _rows(run_batches(spark, source_options(mariadb, db, start), ckpt))
    assert [after for _, after, _ in rows] == [{"id": 1, "a": "one"}, {"id": 2, "a": "two"}]
    offsets = _offsets(ckpt)
    assert offsets and not any('"schema"' in text for text in offsets.values())


# --- tail --schema-file ------------------------------------------------------------------------

_ROOT = Path(__file__).resolve().parents[2]
_server_ids = iter(range(9301, 9400))


def _tail(server, db, *args) -> tuple[int, list, str]:
    """(exit code, the jsonl rows' (op, after), stderr) of ``tail --non-blocking``."""
    params = server.cdc_params()
    env = dict(os.environ, BINLOG_CDC_PASSWORD=params["password"], PYTHONPATH=str(_ROOT))
    cmd = [sys.executable, "-m", "cdc", "tail", "--host", params["host"], "--port",
           str(params["port"]), "--user", params["user"], "--server-id", str(next(_server_ids)),
           "--non-blocking", "--format", "jsonl", "--tables", f"{db}.*", *args]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=_ROOT, timeout=120)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    return r.returncode, [(x["op"], x["after"]) for x in rows], r.stderr


def _resume_args(stderr: str) -> list[str]:
    return shlex.split(stderr.split("resume with: ", 1)[1].strip())


def test_tail_resumes_with_its_schema_file(nolog, tmp_path):
    db = _database(nolog)
    conn = nolog.connect(database=db)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))")
    start = nolog.current_position()
    cur.execute("INSERT INTO t VALUES (1, 'one')")
    schema_file = tmp_path / "tail schema.json"
    rc, rows, err = _tail(nolog, db, "--file", start[0], "--pos", str(start[1]),
                          "--schema-file", str(schema_file))
    assert (rc, rows) == (0, [("c", {"id": 1, "a": "one"})]), err
    resume = _resume_args(err)
    assert resume[-2:] == ["--schema-file", str(schema_file)] and schema_file.exists()

    # tail is stopped: the column is renamed, with a row before and after
    cur.execute("INSERT INTO t VALUES (2, 'two')")
    cur.execute("ALTER TABLE t RENAME COLUMN a TO title")
    cur.execute("INSERT INTO t VALUES (3, 'three')")
    conn.close()
    expected = [("c", {"id": 2, "a": "two"}), ("c", {"id": 3, "title": "three"})]

    # without the file the history is today's information_schema, which does not describe row
    # 2: tail stops there (exit 2) and says what to do, never printing it under today's name
    rc, rows, err = _tail(nolog, db, *resume[:-2])
    assert (rc, rows) == (2, []), err
    assert "changed by the statement ending at" in err and "binlog_row_metadata=FULL" in err
    assert "Traceback" not in err
    rc, rows, err = _tail(nolog, db, *resume)
    assert (rc, rows) == (0, expected), err

    # the file is for the position tail printed: another start is refused, naming both
    rc, rows, err = _tail(nolog, db, "--file", start[0], "--pos", str(start[1]),
                          "--schema-file", str(schema_file))
    assert rc == 2 and rows == [] and "holds the schema history at" in err, err
    assert "Traceback" not in err


def test_snapshot_start_seeds_the_history_at_p0(spark, nolog, tmp_path):
    """startingPosition=snapshot: the history is read at the snapshot's P0 and kept in the
    offsets from the first one on; a restart after an ALTER decodes the rows of before it with
    their columns."""
    db = _database(nolog)
    conn = nolog.connect(database=db)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))")
    cur.execute("INSERT INTO t VALUES (1, 'one')")
    opts = dict(source_options(nolog, db, ("x", 4)), startingPosition="snapshot")
    ckpt = tmp_path / "ckpt"
    assert [(op, after) for op, after, _ in _rows(run_batches(spark, opts, ckpt))] == [
        ("r", {"id": 1, "a": "one"})]
    first = json.loads(_offsets(ckpt)[0])     # the end of the snapshot: P0

    cur.execute("INSERT INTO t VALUES (2, 'two')")
    cur.execute("ALTER TABLE t RENAME COLUMN a TO title")
    cur.execute("INSERT INTO t VALUES (3, 'three')")
    conn.close()
    assert [(op, after) for op, after, _ in _rows(run_batches(spark, opts, ckpt))] == [
        ("c", {"id": 2, "a": "two"}), ("c", {"id": 3, "title": "three"})]
    assert [t[:2] for t in first["schema"]["tables"]] == [[db, "t"]]
    assert first["schema"]["seed_point"] == [first["file"], first["pos"]]
