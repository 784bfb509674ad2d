"""AutoCDC for real: ``spark-pipelines run`` of conf/pipeline.example (streaming.apps.pipelines,
the flat layout) against the embedded MariaDB, into

* Delta tables (delta-spark; PySpark 4.2, the newest Spark with a delta-spark release): the
  target AutoCDC users have; skipped with the reason where this PySpark has no AutoCDC or no
  delta-spark release, or the jars cannot be fetched;
* the test-only MERGE-capable catalog of tests/support/merge_catalog (compiled here with javac;
  skipped with the reason without one): SCD 1 and SCD 2 with a kill -9, on PySpark 4.3, where
  no released table format has a connector (delta-spark, Iceberg) yet.

Each run starts a Spark Connect server on port 15002 (spark-pipelines has no setting for
another): runs wait for the port and start again if another run took it first."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("pyspark")

from streaming._compat import VERSION  # noqa: E402
from tests.support.merge_catalog.build import CATALOG_CLASS, Unavailable, build_jar, dump_table  # noqa: E402,E501

pytestmark = [pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "conf" / "pipeline.example"
CONNECT_PORT = 15002


def spark_pipelines() -> str:
    """This interpreter's ``spark-pipelines`` (a virtual environment's own, not one on PATH)."""
    beside = Path(sys.executable).parent / "spark-pipelines"
    found = str(beside) if beside.is_file() else shutil.which("spark-pipelines")
    if found is None:
        pytest.skip("spark-pipelines (pyspark >= 4.1) is not installed")
    return found


@pytest.fixture(scope="module")
def merge_jar(tmp_path_factory):
    spark_pipelines()
    try:
        return build_jar(tmp_path_factory.mktemp("merge-catalog"))
    except Unavailable as e:
        pytest.skip(f"the MERGE-capable test catalog cannot be built: {e}")


class MergeCatalog:
    """Targets in catalog ``mc`` (tests/support/merge_catalog), database *db*."""

    def __init__(self, tmp: Path, jar: Path):
        self.jar, self.path = jar, tmp / "catalog"

    def spec(self, db: str) -> dict:
        return {"catalog": "mc", "database": db,
                "configuration": {"spark.sql.catalog.mc": CATALOG_CLASS,
                                  "spark.sql.catalog.mc.path": str(self.path)}}

    def args(self) -> list[str]:
        return ["--jars", str(self.jar)]

    env: dict = {}

    def rows(self, db: str, name: str) -> list[dict]:
        return dump_table(self.jar, self.path / db / name)


class DeltaTables:
    """Managed Delta tables of the session catalog (delta-spark's ``DeltaCatalog``) under
    *tmp*/warehouse, named in a Hive metastore (Derby, in the pipeline's directory) so that a
    later run finds them. The session settings are :func:`format_settings`'s: the extension is
    a static setting (``--conf``); the catalog goes in the spec's ``configuration`` (a
    ``--conf`` catalog is not the pipeline's Connect session's); the jars on the JVM's class
    path (tests/support/connector_jars)."""

    def __init__(self, tmp: Path, settings: dict, jars: list[Path]):
        self.settings, self.warehouse = settings, tmp / "warehouse"
        self.env = {"SPARK_DIST_CLASSPATH": os.pathsep.join(map(str, jars))}

    def spec(self, db: str) -> dict:
        key = "spark.sql.catalog.spark_catalog"
        return {"configuration": {key: self.settings[key]}}

    def args(self) -> list[str]:
        confs = {"spark.sql.extensions": self.settings["spark.sql.extensions"],
                 "spark.sql.catalogImplementation": "hive",
                 "spark.sql.warehouse.dir": str(self.warehouse)}
        return [a for k, v in confs.items() for a in ("--conf", f"{k}={v}")]

    def rows(self, db: str, name: str) -> list[dict]:
        from deltalake import DeltaTable
        table = DeltaTable(str(self.warehouse / name)).to_pyarrow_table().to_pylist()
        return [{k: text(v) for k, v in r.items()} for r in table]


@pytest.fixture(scope="module")
def delta_target(tmp_path_factory):
    """(format_settings(["delta"]), the connector's jars), or a skip saying what is missing."""
    from cdc.errors import ConfigurationError
    from streaming.apps.local_spark import format_settings
    from tests.support.connector_jars import Unavailable as NoJars, resolve
    spark_pipelines()
    if VERSION < (4, 2):
        pytest.skip("AutoCDC needs PySpark 4.2 or later")
    pytest.importorskip("deltalake")      # reads the targets (no second Spark)
    try:
        settings = format_settings(["delta"])
    except ConfigurationError as e:
        pytest.skip(str(e))
    try:
        jars = resolve(settings["spark.jars.packages"], Path(settings["spark.jars.ivy"]))
    except NoJars as e:
        pytest.skip(f"the delta-spark jars cannot be fetched: {e}")
    return settings, jars


def wait_for_port(port: int, timeout: float = 900) -> None:
    """Until nothing listens on 127.0.0.1:*port* (another run's Connect server)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(5)
    pytest.fail(f"port {port} stayed taken for {timeout:.0f} s (another spark-pipelines run)")


class Pipeline:
    """conf/pipeline.example copied to a tmp dir, writing into *target* (:class:`MergeCatalog`,
    :class:`DeltaTables`)."""

    def __init__(self, tmp: Path, target, mariadb, db: str, scd: int, **env):
        self.dir = tmp / "pipeline"
        shutil.copytree(EXAMPLE, self.dir)
        spec_path = self.dir / "spark-pipeline.yml"
        spec = yaml.safe_load(spec_path.read_text())
        self.runs = itertools.count(1)
        spec.update(storage=(tmp / "storage").as_uri(), **target.spec(db))
        spec_path.write_text(yaml.safe_dump(spec))
        self.spec, self.target, self.db = spec_path, target, db
        p = mariadb.cdc_params()
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]),
            PYSPARK_PYTHON=sys.executable, BINLOG_CDC_HOST=p["host"],
            BINLOG_CDC_PORT=str(p["port"]), BINLOG_CDC_USER=p["user"],
            BINLOG_CDC_PASSWORD=p["password"], BINLOG_CDC_TABLES=f"{db}.*",
            BINLOG_CDC_SCD_TYPE=str(scd), BINLOG_CDC_START="snapshot",
            BINLOG_CDC_SERVER_ID=str(70000 + os.getpid() % 10000 * 16), **target.env, **env)

    def cmd(self) -> list[str]:
        return [spark_pipelines(), *self.target.args(), "--conf", "spark.ui.enabled=false",
                "run", "--spec", str(self.spec)]

    def attempt(self) -> tuple[int, str]:
        """One run (started again while another run holds the Connect server's port):
        its exit code and output."""
        while True:
            wait_for_port(CONNECT_PORT)
            r = subprocess.run(self.cmd(), env=self.env, cwd=self.dir, capture_output=True,
                               text=True, timeout=900)
            out = r.stdout + r.stderr
            (self.dir.parent / f"run-{next(self.runs)}.log").write_text(out)
            if r.returncode == 0 or f"Failed to bind to address 0.0.0.0/0.0.0.0:{CONNECT_PORT}" \
                    not in out:
                return r.returncode, out

    def run(self, again_after_spark_internal_error: bool = True) -> str:
        code, out = self.attempt()
        if code != 0 and again_after_spark_internal_error and "XXKST" in out:
            # Spark's own intermittent task-serialization failure (SQLSTATE XXKST, seen once in
            # six runs of the SCD 2 flow): a pipeline run that failed is run again and resumes
            # from its checkpoints -- what a scheduler does; the targets are checked all the same
            return self.run(again_after_spark_internal_error=False)
        if code != 0:
            fail(code, out, self.dir.parent)
        return out

    def run_killed(self) -> bool:
        """Start a run and kill -9 all of it (its process group) once a flow is running; True
        when it was killed before it ended by itself."""
        wait_for_port(CONNECT_PORT)
        proc = subprocess.Popen(self.cmd(), env=self.env, cwd=self.dir, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        out = []
        killed = False
        try:
            for line in proc.stdout:
                out.append(line)
                if "RUNNING" in line.upper() and "FLOW" in line.upper():
                    os.killpg(proc.pid, signal.SIGKILL)
                    killed = True
                    break
        finally:
            if not killed and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            proc.stdout.close()
        assert killed or proc.returncode == 0, "".join(out)[-6000:]
        return killed

    def rows(self, table: str) -> list[dict]:
        return self.target.rows(self.db, f"{self.db}_{table}")


def fail(code: int, out: str, logs: Path):
    causes = [x for x in out.splitlines() if "Exception" in x or "Error" in x][:15]
    pytest.fail(f"spark-pipelines failed ({code}); whole output in {logs}/run-*.log; errors:\n"
                + "\n".join(causes) + "\n...\n" + out[-3000:])


def text(v):
    return None if v is None else str(v)


def select_all(mariadb, db, table, columns) -> list[tuple]:
    rows = mariadb.execute(f"SELECT {', '.join(columns)} FROM `{db}`.`{table}`")
    return sorted(tuple(text(v) for v in r) for r in rows)


def mirrored(rows, columns) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in rows)


def setup_tables(mariadb, db):
    mariadb.execute(f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, name VARCHAR(40), "
                    f"price DECIMAL(10,2))")
    mariadb.execute(f"CREATE TABLE `{db}`.pairs (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b))")
    mariadb.execute(f"INSERT INTO `{db}`.items VALUES (1, 'apple', 1.50), (2, 'pear', 2.25), "
                    f"(3, 'plum', NULL), (4, 'fig', 9.99)")
    mariadb.execute(f"INSERT INTO `{db}`.pairs VALUES (1, 'x', 10), (1, 'y', 11), (2, 'x', 20)")


def changes(mariadb, db):
    ex = mariadb.execute
    ex(f"INSERT INTO `{db}`.items VALUES (5, 'kiwi', 0.40), (6, 'lime', 0.30)")
    ex(f"UPDATE `{db}`.items SET price = 1.75 WHERE id = 1")
    ex(f"UPDATE `{db}`.items SET id = 20, name = 'pear!' WHERE id = 2")     # key change
    ex(f"DELETE FROM `{db}`.items WHERE id = 3")
    ex(f"UPDATE `{db}`.items SET id = 3 WHERE id = 4")        # onto a key deleted just before
    ex(f"UPDATE `{db}`.items SET name = 'kiwi2' WHERE id = 5")
    ex(f"UPDATE `{db}`.items SET id = id + 100 WHERE id IN (5, 6)")   # one event, two keys
    ex(f"UPDATE `{db}`.pairs SET b = 'z' WHERE a = 1 AND b = 'x'")    # composite key change
    ex(f"DELETE FROM `{db}`.pairs WHERE a = 2")
    ex(f"INSERT INTO `{db}`.pairs VALUES (3, 'q', 30)")


ITEMS = ["id", "name", "price"]
PAIRS = ["a", "b", "v"]


HISTORY_FLOWS = """
import os
from streaming.apps.pipelines import auto_cdc_flows
env = os.environ.get
auto_cdc_flows(spark, tables=env("BINLOG_CDC_TABLES"), scd_type=2,  # noqa: F821
               target="{db}_{table}_history", view="{db}_{table}_changes_history",
               host=env("BINLOG_CDC_HOST"), port=env("BINLOG_CDC_PORT"),
               user=env("BINLOG_CDC_USER"), startingPosition="snapshot",
               serverId=str(int(env("BINLOG_CDC_SERVER_ID")) + 5000))
"""


@pytest.mark.slow
def test_autocdc_scd1_and_scd2_with_a_kill_9_mid_run(mariadb, db, merge_jar, tmp_path):
    """One pipeline: conf/pipeline.example's SCD 1 flows plus SCD 2 flows into *_history, into
    the test-only catalog: SCD 2 needs PySpark 4.3, and no table format has a released
    connector for Spark 4.3 yet."""
    if VERSION < (4, 3):
        pytest.skip("AutoCDC with SCD type 2 needs PySpark 4.3 or later")
    setup_tables(mariadb, db)
    p = Pipeline(tmp_path, MergeCatalog(tmp_path, merge_jar), mariadb, db, scd=1)
    (p.dir / "transformations" / "history_flows.py").write_text(HISTORY_FLOWS)
    p.run()                                                  # the snapshot
    assert mirrored(p.rows("items"), ITEMS) == select_all(mariadb, db, "items", ITEMS) == [
        ("1", "apple", "1.50"), ("2", "pear", "2.25"), ("3", "plum", None), ("4", "fig", "9.99")]
    assert mirrored(p.rows("pairs"), PAIRS) == select_all(mariadb, db, "pairs", PAIRS)
    changes(mariadb, db)
    assert p.run_killed(), "the second run was not killed mid-run"
    p.run()                                                  # restart from the checkpoints
    got = mirrored(p.rows("items"), ITEMS)
    assert got == select_all(mariadb, db, "items", ITEMS)
    assert got == [("1", "apple", "1.75"), ("105", "kiwi2", "0.40"), ("106", "lime", "0.30"),
                   ("20", "pear!", "2.25"), ("3", "fig", "9.99")]
    assert mirrored(p.rows("pairs"), PAIRS) == select_all(mariadb, db, "pairs", PAIRS) == \
        [("1", "y", "11"), ("1", "z", "10"), ("3", "q", "30")]
    # the _cdc_ metadata columns stay out of the target (AutoCDC adds its own)
    assert set(p.rows("items")[0]) == set(ITEMS) | {"__spark_autocdc_metadata"}
    check_history(mariadb, db, p.rows("items_history"))
    hp = p.rows("pairs_history")
    assert sorted(tuple(r[c] for c in PAIRS) for r in hp if r["__END_AT"] is None) == \
        select_all(mariadb, db, "pairs", PAIRS)
    assert sorted((r["a"], r["b"], r["__END_AT"] is None) for r in hp) == [
        ("1", "x", False), ("1", "y", True), ("1", "z", True), ("2", "x", False), ("3", "q", True)]


def check_history(mariadb, db, rows):
    start, end = "__START_AT", "__END_AT"
    assert {start, end} <= set(rows[0])
    current = sorted(tuple(r[c] for c in ITEMS) for r in rows if r[end] is None)
    assert current == select_all(mariadb, db, "items", ITEMS)

    def history(key):
        return sorted(((r[start], r[end], r["name"], r["price"]) for r in rows if r["id"] == key))
    # id 1: snapshot version closed by the update, which is current
    (s0, e0, n0, p0), (s1, e1, n1, p1) = history("1")
    assert (n0, p0, n1, p1) == ("apple", "1.50", "apple", "1.75")
    assert e0 == s1 and e1 is None and s0 < s1
    # id 2 moved to 20: the old key's only version is closed at the key change's delete half
    [(s2, e2, _, _)] = history("2")
    [(s20, e20, n20, _)] = history("20")
    assert e2 is not None and e20 is None and n20 == "pear!"
    assert e2.endswith(":0") and s20.endswith(":1") and e2[:-2] == s20[:-2]
    # id 3: plum (deleted), then fig moved onto the key: the closed plum, then the open fig
    h3 = history("3")
    assert [(h[2], h[1] is None) for h in h3] == [("plum", False), ("fig", True)]
    # id 5: kiwi, kiwi2, then moved to 105; every version of 5 closed
    assert [h[2] for h in history("5")] == ["kiwi", "kiwi2"]
    assert all(h[1] is not None for h in history("5"))
    assert [h[2] for h in history("105")] == ["kiwi2"]


# --- the flat layout in a plain Spark stream, applied by a MERGE-free reference --------------


def apply_changes(rows, key_columns) -> dict:
    """The table a keyed upsert/delete of *rows* (flat layout) in ``_cdc_seq`` order leaves."""
    table = {}
    for r in sorted(rows, key=lambda r: r["_cdc_seq"]):
        k = tuple(r[c] for c in key_columns)
        if r["_cdc_op"] == "d":
            table.pop(k, None)
        else:
            table[k] = r
    return table


def test_flat_stream_last_change_per_key_equals_select(spark, mariadb, db, tmp_path):
    from tests.support.spark_support import source_options
    setup_tables(mariadb, db)
    start = mariadb.current_position()
    mariadb.execute(f"INSERT INTO `{db}`.items VALUES (7, 'seven', 7.00)")
    changes(mariadb, db)
    mariadb.execute(f"UPDATE `{db}`.items SET id = 8, name = 'eight' WHERE id = 7")
    for table, cols, keys in (("items", ITEMS, ["id"]), ("pairs", PAIRS, ["a", "b"])):
        opts = source_options(mariadb, db, start, table=f"{db}.{table}", layout="flat")
        del opts["includeTables"]
        df = spark.readStream.format("binlog-cdc").options(**opts).load()
        assert df.columns == cols + ["_cdc_op", "_cdc_seq", "_cdc_ts_ms", "_cdc_db",
                                     "_cdc_table", "_cdc_source"]
        name = f"flat_{table}_{db}"
        q = (df.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / f"ckpt-{table}"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(240) and q.exception() is None
        rows = [r.asDict() for r in spark.sql(f"SELECT * FROM {name}").collect()]
        assert {r["_cdc_db"] for r in rows} == {db} and {r["_cdc_table"] for r in rows} == {table}
        # the initial rows came before start: the reference starts from them (as a snapshot)
        base = [dict(zip(cols, r), _cdc_op="r", _cdc_seq="") for r in
                {"items": [(1, "apple", Decimal("1.50")), (2, "pear", Decimal("2.25")),
                           (3, "plum", None), (4, "fig", Decimal("9.99"))],
                 "pairs": [(1, "x", 10), (1, "y", 11), (2, "x", 20)]}[table]]
        got = apply_changes(base + rows, keys)
        want = sorted(mariadb.execute(f"SELECT {', '.join(cols)} FROM `{db}`.`{table}`"))
        assert sorted(tuple(r[c] for c in cols) for r in got.values()) == want
        if table == "items":
            # the key change 7 -> 8: a delete of 7 (seq:0) then an upsert of 8 (seq:1)
            last = sorted((r for r in rows if r["id"] in (7, 8)), key=lambda r: r["_cdc_seq"])
            assert [(r["_cdc_op"], r["id"], r["_cdc_seq"][-2:]) for r in last] == \
                [("c", 7, ":0"), ("d", 7, ":0"), ("u", 8, ":1")]
            assert last[1]["_cdc_seq"][:-2] == last[2]["_cdc_seq"][:-2]
            assert last[1]["name"] == "seven" and last[2]["name"] == "eight"
    # a one-off batch read (snapshot) in the flat layout: the table as it is, op r
    opts = source_options(mariadb, db, start, table=f"{db}.items", layout="flat")
    del opts["includeTables"], opts["startingPosition"]
    snap = [r.asDict() for r in spark.read.format("binlog-cdc").options(**opts).load().collect()]
    assert {r["_cdc_op"] for r in snap} == {"r"}
    assert sorted(tuple(r[c] for c in ITEMS) for r in snap) == \
        sorted(mariadb.execute(f"SELECT id, name, price FROM `{db}`.items"))


# --- Delta: the target AutoCDC users have -----------------------------------------------------

#: why AutoCDC cannot write Delta tables yet (checked against the released jars: Spark 4.2.1's
#: AutoCDC flow starts only into a table implementing SupportsRowLevelOperations; neither of
#: delta-spark 4.4.0's tables -- DeltaTableV2, the kernel-based DeltaV2Table -- does)
DELTA_REFUSED = ("Spark's AutoCDC writes only into tables that implement the DSv2 "
                 "SupportsRowLevelOperations API; delta-spark 4.4.0's Delta tables do not "
                 "(AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE, format: delta)")


@pytest.mark.compat("AutoCDC into Delta")
@pytest.mark.slow
def test_autocdc_scd1_into_delta_equals_select(mariadb, db, delta_target, tmp_path):
    """conf/pipeline.example (SCD 1, BINLOG_CDC_TARGET_FORMAT=delta) into managed Delta tables:
    the snapshot, then inserts, updates, deletes and primary-key changes (single and
    composite); each run ends with the targets equal to SELECT *."""
    setup_tables(mariadb, db)
    p = Pipeline(tmp_path, DeltaTables(tmp_path, *delta_target), mariadb, db, scd=1,
                 BINLOG_CDC_TARGET_FORMAT="delta")
    code, out = p.attempt()
    if code != 0 and "AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE" in out and "(format: delta)" in out:
        # the pipeline made its targets as Delta tables, and AutoCDC refused them
        assert (p.target.warehouse / f"{db}_items" / "_delta_log").is_dir(), out[-3000:]
        pytest.xfail(DELTA_REFUSED)
    if code != 0:
        fail(code, out, tmp_path)
    for table, cols in (("items", ITEMS), ("pairs", PAIRS)):
        assert mirrored(p.rows(table), cols) == select_all(mariadb, db, table, cols)
    changes(mariadb, db)
    p.run()
    assert mirrored(p.rows("items"), ITEMS) == select_all(mariadb, db, "items", ITEMS) == [
        ("1", "apple", "1.75"), ("105", "kiwi2", "0.40"), ("106", "lime", "0.30"),
        ("20", "pear!", "2.25"), ("3", "fig", "9.99")]
    assert mirrored(p.rows("pairs"), PAIRS) == select_all(mariadb, db, "pairs", PAIRS)


@pytest.mark.compat("AutoCDC (SCD 1: 4.2+, SCD 2: 4.3+)")
def test_auto_cdc_flows_names_the_pyspark_it_needs():
    """On a PySpark without AutoCDC (before 4.2), or without its SCD type 2 (before 4.3),
    auto_cdc_flows refuses before it does anything else, naming the release needed."""
    from cdc.errors import SparkVersionError
    from streaming.apps.pipelines import auto_cdc_flows
    if VERSION >= (4, 3):
        pytest.skip("this PySpark has AutoCDC with SCD types 1 and 2")
    scd, needed = (1, "4.2") if VERSION < (4, 2) else (2, "4.3")
    with pytest.raises(SparkVersionError, match=rf"needs PySpark {needed} or later") as e:
        auto_cdc_flows(None, tables="shop.*", scd_type=scd, host="127.0.0.1", port="1")
    assert "\n" not in str(e.value)
