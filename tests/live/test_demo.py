"""The README's demo command, run as a user would (a subprocess), on a private MariaDB."""

import re
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

pytestmark = [pytest.mark.server, pytest.mark.spark]


BATCH = re.compile(r"^\[demo (\d\d):(\d\d):(\d\d)\] batch +(\d+): +(\d+) changes upserted "
                   r"\(total (\d+)\), lag (?:([\d.]+)-([\d.]+) s|\?), (?:(\d+) binlog bytes behind|"
                   r"snapshot of \S+: tables \d+/\d+, chunks \d+/\d+, rows [\d,]+/~[\d,]+, .*, ETA .*|"
                   r"snapshot done: ([\d,]+) rows read, the binlog next|"
                   r"snapshot: a batch replayed from the checkpoint \(no progress reported\))$")
#: Spark's log lines (its default layout) and its start-up notices
SPARK_LOG = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|ERROR) ", re.M)
START_NOTICES = ("Using Spark's default log4j profile", "Setting default log level")
STAMP = re.compile(r"^\[demo (\d\d):(\d\d):(\d\d)\] ")


def _seconds(m) -> int:
    return int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])


EXISTING = 2500      # orders in the database before the stream starts (read by its snapshot)


def test_demo_streams_the_workload_into_equal_delta_tables(tmp_path, mariadb):
    # `mariadb` only makes the test skip (or fail under CI) where mariadbd is missing: the demo
    # starts a private server of its own, as it does for users
    out = tmp_path / "demo"
    t = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "streaming.demo", "--orders", "300",
                          "--existing", str(EXISTING), "--batch-rows", "250", "--out", str(out),
                          "--metrics-port", "0"],
                         capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # nothing but Spark's start-up warnings on stderr (no traceback of a stopped query, no
    # py4j errors of a metrics listener left registered)
    assert "Traceback" not in run.stderr and " ERROR " not in run.stderr, run.stderr[-3000:]
    # a local session starts quietly: no Spark warnings or notices
    assert not SPARK_LOG.search(run.stderr), run.stderr[-3000:]
    assert not any(n in run.stderr for n in START_NOTICES), run.stderr[-3000:]
    if _pandas_major() < 3:      # PySpark warns of pandas 3 (pyproject.toml keeps it below)
        assert "FutureWarning" not in run.stderr, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert re.search(r"Prometheus metrics on http://127\.0\.0\.1:[1-9]\d*/metrics$", run.stdout,
                     re.M)
    assert any("every Delta table equals its source table" in l for l in lines)
    table_lines = [l.split("]", 1)[1].split() for l in lines
                   if "cdc_demo.customers" in l or "cdc_demo.orders" in l]
    counts = {t[0]: (int(t[1]), int(t[2]), t[3]) for t in table_lines if len(t) == 4}
    assert counts["cdc_demo.customers"] == (30, 30, "yes")
    src, delta, equal = counts["cdc_demo.orders"]
    # the orders that existed before the stream came through its snapshot
    assert EXISTING < src == delta <= EXISTING + 300 and equal == "yes"
    assert any("the stream snapshots them first" in l for l in lines), lines
    assert (out / "delta" / "cdc_demo" / "orders" / "_delta_log").is_dir()

    def index(text):
        return next(i for i, l in enumerate(lines) if text in l)

    started, done = index("workload running"), index("workload done")
    changes = int(re.search(r"workload done: \d+ transactions, (\d+) row changes", lines[done])[1])
    batches = [(i, BATCH.match(l)) for i, l in enumerate(lines) if BATCH.match(l)]
    assert batches, lines
    # the live phase is visible: micro-batches while the workload writes, not only at the drain
    assert any(started < i < done for i, _ in batches), lines
    # one running total across the live phase and the drain, ending at every change written
    total = 0
    for _, m in batches:
        total += int(m[5])
        assert int(m[6]) == total, lines
    # every change once, every order of the snapshot once (the workload starts once the
    # snapshot is read)
    assert total == changes + EXISTING and changes > 900
    # every batch printed, once: consecutive ids, as many as the summary counts
    ids = [int(m[4]) for _, m in batches]
    assert ids == list(range(ids[0], ids[0] + len(ids))), ids
    assert re.search(rf"caught up: {total} changes in {len(batches)} batches", "\n".join(lines))
    # the snapshot's batches come first, the last one says it is done with every order read
    # (customers: none yet), and the workload starts after it
    done_at = [i for i, m in batches if m[10]]
    assert len(done_at) == 1 and int(BATCH.match(lines[done_at[0]])[10].replace(",", "")) == \
        EXISTING, lines
    assert done_at[0] < started
    assert all("snapshot" not in l for i, l in enumerate(lines) if BATCH.match(l)
               and i > done_at[0]), lines
    # an honest lag: from the binlog time of a batch's last change (whole seconds, hence the
    # range 1 s wide) to the batch's commit; never more than the time since the workload began
    # (the demo's own start-up is not in it)
    t0 = _seconds(STAMP.match(lines[started]))
    for i, m in batches:
        if i < started or m[7] is None:
            continue                     # snapshot batches: read before the workload began
        low, high = float(m[7]), float(m[8])
        assert 0 <= low <= high and high - low <= 1.0 + 1e-9
        assert low <= _seconds(m) - t0 + 1, (m[0], lines[started])
    assert took < 240, took      # about 30 s on an idle 2-core machine


