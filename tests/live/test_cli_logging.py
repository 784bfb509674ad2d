"""The log of ``binlog-cdc`` on stderr: a warning has its level and time (``LEVEL time message``),
``-q``/``--log-level error`` leave errors only. The warning: tail started between an XA
PREPARE and its XA COMMIT on the real MariaDB (the commit's changes are not in the stream)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
LOG_LINE = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d "
                      r"(.*)$")


@pytest.fixture
def between_prepare_and_commit(mariadb, db):
    """(file, pos) between an XA PREPARE and its XA COMMIT."""
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            for sql in ("XA START 'logw'", "INSERT INTO t VALUES (1)", "XA END 'logw'",
                        "XA PREPARE 'logw'"):
                cur.execute(sql)
            at = mariadb.current_position()
            cur.execute("XA COMMIT 'logw'")
    finally:
        conn.close()
    return at


def _tail(mariadb, db, at, *flags) -> subprocess.CompletedProcess:
    p = mariadb.cdc_params()
    return subprocess.run([sys.executable, "-m", "cdc", *flags, "tail", "--host", p["host"],
                           "--port", str(p["port"]), "--user", p["user"], "--password",
                           p["password"], "--file", at[0], "--pos", str(at[1]),
                           "--non-blocking", "--include-tables", f"{db}.*"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_warnings_have_level_and_time(mariadb, db, between_prepare_and_commit):
    r = _tail(mariadb, db, between_prepare_and_commit)
    assert r.returncode == 0, r.stderr
    # the log, then tail's own last line: where to resume
    *lines, last = r.stderr.splitlines()
    assert last.startswith("binlog-cdc tail: stopped at "), r.stderr
    logged = [LOG_LINE.match(l) for l in lines]
    assert lines and all(logged), r.stderr
    assert [m[1] for m in logged] == ["WARNING"], r.stderr
    assert logged[0][2].startswith("XA COMMIT of ") and "XA PREPARE came before" in logged[0][2]


@pytest.mark.parametrize("flags", [["-q"], ["--log-level", "error"], ["--quiet"]])
def test_quiet_leaves_errors_only(mariadb, db, between_prepare_and_commit, flags):
    r = _tail(mariadb, db, between_prepare_and_commit, *flags)
    assert r.returncode == 0
    assert [l.split(":")[0] for l in r.stderr.splitlines()] == ["binlog-cdc tail"], r.stderr


def test_log_level_info_shows_more(mariadb, db, between_prepare_and_commit):
    r = _tail(mariadb, db, between_prepare_and_commit, "--log-level", "info")
    levels = [LOG_LINE.match(l)[1] for l in r.stderr.splitlines() if LOG_LINE.match(l)]
    assert r.returncode == 0 and "WARNING" in levels, r.stderr
    assert all(LOG_LINE.match(l) for l in r.stderr.splitlines()[:-1]), r.stderr
