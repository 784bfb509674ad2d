"""Delta upserts from foreachBatch (:mod:`streaming.sinks.delta.upserter`) against the real MariaDB of the
harness, a local Spark and real Delta tables (delta-rs).

What is checked: a two-table workload (inserts, repeated updates of one key in one batch, deletes,
a primary-key change, delete + re-insert, decimal/datetime/date/varchar/bigint/blob/time/nullable
columns) streamed in several micro-batches ends with Delta tables equal to ``SELECT *`` of the
source; a replayed batch id changes nothing; a query killed with SIGKILL between a Delta commit
and Spark's commit and then restarted on its checkpoint ends exact, with no batch applied twice;
clear errors for a table without a primary key and for a column type change.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

import pyarrow as pa  # noqa: E402
from deltalake import DeltaTable  # noqa: E402
from pyspark.errors import StreamingQueryException  # noqa: E402

from cdc.errors import ConfigurationError, SchemaError  # noqa: E402
from cdc.values.render import time_text  # noqa: E402
from streaming._compat import ADMISSION_CONTROL  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter  # noqa: E402

from support.processes import (delta_job, kill_group, run_to_end, start_job,  # noqa: E402
                               wait_for)
from support.spark_support import source_options  # noqa: E402
from support.job_toml import write_job_toml  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.servers]



def upserter(mariadb, root, app_id="test-app") -> DeltaUpserter:
    p = mariadb.cdc_params()
    return DeltaUpserter(root, host=p["host"], port=p["port"], user=p["user"],
                         password=p["password"], app_id=app_id)


def run_available_now(spark, options: dict, fn, checkpoint: Path, timeout: float = 120):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.foreachBatch(fn)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(timeout), f"availableNow query did not stop in {timeout} s"
    except StreamingQueryException:
        pass                                     # failed: the caller looks at q.exception()
    return q


# --- the workload ----------------------------------------------------------------------------------

ORDERS = """CREATE TABLE `{db}`.orders (
    id BIGINT NOT NULL PRIMARY KEY,
    amount DECIMAL(12,2) NOT NULL,
    created DATETIME(6) NOT NULL,
    day DATE NULL,
    note VARCHAR(100) NULL,
    qty BIGINT NULL,
    big BIGINT UNSIGNED NULL,
    payload BLOB NULL,
    dur TIME NULL,
    price DOUBLE NULL
) ENGINE=InnoDB"""

STOCK = """CREATE TABLE `{db}`.stock (
    region VARCHAR(10) NOT NULL,
    n INT NOT NULL,
    val DECIMAL(30,10) NULL,
    seen DATETIME NULL,
    label VARCHAR(20) CHARACTER SET utf8mb4 NULL,
    PRIMARY KEY (region, n)
) ENGINE=InnoDB"""


def create_tables(mariadb, db):
    mariadb.execute(ORDERS.format(db=db))
    mariadb.execute(STOCK.format(db=db))


def workload(mariadb, db, base: int = 0):
    """Row changes in many small transactions (autocommit) and a few multi-row ones."""
    ex = mariadb.execute
    for i in range(1, 21):
        ex(f"INSERT INTO `{db}`.orders VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
           (base + i, f"{i * 10}.{i:02d}", f"2024-02-{i:02d} 10:11:12.{i:06d}",
            None if i % 3 == 0 else f"2023-12-{i:02d}", None if i % 4 == 0 else f"note {i} ü",
            None if i % 5 == 0 else i * 10**12, 2**64 - i, bytes([i, 0, 255]) if i % 2 else None,
            f"{i}:05:06" if i % 2 else "-838:59:59", i / 3))
    for i in range(1, 6):
        ex(f"INSERT INTO `{db}`.stock VALUES (%s, %s, %s, %s, %s)",
           ("eu", base + i, f"{i}.0000000001", "2024-01-01 00:00:00", f"lbl{i}"))
        ex(f"INSERT INTO `{db}`.stock VALUES (%s, %s, %s, %s, %s)",
           ("us", base + i, None, None, None))
    # one key updated several times in one transaction (so in one micro-batch)
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for k in range(5):
                cur.execute("UPDATE orders SET amount = amount + 1, note = %s WHERE id = %s",
                            (f"upd {k}", base + 2))
            cur.execute("UPDATE orders SET qty = NULL, note = NULL WHERE id = %s", (base + 3,))
            cur.execute("DELETE FROM orders WHERE id = %s", (base + 4,))
            cur.execute("INSERT INTO orders (id, amount, created) VALUES (%s, 1.00, "
                        "'2024-05-05 05:05:05')", (base + 4,))       # re-inserted: new values
            cur.execute("COMMIT")
    finally:
        conn.close()
    ex(f"UPDATE `{db}`.orders SET id = %s WHERE id = %s", (base + 1000, base + 5))  # PK change
    ex(f"DELETE FROM `{db}`.orders WHERE id IN (%s, %s)", (base + 6, base + 7))
    ex(f"UPDATE `{db}`.orders SET amount = 0.01, day = '2000-01-01' WHERE id > %s AND id <= %s",
       (base + 10, base + 15))
    ex(f"UPDATE `{db}`.stock SET val = val * 3, label = 'x' WHERE region = 'eu'")
    ex(f"UPDATE `{db}`.stock SET region = 'as' WHERE region = 'us' AND n = %s", (base + 1,))
    ex(f"DELETE FROM `{db}`.stock WHERE region = 'us' AND n = %s", (base + 2,))
    ex(f"DELETE FROM `{db}`.orders WHERE id = %s", (base + 999,))      # deletes nothing


def normalise(value):
    import datetime as dt
    from decimal import Decimal
    if isinstance(value, dt.timedelta):
        return time_text(value)                # TIME: stored as its text in Delta
    if isinstance(value, Decimal) and value == value.to_integral_value() and value.as_tuple(
    ).exponent == 0:
        return int(value)                      # BIGINT UNSIGNED: decimal(20,0) in Delta
    return value


def source_rows(mariadb, db, table, key):
    rows = mariadb.execute(f"SELECT * FROM `{db}`.`{table}` ORDER BY {key}")
    return [tuple(normalise(v) for v in r) for r in rows]


def delta_rows(path, key: list[str]):
    t = DeltaTable(str(path)).to_pyarrow_table().sort_by([(k, "ascending") for k in key])
    return [tuple(normalise(v) for v in r.values()) for r in t.to_pylist()]


def assert_same(mariadb, db, root):
    src_o = source_rows(mariadb, db, "orders", "id")
    assert delta_rows(root / db / "orders", ["id"]) == src_o
    src_s = source_rows(mariadb, db, "stock", "region, n")
    assert delta_rows(root / db / "stock", ["region", "n"]) == src_s
    return src_o, src_s


def history_batches(path) -> list[int]:
    """The batch ids recorded in a Delta table's commits, oldest first."""
    out = []
    for h in reversed(DeltaTable(str(path)).history()):
        if "binlog_cdc.batch_id" in h:
            out.append(int(h["binlog_cdc.batch_id"]))
    return out


