"""``binlog-cdc tail`` on one big transaction: its memory follows the transaction's binlog
events, not their rendering (issue 13, item 9).

tail prints only committed transactions, so it holds a transaction's events until the commit;
it then renders and writes the row changes a chunk at a time instead of building every line
first.  Each run below is a ``tail --non-blocking`` subprocess that reports its own peak RSS
(``VmHWM``); a run on a one-row transaction
gives the interpreter's own footprint, which the big run's growth is measured from.

``CDC_TEST_TAIL_ROWS`` scales the big transaction (default 200000 rows).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.servers

N_ROWS = int(os.environ.get("CDC_TEST_TAIL_ROWS", "200000"))
# Before the fix tail grew by ~206 MB (jsonl) / ~117 MB (text) on 200k rows (~7 MB of binlog):
# every rendered line of the transaction was held before the first write.  After it, ~9 MB: the
# transaction's events and one output chunk.  The bound: a few times the binlog bytes.
GROWTH_PER_BINLOG_BYTE = 3
GROWTH_SLACK_KB = 8 * 1024
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_server_ids = iter(range(9101, 9200))


# ``python -m cdc`` that writes its own peak RSS (VmHWM, KiB) to $TAIL_HWM_FILE at the end.  Not
# ru_maxrss from wait4: on Linux a child's ru_maxrss starts at the RSS of the parent it was forked
# from (pytest's own, which a previous test's output can have inflated).
_TAIL = ("import os, sys\n"
         "from cdc.cli.main import main\n"
         "rc = main(sys.argv[1:])\n"
         "sys.stdout.flush()\n"
         "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
         "open(os.environ['TAIL_HWM_FILE'], 'w').write(hwm.split()[1])\n"
         "sys.exit(rc)\n")


def _run_tail(server, out_path, *args) -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in KiB) of ``tail --non-blocking`` writing to out_path."""
    params = server.cdc_params()
    hwm_file = f"{out_path}.hwm"
    env = dict(os.environ, BINLOG_CDC_PASSWORD=params["password"], PYTHONPATH=_ROOT,
               TAIL_HWM_FILE=hwm_file)
    cmd = [sys.executable, "-c", _TAIL, "tail", "--host", params["host"], "--port",
           str(params["port"]), "--user", params["user"], "--server-id",
           str(next(_server_ids)), "--non-blocking", *args]
    with open(out_path, "w") as out:
        r = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.PIPE, text=True,
                           cwd=_ROOT, timeout=300)
    with open(hwm_file) as f:
        return r.returncode, r.stderr, int(f.read())


@pytest.mark.server
@pytest.mark.parametrize("fmt", ["jsonl", "text"])
def test_tail_memory_follows_the_events_not_the_rendering(mariadb, db, tmp_path, fmt):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(40), n BIGINT)")
    file, pos = mariadb.current_position()
    mariadb.execute(f"INSERT INTO {db}.t VALUES (0, 'zero', 0)")
    # The footprint of tail itself: a one-row transaction, then the end of the binlog.
    rc, err, base_kb = _run_tail(mariadb, tmp_path / "small.out", "--file", file, "--pos",
                                 str(pos), "--format", fmt, "--tables", f"{db}.*")
    assert rc == 0, err
    assert len((tmp_path / "small.out").read_text().splitlines()) == 1
    file, pos = mariadb.current_position()
    mariadb.execute(f"INSERT INTO {db}.t SELECT seq, CONCAT('value number ', seq), seq * 1000 "
                    f"FROM {mariadb.seq_table(N_ROWS)}", database=db)
    end = mariadb.current_position()
    assert end[0] == file
    binlog_kb = (end[1] - pos) / 1024
    rc, err, big_kb = _run_tail(mariadb, tmp_path / "big.out", "--file", file, "--pos",
                                str(pos), "--format", fmt, "--tables", f"{db}.*")
    assert rc == 0, err
    growth_kb = big_kb - base_kb
    print(f"\ntail --format {fmt}, one transaction of {N_ROWS} rows ({binlog_kb / 1024:.1f} MB "
          f"of binlog): peak RSS {big_kb / 1024:.1f} MB, {base_kb / 1024:.1f} MB for a one-row "
          f"transaction, growth {growth_kb / 1024:.1f} MB")
    with open(tmp_path / "big.out") as f:
        lines = f.read().splitlines()
    assert len(lines) == N_ROWS
    if fmt == "jsonl":
        first, last = json.loads(lines[0]), json.loads(lines[-1])
        assert (first["op"], first["db"], first["table"], first["after"], first["row"]) == (
            "c", db, "t", {"id": 1, "v": "value number 1", "n": 1000}, 0)
        assert (last["after"], last["row"]) == (
            {"id": N_ROWS, "v": f"value number {N_ROWS}", "n": N_ROWS * 1000}, N_ROWS - 1)
        assert first["end_pos"] == last["end_pos"] == end[1]
        assert json.loads(lines[N_ROWS // 2])["row"] == N_ROWS // 2
    else:
        assert f"INSERT {db}.t [{file}:{pos} " in lines[0]
        assert lines[0].endswith('after={"id": 1, "v": "value number 1", "n": 1000}')
        assert lines[-1].endswith(
            f'after={{"id": {N_ROWS}, "v": "value number {N_ROWS}", "n": {N_ROWS * 1000}}}')
    assert f"resume with: --file {end[0]} --pos {end[1]}" in err
    limit_kb = GROWTH_PER_BINLOG_BYTE * binlog_kb + GROWTH_SLACK_KB
    assert growth_kb < limit_kb, (
        f"tail grew by {growth_kb / 1024:.1f} MB (limit {limit_kb / 1024:.1f} MB) for one "
        f"transaction of {N_ROWS} rows")


class _Out:
    """stdout stand-in that records what each write carried and how many changes had been
    rendered by then."""

    def __init__(self, rendered):
        self.writes: list[tuple[str, int]] = []
        self.flushes = 0
        self._rendered = rendered

    def write(self, text):
        self.writes.append((text, len(self._rendered)))

    def flush(self):
        self.flushes += 1


class _Tx:
    def __init__(self, n, rendered):
        self.n, self.rendered = n, rendered

    def changes(self):
        for i in range(self.n):
            yield i


def test_write_changes_writes_as_it_renders():
    from cdc.cli.tail import CHUNK_CHARS, write_changes
    rendered: list[int] = []

    def render(i):
        rendered.append(i)
        return f"change {i:06d} " + "x" * 80

    out = _Out(rendered)
    assert write_changes(out, _Tx(20000, rendered), render) == 20000
    text = "".join(t for t, _ in out.writes)
    assert text == "".join(f"change {i:06d} " + "x" * 80 + "\n" for i in range(20000))
    assert len(out.writes) > 20000 * 95 // CHUNK_CHARS - 1
    # Every chunk went out before the next one was rendered, and none is much over the size.
    assert all(len(t) <= CHUNK_CHARS + 100 for t, _ in out.writes)
    written = 0
    for t, rendered_then in out.writes:   # nothing rendered ahead of what was written
        written += t.count("\n")
        assert rendered_then == written
    assert out.flushes == 1
    empty = _Out(rendered)
    assert write_changes(empty, _Tx(0, rendered), render) == 0
    assert empty.writes == [] and empty.flushes == 0