def _pandas_major() -> int:
    import pandas
    return int(pandas.__version__.split(".")[0])


def test_demo_fresh_mode_follows_the_tables_it_creates(tmp_path, mariadb):
    """``--existing 0``: the stream starts before the demo's CREATE TABLEs, so its first batches
    carry them as schema changes, which the upserter must get (and apply) with the rows."""
    out = tmp_path / "demo"
    run = subprocess.run([sys.executable, "-m", "streaming.demo", "--existing", "0", "--orders",
                          "60", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stderr and " ERROR " not in run.stderr, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert any("the stream starts at " in l for l in lines), lines
    counts = {t[0]: (int(t[1]), int(t[2]), t[3]) for t in
              (l.split("]", 1)[1].split() for l in lines if " cdc_demo." in l) if len(t) == 4}
    assert counts["cdc_demo.customers"] == (10, 10, "yes"), lines
    src, delta, equal = counts["cdc_demo.orders"]
    assert 0 < src == delta <= 60 and equal == "yes", lines
    assert any("every Delta table equals its source table" in l for l in lines)


def test_demo_refuses_a_directory_it_did_not_make(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    run = subprocess.run([sys.executable, "-m", "streaming.demo", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "was not made by the demo" in run.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def _demo(tmp_path, *args, timeout=120):
    run = subprocess.run([sys.executable, "-m", "streaming.demo", "--out", str(tmp_path / "o"),
                          *args], capture_output=True, text=True, timeout=timeout)
    lines = run.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("binlog-cdc demo: "), run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    return run.returncode, lines[-1][len("binlog-cdc demo: "):]


def test_demo_wrong_password_is_one_line(tmp_path, mariadb):
    rc, msg = _demo(tmp_path, "--host", "127.0.0.1", "--port", str(mariadb.port), "--user",
                    "root", "--password", "not-the-password")
    assert rc == 2
    assert f"(127.0.0.1:{mariadb.port}) refused user 'root': check the password" in msg


def test_demo_unreadable_password_file_is_one_line(tmp_path):
    rc, msg = _demo(tmp_path, "--host", "127.0.0.1", "--password-file", str(tmp_path / "nope"))
    assert rc == 2
    assert msg == f"cannot read --password-file {tmp_path / 'nope'}: No such file or directory"


def test_demo_unreachable_server_is_one_line(tmp_path):
    import socket
    with socket.socket() as s:                    # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, msg = _demo(tmp_path, "--host", "127.0.0.1", "--port", str(port))
    assert rc == 2
    assert f"127.0.0.1:{port}" in msg and "Connection refused" in msg


def test_demo_user_that_cannot_replicate_is_one_line(tmp_path, mariadb):
    mariadb.execute("CREATE USER IF NOT EXISTS 'demo_norepl'@'%' IDENTIFIED BY 'pw'")
    mariadb.execute("GRANT ALL ON cdc_demo.* TO 'demo_norepl'@'%'")
    try:
        rc, msg = _demo(tmp_path, "--host", "127.0.0.1", "--port", str(mariadb.port), "--user",
                        "demo_norepl", "--password", "pw")
    finally:
        mariadb.execute("DROP USER IF EXISTS 'demo_norepl'@'%'")
    assert rc == 2
    assert "demo_norepl" in msg and "REPLICATION" in msg, msg