# --- tests -------------------------------------------------------------------------------------------


@pytest.mark.compat("delta-rs sink (DeltaUpserter)")
def test_stream_upserts_equal_source(spark, mariadb, db, tmp_path):
    create_tables(mariadb, db)
    start = mariadb.current_position()
    workload(mariadb, db)
    root = tmp_path / "delta"
    up = upserter(mariadb, root)
    batches = []

    def fb(df, batch_id):
        batches.append(batch_id)
        up(df, batch_id)

    q = run_available_now(spark, source_options(mariadb, db, start, maxEventsPerTrigger=12),
                          fb, tmp_path / "chk")
    assert q.exception() is None, q.exception()
    # several micro-batches (PySpark 4.0/4.1 run availableNow as Trigger.Once: one)
    assert len(batches) >= 4 if ADMISSION_CONTROL else batches == [0], batches
    src_o, src_s = assert_same(mariadb, db, root)
    assert len(src_o) == 18 and len(src_s) == 9
    # spot checks of typed values
    t = DeltaTable(str(root / db / "orders"))
    schema = {f.name: str(f.type) for f in pa.schema(t.schema().to_arrow())}
    assert schema["amount"] == "decimal128(12, 2)" and schema["created"] == "timestamp[us]"
    assert schema["day"] == "date32[day]" and schema["qty"] == "int64"
    assert schema["payload"] == "binary" and schema["big"] == "decimal128(20, 0)"
    row2 = [r for r in t.to_pyarrow_table().to_pylist() if r["id"] == 2][0]
    assert str(row2["amount"]) == "25.02" and row2["note"] == "upd 4"
    # history: one commit per batch that touched the table, batch ids increasing
    hb = history_batches(root / db / "orders")
    assert hb == sorted(set(hb)) and t.transaction_version("test-app") == hb[-1]

    # a second run on the same checkpoint after more changes: incremental
    workload(mariadb, db, base=100)
    q = run_available_now(spark, source_options(mariadb, db, start, maxEventsPerTrigger=40),
                          fb, tmp_path / "chk")
    assert q.exception() is None, q.exception()
    src_o, _ = assert_same(mariadb, db, root)
    assert len(src_o) == 36

    # typed mode (before/after as structs) gives the same table
    typed_root = tmp_path / "delta-typed"
    typed_opts = source_options(mariadb, db, start, maxEventsPerTrigger=40, table=f"{db}.orders")
    del typed_opts["includeTables"]
    q = run_available_now(spark, typed_opts,
                          upserter(mariadb, typed_root), tmp_path / "chk-typed")
    assert q.exception() is None, q.exception()
    assert delta_rows(typed_root / db / "orders", ["id"]) == src_o


