"""The job runner streams a job's one table in typed mode (streaming.apps.job_typed) and starts
its query again when DDL changes the table's shape: the Delta table equals ``SELECT *``."""

from __future__ import annotations

import io
import threading
import time

import pytest

from support.job_toml import write_job_toml
from streaming.apps.job_typed import named_table, typed_table, with_typed_table

pytestmark = [pytest.mark.server]


@pytest.mark.parametrize("source, named", [
    ({"includeTables": "shop.orders"}, ("shop", "orders")),
    ({"includetables": " shop.orders "}, ("shop", "orders")),
    ({"includeTables": "shop.*"}, None),
    ({"includeTables": "shop.o?ders"}, None),
    ({"includeTables": "shop.[ab]"}, None),
    ({"includeTables": "shop.a,shop.b"}, None),
    ({"includeTables": "orders"}, None),
    ({}, None),
    ({"includeTables": "shop.orders", "excludeTables": "shop.x"}, None),
    ({"includeTables": "shop.orders", "signalTable": "shop.signals"}, None),
    ({"includeTables": "shop.orders", "layout": "flat"}, None),
    ({"includeTables": "shop.orders", "table": "shop.orders"}, None),
])
def test_named_table(source, named):
    assert named_table(source) == named


def test_with_typed_table_replaces_include_tables():
    source = {"host": "h", "includeTables": "Shop.Orders", "fields": "op,after"}
    assert with_typed_table(source, "shop.orders") == \
        {"host": "h", "fields": "op,after", "table": "shop.orders"}
    assert with_typed_table(source, None) == source


@pytest.mark.servers()
def test_typed_table_is_the_servers_spelling_or_none(mariadb, db):
    mariadb.execute(f"CREATE TABLE `{db}`.orders (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.execute(f"CREATE VIEW `{db}`.orders_view AS SELECT * FROM `{db}`.orders")
    config = _config(mariadb)
    assert typed_table({"includeTables": f"{db}.orders"}, config) == f"{db}.orders"
    # includeTables matches case-insensitively: the server's spelling is the option table
    assert typed_table({"includeTables": f"{db.upper()}.ORDERS"}, config) == f"{db}.orders"
    assert typed_table({"includeTables": f"{db}.missing"}, config) is None
    assert typed_table({"includeTables": f"{db}.orders_view"}, config) is None
    assert typed_table({"includeTables": f"{db}.*"}, config) is None


def _config(mariadb):
    from cdc.replica.config import ReplicaConfig
    p = mariadb.cdc_params()
    return ReplicaConfig(p["host"], p["port"], p["user"], p["password"], server_id=4343)


@pytest.mark.spark
@pytest.mark.servers("mysql-9.7", "mariadb-10.11")
def test_the_job_streams_one_table_typed_and_restarts_at_a_shape_change(
        spark, mariadb, db, tmp_path, monkeypatch):
    pytest.importorskip("deltalake")
    from deltalake import DeltaTable
    from streaming.apps.job import load_config, run
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = mariadb.current_position()
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b')")
    p = mariadb.cdc_params()
    monkeypatch.setenv("TEST_TYPED_PASSWORD", p["password"])
    root = tmp_path / "delta"
    cfg_file = write_job_toml(tmp_path / "job.toml", mariadb, f"{db}.T", start,
                              password_env="TEST_TYPED_PASSWORD", delta=root, app_id="typed-job",
                              checkpoint=tmp_path / "chk", trigger="500 milliseconds")
    cfg = load_config(cfg_file)
    out, stop, result = io.StringIO(), threading.Event(), {}
    # the upserter's narrow collect of a typed stream (streaming.sinks.delta.narrow), taken
    # with the job's includeSchemaChanges: the ALTER's record among the collected rows
    import streaming.sinks.delta.upserter as upserter_module
    narrowed = []

    def widen(collected, *table):
        changes = real_widen(collected, *table)
        narrowed.append(None if changes is None else changes.column("op").to_pylist())
        return changes
    real_widen = upserter_module.widen
    monkeypatch.setattr(upserter_module, "widen", widen)

    def job():
        try:
            result["rc"] = run(cfg, spark, out=out, stop=stop)
        except BaseException as e:  # noqa: BLE001 - the test reports it
            result["error"] = e

    def delta_rows():
        try:
            return DeltaTable(str(root / db / "t")).to_pyarrow_table().sort_by("id").to_pylist()
        except Exception:  # noqa: BLE001 - not written yet
            return []

    def wait_for(rows):
        deadline = time.monotonic() + 180
        while delta_rows() != rows:
            assert thread.is_alive(), (result, out.getvalue())
            assert time.monotonic() < deadline, (delta_rows(), out.getvalue())
            time.sleep(0.3)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    try:
        wait_for([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
        assert f"; {db}.t in typed mode)" in out.getvalue()
        mariadb.execute(f"UPDATE `{db}`.t SET v = 'b2' WHERE id = 2")
        mariadb.execute(f"ALTER TABLE `{db}`.t ADD COLUMN n INT")
        mariadb.execute(f"INSERT INTO `{db}`.t VALUES (3, 'c', 7)")
        mariadb.execute(f"UPDATE `{db}`.t SET n = 1 WHERE id = 1")
        wait_for([{"id": 1, "v": "a", "n": 1}, {"id": 2, "v": "b2", "n": None},
                  {"id": 3, "v": "c", "n": 7}])
    finally:
        stop.set()
        thread.join(120)
    assert result == {"rc": 0}, (result, out.getvalue())
    text = out.getvalue()
    assert text.count("the table's shape changed (typed mode (") == 1, text
    assert "ADD COLUMN n INT" in text
    # the Delta table is the server's table
    source = [dict(zip(("id", "v", "n"), r))
              for r in mariadb.execute(f"SELECT id, v, n FROM `{db}`.t ORDER BY id")]
    assert delta_rows() == source
    assert None not in narrowed and "s" in sum(narrowed, []), narrowed
