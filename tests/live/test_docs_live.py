"""The ``sql runnable`` blocks of the docs, run as a user would on each tested server: the
grants docs/server-setup.md gives for the server's flavour make an account that
``binlog-cdc check`` passes (stream and snapshot privileges, the tables, their keys) and that
``binlog-cdc tail`` streams with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.docs import DOCS, fenced_blocks, runnable

pytestmark = [pytest.mark.server, pytest.mark.servers()]

ROOT = Path(__file__).resolve().parents[2]


def _cli(server, user: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BINLOG_CDC_PASSWORD="change-me", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "cdc", *args, "--host", server.cdc_params()["host"], "--port",
           str(server.cdc_params()["port"]), "--user", user]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_documented_grants_are_enough(server, db):
    blocks = [body for info, body in fenced_blocks(DOCS / "server-setup.md")
              if runnable(info, "sql") == [server.FLAVOR]]
    assert len(blocks) == 1, f"docs/server-setup.md has no sql runnable {server.FLAVOR} block"
    user = f"docs_{server.FLAVOR}"
    sql = blocks[0].replace("'cdc'@", f"'{user}'@").replace("shop.*", f"{db}.*")
    server.execute(f"DROP USER IF EXISTS '{user}'@'%'")
    try:
        for statement in [s.strip() for s in sql.split(";") if s.strip()]:
            server.execute(statement)
        server.execute(f"CREATE TABLE `{db}`.orders (id INT PRIMARY KEY, v VARCHAR(10))")
        file, pos = server.current_position()
        server.execute(f"INSERT INTO `{db}`.orders VALUES (1, 'a')")

        check = _cli(server, user, "check", "--include-tables", f"{db}.*", "--snapshot",
                     "--upsert")
        assert check.returncode == 0, check.stdout + check.stderr
        lines = check.stdout.splitlines()
        assert not [ln for ln in lines if ln.startswith("FAIL")], check.stdout
        for name in ("privileges ", "privileges (snapshot)", "tables ", "keys "):
            assert any(ln.startswith("PASS") and f"  {name}" in ln + " " for ln in lines), \
                (name, check.stdout)

        tail = _cli(server, user, "tail", "--non-blocking", "--format", "jsonl", "--file", file,
                    "--pos", str(pos), "--include-tables", f"{db}.*")
        assert tail.returncode == 0, tail.stderr
        rows = [json.loads(ln) for ln in tail.stdout.splitlines()]
        assert [(r["op"], r["table"], r["after"]) for r in rows] == \
            [("c", "orders", {"id": 1, "v": "a"})]
    finally:
        server.execute(f"DROP USER IF EXISTS '{user}'@'%'")
