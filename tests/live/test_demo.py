"""The README's demo command, run as a user would (a subprocess), on a private MariaDB."""

import subprocess
import sys

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

pytestmark = [pytest.mark.server, pytest.mark.spark]


def test_demo_streams_the_workload_into_equal_delta_tables(tmp_path, mariadb):
    # `mariadb` only makes the test skip (or fail under CI) where mariadbd is missing: the demo
    # starts a private server of its own, as it does for users
    out = tmp_path / "demo"
    run = subprocess.run([sys.executable, "-m", "streaming.demo", "--orders", "300",
                          "--batch-rows", "250", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert any("every Delta table equals its source table" in l for l in lines)
    table_lines = [l.split("]", 1)[1].split() for l in lines
                   if "cdc_demo.customers" in l or "cdc_demo.orders" in l]
    counts = {t[0]: (int(t[1]), int(t[2]), t[3]) for t in table_lines if len(t) == 4}
    assert counts["cdc_demo.customers"] == (30, 30, "yes")
    src, delta, equal = counts["cdc_demo.orders"]
    assert 0 < src == delta <= 300 and equal == "yes"
    assert any("batch" in l and "changes upserted" in l for l in lines)
    assert (out / "delta" / "cdc_demo" / "orders" / "_delta_log").is_dir()


def test_demo_refuses_a_directory_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    run = subprocess.run([sys.executable, "-m", "streaming.demo", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "was not made by the demo" in run.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"