def test_replayed_batch_changes_nothing(spark, mariadb, db, tmp_path):
    create_tables(mariadb, db)
    start = mariadb.current_position()
    workload(mariadb, db)
    root = tmp_path / "delta"
    up = upserter(mariadb, root, app_id="replay")
    seen = []

    def fb(df, batch_id):
        up(df, batch_id)
        versions = {t: DeltaTable(str(root / db / t)).version()
                    for t in ("orders", "stock") if (root / db / t).exists()}
        up(df, batch_id)                                # the same batch again
        if batch_id > 0:
            up(df, batch_id - 1)                        # an older batch id
        again = {t: DeltaTable(str(root / db / t)).version() for t in versions}
        seen.append((batch_id, versions, again))

    q = run_available_now(spark, source_options(mariadb, db, start, maxEventsPerTrigger=30),
                          fb, tmp_path / "chk")
    assert q.exception() is None, q.exception()
    assert len(seen) >= 2
    for batch_id, versions, again in seen:
        assert versions == again, (batch_id, versions, again)
    assert_same(mariadb, db, root)
    assert history_batches(root / db / "orders") == sorted(set(history_batches(
        root / db / "orders")))
    # the same through the Arrow entry point: skipped tables report 0 rows
    recorded = DeltaTable(str(root / db / "orders")).transaction_version("replay")
    assert recorded is not None and recorded <= seen[-1][0]
    changes = _changes(db, "orders", [("c", None, '{"id": 1}', "9")])
    assert up.upsert_arrow(changes, recorded) == {f"{db}.orders": 0}


