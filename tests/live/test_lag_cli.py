"""``binlog-cdc lag`` against the real MariaDB, cdc.cli.lag helpers, and the Grafana dashboard."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cdc.cli.lag import LagSample

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
KEYS = {"time", "ts", "lag_seconds", "behind_bytes", "tx_per_s", "rows_per_s", "transactions",
        "rows", "file", "pos", "server_file", "server_pos"}
_server_ids = itertools.count(2_100_000_000 + os.getpid() % 10_000 * 100)


def _lag_cmd(server, pwfile: Path, *args) -> list[str]:
    params = server.cdc_params()
    return [sys.executable, "-m", "cdc", "lag", "--host", params["host"], "--port",
            str(params["port"]), "--user", params["user"], "--password-file", str(pwfile),
            "--server-id", str(next(_server_ids)), *args]


@pytest.fixture
def pwfile(mariadb, tmp_path) -> Path:
    p = tmp_path / "pw"
    p.write_text(mariadb.cdc_params()["password"] + "\n")
    return p


def test_lag_jsonl_and_plot(mariadb, db, pwfile, tmp_path):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    file, pos = mariadb.current_position()
    n_tx, per_tx = 20, 5
    done: list[float] = []
    errors = []

    def writer():
        try:
            conn = mariadb.connect(database=db)
            try:
                with conn.cursor() as cur:
                    for t in range(n_tx):
                        cur.executemany("INSERT INTO t VALUES (%s, %s)",
                                        [(t * per_tx + i, "x" * 10) for i in range(per_tx)])
                        time.sleep(0.08)
            finally:
                conn.close()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            done.append(time.time())

    png = tmp_path / "out.png"
    cmd = _lag_cmd(mariadb, pwfile, "--file", file, "--pos", str(pos), "--duration", "5",
                   "--interval", "1", "--format", "jsonl", "--plot", str(png))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    thread.join(30)
    assert not errors, errors
    assert proc.returncode == 0, err
    samples = [json.loads(line) for line in out.splitlines()]
    assert 3 <= len(samples) <= 5, out
    for s in samples:
        assert set(s) == KEYS, s
        assert s["lag_seconds"] is None or 0 <= s["lag_seconds"] < 60
        assert isinstance(s["behind_bytes"], int) and s["behind_bytes"] >= 0
        assert s["tx_per_s"] >= 0 and s["rows_per_s"] >= 0
        assert s["server_file"] and s["server_pos"] >= 4 and s["file"] and s["pos"] >= 4
        assert abs(s["ts"] - time.time()) < 120 and s["time"].endswith("Z")
    ts = [s["ts"] for s in samples]
    assert ts == sorted(ts) and all(0.5 < b - a < 2.5 for a, b in zip(ts, ts[1:]))
    # once the writer is done, everything it committed is received and the samples caught up
    after = [s for s in samples if s["ts"] > done[0] + 0.5]
    assert after, (done, samples)
    last = after[-1]
    assert last["transactions"] == n_tx and last["rows"] == n_tx * per_tx
    assert last["behind_bytes"] == 0 and last["lag_seconds"] == 0
    assert (last["file"], last["pos"]) == (last["server_file"], last["server_pos"])
    assert (last["server_file"], last["server_pos"]) == mariadb.current_position()
    assert max(s["rows_per_s"] for s in samples) > 0
    # the rates are the changes of the totals over the interval
    for a, b in zip(samples, samples[1:]):
        dt = b["ts"] - a["ts"]
        assert abs(b["rows_per_s"] * dt - (b["rows"] - a["rows"])) < 0.1
        assert abs(b["tx_per_s"] * dt - (b["transactions"] - a["transactions"])) < 0.1

    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000
    assert f"{len(samples)} samples plotted to {png}" in err
    assert pwfile.read_text().strip() not in out + err


def test_lag_text_caught_up_until_sigterm(mariadb, pwfile):
    """Idle server, start at its end: caught up (0 s, 0 bytes) thanks to heartbeats; SIGTERM
    stops it cleanly (exit 0)."""
    proc = subprocess.Popen(_lag_cmd(mariadb, pwfile, "--interval", "0.5"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        lines = [proc.stdout.readline() for _ in range(4)]
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(20)
    finally:
        proc.kill()
    assert rc == 0, proc.stderr.read()
    assert lines[0].split()[:5] == ["time", "lag_s", "behind_bytes", "tx/s", "rows/s"]
    for line in lines[1:]:
        cols = line.split()
        assert cols[0].endswith("Z") and cols[1:5] == ["0.0", "0", "0.0", "0.0"], line
        at, end = cols[5], cols[7]
        assert at == end and at.split(":")[0] == mariadb.current_position()[0]


def test_lag_errors(mariadb, tmp_path):
    params = mariadb.cdc_params()
    base = [sys.executable, "-m", "cdc", "lag", "--host", params["host"], "--port",
            str(params["port"]), "--user", params["user"], "--duration", "1"]
    # a wrong password: a clear error, exit 2, the password not echoed
    r = subprocess.run(base + ["-p", "not-the-Secret-123"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "binlog-cdc: error:" in r.stderr, r.stderr
    assert "not-the-Secret-123" not in r.stdout + r.stderr
    # --plot without matplotlib: says what to install, before connecting anywhere
    code = ("import sys; sys.modules['matplotlib'] = None; from cdc.cli.main import main; "
            "sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, *base[3:], "--plot",
                        str(tmp_path / "x.png")], capture_output=True, text=True, cwd=ROOT,
                       timeout=60)
    assert r.returncode == 2 and "pip install matplotlib" in r.stderr, r.stderr
    r = subprocess.run(base + ["--interval", "0"], capture_output=True, text=True, cwd=ROOT,
                       timeout=60)
    assert r.returncode == 2 and "--interval" in r.stderr


def test_sample_formats():
    s = LagSample("2026-01-02T03:04:05.678Z", 1767322245.678, None, None, 1.5, 30.0, 3, 60,
                  None, None, None, None)
    assert json.loads(s.to_json())["lag_seconds"] is None
    assert s.to_text().split()[:5] == ["2026-01-02T03:04:05.678Z", "-", "-", "1.5", "30.0"]


def test_grafana_dashboard():
    d = json.loads((ROOT / "conf" / "grafana-dashboard.json").read_text())
    assert 36 <= d["schemaVersion"] <= 41 and d["title"] and d["uid"]
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
    for p in d["panels"]:
        assert p["datasource"]["uid"] == "${datasource}" and p["gridPos"]["w"] > 0
    kinds = {p["type"] for p in d["panels"]}
    assert "timeseries" in kinds
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    assert any("binlog_cdc_lag_seconds" in e for e in exprs)
    assert any("rate(binlog_cdc_rows_total" in e and "[1m]" in e for e in exprs)
    assert any("binlog_cdc_behind_bytes" in e for e in exprs)
    series = {p["title"]: p for p in d["panels"] if p["type"] == "timeseries"}
    assert series["Lag (seconds behind the server)"]["fieldConfig"]["defaults"]["unit"] == "s"
    assert series["Bytes behind"]["fieldConfig"]["defaults"]["unit"] == "bytes"


def _exported_metric_names() -> set[str]:
    """The names a BinlogCdcMetricsListener exposes (a counter's with ``_total``)."""
    pytest.importorskip("prometheus_client")
    pytest.importorskip("pyspark")
    from streaming.metrics import BinlogCdcMetricsListener
    listener = BinlogCdcMetricsListener()
    names = set()
    for family in listener.registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def test_grafana_dashboard_reads_exported_metrics_and_shows_the_snapshot_and_the_job():
    import re
    d = json.loads((ROOT / "conf" / "grafana-dashboard.json").read_text())
    exported = _exported_metric_names()
    exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
    used = {n for e in exprs for n in re.findall(r"\bbinlog_cdc_\w+", e)}
    assert used and used <= exported, used - exported
    by_title = {p["title"]: p for p in d["panels"]}
    # the snapshot's progress: rows read of all, its speed and ETA, tables left
    snapshot = [p for t, p in by_title.items() if t.lower().startswith("snapshot")]
    snapshot_exprs = " ".join(t["expr"] for p in snapshot for t in p["targets"])
    for name in ("binlog_cdc_snapshot_rows", "binlog_cdc_snapshot_eta_seconds",
                 "binlog_cdc_snapshot_rows_per_second", "binlog_cdc_snapshot_tables_left"):
        assert name in snapshot_exprs, name
    assert 'state="done"' in snapshot_exprs and 'state="total"' in snapshot_exprs
    # the job: how long since its last micro-batch (a stalled job's lag gauges stand still)
    assert any("time() - " in e and "binlog_cdc_last_progress_timestamp_seconds" in e
               for e in exprs)
    # panels do not overlap on the 24-column grid
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, p["title"]
        cells |= mine
