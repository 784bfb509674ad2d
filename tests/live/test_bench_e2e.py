"""``python -m bench e2e`` at tiny scale: it runs end to end (MariaDB, local Spark, Delta, the
hand-written pipeline, the latency writer and reader) and prints tables of the right shape with
every figure filled in. Timings are not checked (a benchmark, not a timed test)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")
pytest.importorskip("pymysqlreplication")

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _rows(text: str, header_start: str) -> list[list[str]]:
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header_start))
    out = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        out.append([c.strip() for c in line.strip("|").split("|")])
    return out


def test_e2e_tiny_prints_complete_tables(tmp_path):
    md = tmp_path / "e2e.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "bench", "e2e", "--scale", "tiny",
                        "--workloads", "inserts,updates,small_tx", "--rates", "100",
                        "--markdown", str(md)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    text = md.read_text()
    number = re.compile(r"^[0-9][0-9,]*(\.[0-9]+)?$")

    thr = _rows(text, "| workload |")
    typed = " (typed: option table)"
    assert [r[0] for r in thr] == ["inserts", "inserts" + typed, "updates", "updates" + typed,
                                   "small_tx", "small_tx" + typed]
    # tiny scale: 2000 inserted rows, 2000 updated rows, 200 one-row transactions, all streamed,
    # in each mode
    assert [r[1] for r in thr] == ["2,000", "2,000", "2,000", "2,000", "200", "200"]
    for r in thr:
        assert len(r) == 11 and all(number.match(c) for c in r[1:]), r
        assert float(r[4].replace(",", "")) > 0              # the floor's changes/s
        assert float(r[3].replace(",", "")) > 0

    lat = _rows(text, "| target rate |")
    # the stream, then the floor: the trivial source of the same transactions, same sink
    assert [r[0] for r in lat] == ["100/s", "100/s floor (trivial source)"]
    for r in lat:
        assert r[2] == "200" and r[-1] == "yes"             # every row became visible
        p50, p95, p99 = (float(r[k]) for k in (3, 4, 5))
        assert 0 < p50 <= p95 <= p99
    costs = _rows(text, "| rate |")
    assert [r[0] for r in costs] == [r[0] for r in lat]

    start = _rows(text, "| start -> first batch")
    assert [r[0] for r in start] == ["cold (fresh session)",
                                     "floor: trivial source, cold (fresh session)", "warm"]
    assert all(float(r[1]) > 0 for r in start)
    assert all(0 <= float(r[3]) <= float(r[2]) for r in start)     # workers' CPU, of the total
    rss = _rows(text, "| peak RSS")
    assert [r[0] for r in rss] == [
        "binlog-cdc's queries", "the floor's queries (the bench's trivial sources)",
        "the workload's writes, the hand-written pipeline, the decoder alone"]
    assert all(float(c) > 0 for r in rss for c in r[1:])


def test_bench_sinks_tiny_prints_a_row_per_sink(tmp_path):
    """``python -m bench sinks`` at a tiny size: one complete row per sink this PySpark has
    (delta-rs everywhere; delta-spark and Iceberg where their connectors exist)."""
    from bench.sinks import available_sinks
    md = tmp_path / "sinks.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "bench", "sinks", "--rows", "500",
                        "--max-events", "400", "--rate", "10", "--seconds", "2",
                        "--markdown", str(md)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = _rows(md.read_text(), "| sink |")
    assert [r[0] for r in rows] == available_sinks()
    for r in rows:
        assert r[1] == "500" and r[-1] == "yes", r        # 500 rows updated; every row seen
        assert all(float(c.replace(",", "")) > 0 for c in r[2:7]), r