@pytest.mark.compat("delta-rs sink (DeltaUpserter)")
@pytest.mark.parametrize("trigger", ["availableNow", "processingTime"])
def test_killed_and_restarted_query(mariadb, db, tmp_path, trigger):
    """Killed -9 inside batch 1 (after it reached Delta, before Spark's commit), more changes
    while it is down, restarted: Delta equals SELECT * and no batch was applied twice. Under
    availableNow the changes are there before the start; under processingTime (PySpark 4.0/4.1
    run availableNow as Trigger.Once: one batch, never a second) they come after batch 0, as
    the first batch of a query started there takes everything there is."""
    if trigger == "availableNow" and not ADMISSION_CONTROL:
        pytest.skip("the job is killed inside the second batch of an availableNow run: PySpark "
                    "4.0/4.1 run availableNow as Trigger.Once (one batch); the processingTime "
                    "variant covers them")
    create_tables(mariadb, db)
    start = mariadb.current_position()
    markers = tmp_path / "markers"
    markers.mkdir()
    root = tmp_path / "delta"
    extra = {}
    if trigger == "processingTime":
        mariadb.execute(f"INSERT INTO `{db}`.stock VALUES ('first', 0, NULL, NULL, NULL)")
        extra = {"written": str(tmp_path / "written")}
    else:
        workload(mariadb, db)
    script, cfg, log = delta_job(mariadb, tmp_path, "kill-test",
                                 source_options(mariadb, db, start, maxEventsPerTrigger=15),
                                 marker_dir=str(markers), hang_after=1, **extra)
    proc = start_job(script, cfg, log)
    try:
        if trigger == "processingTime":
            wait_for(log, proc, lambda t: "batch 0" in t, timeout=300)
            workload(mariadb, db)
            (tmp_path / "written").touch()
        wait_for(log, proc, lambda _t: any(markers.iterdir()), timeout=300)
    finally:
        kill_group(proc)                        # kill -9 mid-stream (inside batch 1)
    hung = int(next(markers.iterdir()).name)
    assert hung == 1
    applied = {t: DeltaTable(str(root / db / t)).transaction_version("kill-test")
               for t in ("orders", "stock") if (root / db / t).exists()}
    assert 1 in applied.values(), applied        # batch 1 reached Delta, Spark never committed it
    assert not (tmp_path / "chk" / "commits" / "1").exists()

    workload(mariadb, db, base=100)              # more changes while the query is down
    cfg.update(hang_after=None)
    cfg["options"]["maxEventsPerTrigger"] = "100"   # batch 1 is replayed with its logged range
    out = run_to_end(script, cfg, log, timeout=300)
    assert "done" in out
    src_o, src_s = assert_same(mariadb, db, root)
    assert len(src_o) == 36 and len(src_s) == 18 + (trigger == "processingTime")
    for t in ("orders", "stock"):                # the replayed batch 1 was not applied twice
        hb = history_batches(root / db / t)
        assert hb == sorted(set(hb)), (t, hb)


def _changes(db, table, rows):
    """An Arrow table of JSON-mode changes: rows of (op, before, after, seq)."""
    import pyarrow as pa
    return pa.table({"op": [r[0] for r in rows], "db": [db] * len(rows),
                     "table": [table] * len(rows), "before": [r[1] for r in rows],
                     "after": [r[2] for r in rows], "seq": [r[3] for r in rows]})


def test_table_without_primary_key_is_a_clear_error(spark, mariadb, db, tmp_path):
    mariadb.execute(f"CREATE TABLE `{db}`.nokey (a INT, b VARCHAR(5))")
    start = mariadb.current_position()
    mariadb.execute(f"INSERT INTO `{db}`.nokey VALUES (1, 'x'), (2, 'y')")
    up = upserter(mariadb, tmp_path / "delta")
    with pytest.raises(ConfigurationError, match="upserts need a primary key"):
        up.upsert_arrow(_changes(db, "nokey", [("c", None, '{"a": 1, "b": "x"}', "1")]), 0)
    # through a streaming query: the query fails with that message
    q = run_available_now(spark, source_options(mariadb, db, start), up, tmp_path / "chk")
    assert q.exception() is not None
    assert "upserts need a primary key" in str(q.exception())
    assert not (tmp_path / "delta" / db / "nokey").exists()


def test_column_change_the_delta_table_cannot_take(mariadb, db, tmp_path):
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, amount DECIMAL(8,2))")
    root = tmp_path / "delta"
    up = upserter(mariadb, root)
    up.upsert_arrow(_changes(db, "t", [("c", None, '{"id": 1, "amount": 1.50}', "1")]), 0)
    # an added nullable column: the Delta table takes it (schema evolution)
    mariadb.execute(f"ALTER TABLE `{db}`.t ADD COLUMN extra VARCHAR(10) NULL")
    up.upsert_arrow(_changes(db, "t", [("c", None, '{"id": 2, "amount": 2.25, "extra": "e"}',
                                        "2")]), 1)
    rows = DeltaTable(str(root / db / "t")).to_pyarrow_table().sort_by("id").to_pylist()
    assert [(r["id"], str(r["amount"]), r["extra"]) for r in rows] == \
        [(1, "1.50", None), (2, "2.25", "e")]
    # a type change: a clear error naming the column and both types
    mariadb.execute(f"ALTER TABLE `{db}`.t MODIFY amount DECIMAL(12,4)")
    up2 = upserter(mariadb, root)
    with pytest.raises(SchemaError, match=r"amount is decimal\(8,2\) in the Delta table but "
                                          r"decimal\(12,4\) in the source"):
        up2.upsert_arrow(_changes(db, "t", [("c", None, '{"id": 3, "amount": 1.0000, '
                                                        '"extra": null}', "3")]), 2)
    # an image with columns the table does not have
    with pytest.raises(SchemaError, match="lacks column|columns .* the table definition lacks"):
        up2.upsert_arrow(_changes(db, "t", [("c", None, '{"id": 3}', "3")]), 2)


