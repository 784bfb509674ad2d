"""AutoCDC for real: ``spark-pipelines run`` of conf/pipeline.example (streaming.pipelines, the
flat layout) against the embedded MariaDB, into the test-only MERGE-capable catalog of
tests/support/merge_catalog (compiled here with javac; skipped with the reason without one)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("pyspark")

from tests.support.merge_catalog.build import CATALOG_CLASS, Unavailable, build_jar, dump_table  # noqa: E402,E501

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "conf" / "pipeline.example"


@pytest.fixture(scope="module")
def merge_jar(tmp_path_factory):
    if shutil.which("spark-pipelines") is None:
        pytest.skip("spark-pipelines (pyspark >= 4.1) is not on PATH")
    try:
        return build_jar(tmp_path_factory.mktemp("merge-catalog"))
    except Unavailable as e:
        pytest.skip(f"the MERGE-capable test catalog cannot be built: {e}")


class Pipeline:
    """conf/pipeline.example copied to a tmp dir, its target: catalog ``mc`` database *db*."""

    def __init__(self, tmp: Path, jar: Path, mariadb, db: str, scd: int):
        self.dir = tmp / "pipeline"
        shutil.copytree(EXAMPLE, self.dir)
        spec_path = self.dir / "spark-pipeline.yml"
        spec = yaml.safe_load(spec_path.read_text())
        self.catalog = tmp / "catalog"
        spec.update(storage=(tmp / "storage").as_uri(), catalog="mc", database=db)
        spec["configuration"] = {"spark.sql.catalog.mc": CATALOG_CLASS,
                                 "spark.sql.catalog.mc.path": str(self.catalog)}
        spec_path.write_text(yaml.safe_dump(spec))
        self.spec, self.jar, self.db = spec_path, jar, db
        p = mariadb.cdc_params()
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]),
            PYSPARK_PYTHON=sys.executable, BINLOG_CDC_HOST=p["host"],
            BINLOG_CDC_PORT=str(p["port"]), BINLOG_CDC_USER=p["user"],
            BINLOG_CDC_PASSWORD=p["password"], BINLOG_CDC_TABLES=f"{db}.*",
            BINLOG_CDC_SCD_TYPE=str(scd), BINLOG_CDC_START="snapshot",
            BINLOG_CDC_SERVER_ID=str(70000 + os.getpid() % 10000 * 16))

    def run(self) -> str:
        cmd = ["spark-pipelines", "--jars", str(self.jar), "--conf", "spark.ui.enabled=false",
               "run", "--spec", str(self.spec)]
        r = subprocess.run(cmd, env=self.env, cwd=self.dir, capture_output=True, text=True,
                           timeout=600)
        out = r.stdout + r.stderr
        assert r.returncode == 0, f"spark-pipelines failed ({r.returncode}):\n{out[-6000:]}"
        return out

    def rows(self, table: str) -> list[dict]:
        return dump_table(self.jar, self.catalog / self.db / f"{self.db}_{table}")


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


def test_scd1_targets_equal_the_tables_after_inserts_updates_key_changes_deletes(
        mariadb, db, merge_jar, tmp_path):
    setup_tables(mariadb, db)
    p = Pipeline(tmp_path, merge_jar, mariadb, db, scd=1)
    p.run()                                                  # the snapshot
    assert mirrored(p.rows("items"), ITEMS) == select_all(mariadb, db, "items", ITEMS) == [
        ("1", "apple", "1.50"), ("2", "pear", "2.25"), ("3", "plum", None), ("4", "fig", "9.99")]
    assert mirrored(p.rows("pairs"), PAIRS) == select_all(mariadb, db, "pairs", PAIRS)
    changes(mariadb, db)
    p.run()                                                  # the binlog, from the checkpoint
    got = mirrored(p.rows("items"), ITEMS)
    assert got == select_all(mariadb, db, "items", ITEMS)
    assert got == [("1", "apple", "1.75"), ("105", "kiwi2", "0.40"), ("106", "lime", "0.30"),
                   ("20", "pear!", "2.25"), ("3", "fig", "9.99")]
    assert mirrored(p.rows("pairs"), PAIRS) == select_all(mariadb, db, "pairs", PAIRS) == \
        [("1", "y", "11"), ("1", "z", "10"), ("3", "q", "30")]
    # the _cdc_ metadata columns stay out of the target (AutoCDC adds its own)
    assert set(p.rows("items")[0]) == set(ITEMS) | {"__spark_autocdc_metadata"}


def test_scd2_history_rows(mariadb, db, merge_jar, tmp_path):
    setup_tables(mariadb, db)
    p = Pipeline(tmp_path, merge_jar, mariadb, db, scd=2)
    p.run()
    changes(mariadb, db)
    p.run()
    rows = p.rows("items")
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
