"""``python -m bench floor`` on a small table: the trivial source replays the snapshot's rows
(every row, in each shape), the read floor reads the snapshot's chunks from the server, and the
table prints every path with its fraction of the floor (and the project's paths with their
fraction of the read floor).
Timings are not checked (a benchmark, not a timed test)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
READ_FLOOR = "floor: server read, chunks as bytes (bench-floor-read source)"


def test_floor_prints_every_path_beside_the_floor(tmp_path):
    md = tmp_path / "floor.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "bench", "floor", "--rows", "3000",
                        "--chunk-rows", "1000", "--markdown", str(md)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [line for line in md.read_text().splitlines() if line.startswith("| ")][1:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    paths = {(r[0], r[1]) for r in rows}
    upserter = "foreachBatch(DeltaUpserter)"
    for want in [("floor: table rows (bench-floor source)", "noop"),
                 ("floor: table rows (bench-floor source)",
                  "foreachBatch(toArrow -> write_deltalake append)"),
                 ("floor: JSON envelope", upserter), ("floor: typed envelope", upserter),
                 ("binlog-cdc snapshot, JSON envelope", upserter),
                 ("binlog-cdc snapshot, typed (option table)", upserter),
                 ("binlog-cdc snapshot, JSON envelope", "noop"),
                 (READ_FLOOR, "noop"),
                 (READ_FLOOR, "foreachBatch(toArrow -> write_deltalake append)"),
                 ("hand-written", "write_deltalake (one transaction)")]:
        assert want in paths, (want, paths)
    number = re.compile(r"^[0-9][0-9,]*(\.[0-9]+)?x?$")
    for r in rows:
        assert r[2] == "3,000", r                  # every path saw every row, the floor too
        assert all(number.match(c) or c == "-" for c in r[2:6] + r[7:]), r
        assert r[6] == "-" or re.match(r"^[0-9.]+ / [0-9.]+ / [0-9.]+$", r[6]), r
        # the project's paths beside the floor of their own server read, the others not
        assert (r[9] != "-") == r[0].startswith("binlog-cdc"), r


def test_available_now_replays_each_captured_micro_batch_as_one(spark, tmp_path):
    """The floor of a run of three micro-batches is three micro-batches (one per trigger, each
    its own partitions), not one holding them all: the same work the measured query did."""
    import pyarrow as pa

    sys.path.insert(0, str(ROOT))
    from bench import floor

    floor.register(spark)
    tables = [pa.table({"id": pa.array(range(k * 10, k * 10 + n), pa.int64())})
              for k, n in enumerate((3, 5, 2))]
    pre = floor.prebuild(tables, str(tmp_path / "pre"), 2)
    q = (pre.stream(spark).writeStream.format("noop")
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [3, 5, 2]