def test_job_config_runs_the_pipeline(spark, mariadb, db, tmp_path, monkeypatch):
    """python3 -m streaming.job with a config like the example (--example): Delta equals source."""
    import io
    from streaming.apps.job import load_config, run
    create_tables(mariadb, db)
    start = mariadb.current_position()
    workload(mariadb, db)
    p = mariadb.cdc_params()
    monkeypatch.setenv("TEST_CDC_PASSWORD", p["password"])
    root = tmp_path / "delta"
    cfg_file = write_job_toml(tmp_path / "job.toml", mariadb, f"{db}.*", start,
                              password_env="TEST_CDC_PASSWORD", delta=root, app_id="job-test",
                              checkpoint=tmp_path / "chk", trigger="availableNow",
                              source_extra="maxEventsPerTrigger = 25\n",
                              stream_extra='query_name = "job_test"\n')
    cfg = load_config(cfg_file)
    assert cfg.source["startingPosition"] == json.dumps({"file": start[0], "pos": start[1]})
    out = io.StringIO()
    assert run(cfg, spark, out=out) == 0
    src_o, src_s = assert_same(mariadb, db, root)
    assert len(src_o) == 18 and len(src_s) == 9
    lines = out.getvalue().splitlines()
    batch_lines = [line for line in lines if line.startswith("batch ")]
    assert len(batch_lines) >= 2, lines                 # 25 changes per batch at most
    # every row change of the range is reported once: count them with the replica client
    from cdc.replica.client import ReplicaClient
    from cdc.replica.config import ReplicaConfig
    client = ReplicaClient(ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                                         server_id=4242, table_filter=[f"{db}.*"]),
                           start=start, blocking=False)
    try:
        expected = sum(tx.row_count() for tx in client.transactions())
    finally:
        client.close()
    assert sum(int(line.split(": ")[1].split()[0]) for line in batch_lines) == expected > 30
    assert DeltaTable(str(root / db / "orders")).transaction_version("job-test") is not None


def test_type_matrix_typed_mode_gives_the_json_paths_delta_table(spark, mariadb, db, tmp_path,
                                                                 caplog, monkeypatch):
    """Typed mode (option table) upserts the whole type matrix -- extremes, NULLs, zero dates,
    TIME, BIT, JSON, GEOMETRY, binary, charsets -- into the same Delta table, value for value,
    as the JSON envelope, and that table is ``SELECT *``; its last-change step is the Arrow one
    (no per-value fallback), fed by the narrow collect of a typed stream
    (streaming.sinks.delta.narrow: no db/table per row, before images' keys only)."""
    import logging
    import streaming.sinks.delta.narrow as narrow
    import streaming.sinks.delta.upserter as upserter_module
    from test_types_live import fill_matrix
    narrowed = []

    def widen(collected, *table):
        out = narrow.widen(collected, *table)
        if out is not None:
            narrowed.append(out.num_rows)
        return out
    monkeypatch.setattr(upserter_module, "widen", widen)
    start = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        fill_matrix(cur)
        cur.execute("UPDATE m SET id = id + 10, vc = CONCAT(vc, '✓'), t6 = '-12:34:56.5' "
                    "WHERE id IN (1, 4)")                       # key changes too
        cur.execute("DELETE FROM m WHERE id = 3")
    conn.close()
    roots = {}
    for mode in ("json", "typed"):
        roots[mode] = tmp_path / f"delta-{mode}"
        opts = source_options(mariadb, db, start, maxEventsPerTrigger=3)
        if mode == "typed":
            del opts["includeTables"]
            opts["table"] = f"{db}.m"
        with caplog.at_level(logging.DEBUG, logger="binlog_cdc.delta"):
            caplog.clear()
            q = run_available_now(spark, opts, upserter(mariadb, roots[mode]),
                                  tmp_path / f"chk-{mode}")
        assert q.exception() is None, q.exception()
        if mode == "typed":
            assert "per-value path" not in caplog.text
    json_t, typed_t = (DeltaTable(str(roots[m] / db / "m")).to_pyarrow_table().sort_by("id")
                       for m in ("json", "typed"))
    assert typed_t.schema == json_t.schema
    assert json_t.column("id").to_pylist() == [2, 11, 14]
    for name in json_t.column_names:
        assert typed_t.column(name).to_pylist() == json_t.column(name).to_pylist(), name
    t6 = typed_t.column("t6").to_pylist()
    assert t6 == ["-00:00:00.000001", "-12:34:56.500000", "-12:34:56.500000"]
    assert sum(narrowed) == 7                   # 4 inserts, 2 updates (key changes), a delete
    src = mariadb.execute(f"SELECT * FROM `{db}`.m ORDER BY id")
    assert [r[0] for r in src] == [2, 11, 14]
    for row, got in zip(src, typed_t.to_pylist()):
        for field, want in zip(typed_t.schema, row):
            assert got[field.name] == as_delta(field.type, want), (row[0], field.name)


def test_union_of_typed_streams_of_tables_of_one_shape(spark, mariadb, db, tmp_path, caplog):
    """A union of the typed streams of two tables of the same shape keeps the first one's
    schema, which names that table: the upserter still puts each row in its own table (it sees
    the other table's rows and collects the batch whole)."""
    import logging
    start = mariadb.current_position()
    for t in ("u1", "u2"):
        mariadb.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(20))", database=db)
        mariadb.execute(f"INSERT INTO {t} VALUES (1, '{t} a'), (2, '{t} b'), (3, '{t} c')",
                        database=db)
    mariadb.execute("UPDATE u2 SET id = 20, v = 'moved' WHERE id = 2", database=db)
    mariadb.execute("DELETE FROM u2 WHERE id = 3", database=db)
    frames = []
    for t in ("u1", "u2"):
        reader = spark.readStream.format("binlog-cdc")
        opts = source_options(mariadb, db, start, table=f"{db}.{t}")
        del opts["includeTables"]
        for k, v in opts.items():
            reader = reader.option(k, v)
        frames.append(reader.load())
    root = tmp_path / "delta"
    with caplog.at_level(logging.INFO, logger="binlog_cdc.delta"):
        q = (frames[0].unionByName(frames[1]).writeStream.foreachBatch(upserter(mariadb, root))
             .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True)
             .start())
        assert q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert "collected again, whole" in caplog.text
    for t in ("u1", "u2"):
        assert delta_rows(root / db / t, ["id"]) == source_rows(mariadb, db, t, "id")
    assert source_rows(mariadb, db, "u2", "id") == [(1, "u2 a"), (20, "moved")]


def as_delta(type, value):
    """A value of ``SELECT *`` as the Delta table (column of Arrow *type*) holds it
    (docs/types.md): FLOAT as float32, DECIMAL(p > 38) and TIME as text, BIT as a number,
    TIMESTAMP in UTC, zero dates (PyMySQL: the text) null."""
    import datetime as dt
    import struct
    from decimal import Decimal
    if value is None:
        return None
    if isinstance(value, str) and pa.types.is_temporal(type):
        return None
    if pa.types.is_float32(type):
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if isinstance(value, bytes) and (pa.types.is_integer(type) or pa.types.is_decimal(type)):
        return int.from_bytes(value, "big")
    if isinstance(value, Decimal) and pa.types.is_string(type):
        return format(value, "f")
    if isinstance(value, dt.timedelta):
        return time_text(value)
    if isinstance(value, dt.datetime) and pa.types.is_timestamp(type) and type.tz:
        return value.replace(tzinfo=dt.timezone.utc)
    return value
