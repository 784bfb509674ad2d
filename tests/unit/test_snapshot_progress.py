"""Snapshot progress (cdc.snapshot.progress): rows, chunks and tables done/estimated as batches
are planned, a rate and an ETA from the planner's clock, and a resume mid-table."""

from __future__ import annotations

from cdc.snapshot.progress import SnapshotProgress, batch_chunks, chunks_left, chunks_read


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _progress(estimates, counted=None, included=(), chunk_rows=100, batch_rows=250,
              exact_below=0):
    clock = Clock()
    calls = []

    def count_done(name, after):
        calls.append((name, after))
        return counted[name]
    p = SnapshotProgress(lambda: dict(estimates), count_done, lambda: list(included),
                         chunk_rows, batch_rows, clock=clock, exact_below=exact_below)
    return p, clock, calls


def test_chunk_arithmetic_matches_the_batch_cutting():
    assert batch_chunks(250, 100, False) == 3          # 100 + 100 + 50 up to the batch's key
    assert batch_chunks(200, 100, False) == 2
    assert batch_chunks(50, 100, True) == 1            # a table's tail: one open chunk
    assert batch_chunks(200, 100, True) == 3           # two full ones and the open one
    assert batch_chunks(0, 100, True) == 1
    # 600 rows in batches of 250: 3 + 3 chunks, then a tail of 100 rows: 2 chunks
    assert chunks_left(600, 100, 250) == 3 + 3 + 2
    assert chunks_left(600, 100, None) == 7
    assert chunks_read(500, 100, 250) == 6 and chunks_read(260, 100, 250) == 4


def test_rows_chunks_tables_rate_and_eta_batch_by_batch():
    # a: 600 rows (estimate 550: the server's guess is low), b: 120 rows
    p, clock, _ = _progress({"d.a": 550, "d.b": 120})
    p.start(["d.a", "d.b"])
    r = p.report()
    assert (r["tables"], r["tablesDone"], r["tablesLeft"], r["table"]) == (2, 0, 2, "d.a")
    assert (r["rowsDone"], r["rows"], r["chunksDone"]) == (0, 670, 0)
    assert r["rowsPerSecond"] is None and r["etaSeconds"] is None and not r["done"]

    snap = {"tables": ["d.a", "d.b"], "after": None}
    end = {"tables": ["d.a", "d.b"], "after": [250]}
    p.planned(snap, end, 250)
    r = p.report()
    assert (r["rowsDone"], r["chunksDone"], r["after"]) == (250, 3, [250])
    assert r["rowsPerSecond"] is None                  # one batch planned: no rate yet

    clock.t += 2.0                                     # the first batch took 2 s
    nxt = {"tables": ["d.a", "d.b"], "after": [500]}
    p.planned(end, nxt, 250)
    r = p.report()
    assert r["rowsDone"] == 500 and r["chunksDone"] == 6
    assert r["rowsPerSecond"] == 125.0                 # 250 rows in 2 s
    assert r["rows"] == 500 + 50 + 120                 # a: its estimate, never below what is read
    assert r["etaSeconds"] == round(170 / 125.0, 1)

    clock.t += 2.0
    tail = {"tables": ["d.b"], "after": None}
    p.planned(nxt, tail, 100)                          # a's tail: 100 rows, counted
    r = p.report()
    assert (r["tablesDone"], r["tablesLeft"], r["table"]) == (1, 1, "d.b")
    assert r["rowsDone"] == 600 and r["rows"] == 720   # a exact now
    assert r["chunksDone"] == 6 + 2

    clock.t += 2.0
    p.planned(tail, None, 120)
    r = p.report()
    assert r["done"] and r["etaSeconds"] == 0.0 and r["tablesLeft"] == 0
    assert (r["rowsDone"], r["rows"], r["tablesDone"], r["tables"]) == (720, 720, 2, 2)
    assert r["chunks"] == r["chunksDone"] == 8 + 2


def test_a_restarted_planner_counts_what_was_read_before():
    """A new driver resumes mid-table: the tables sorted before it count as read (their
    estimates), the current table's rows up to the key are counted on the server."""
    p, clock, calls = _progress({"d.a": 300, "d.b": 1000, "d.c": 40}, counted={"d.b": 500},
                                included=["d.a", "d.b", "d.c"])
    snap = {"tables": ["d.b", "d.c"], "after": [77]}
    p.planned(snap, {"tables": ["d.b", "d.c"], "after": [99]}, 250)
    assert calls == [("d.b", [77])]
    r = p.report()
    assert (r["tables"], r["tablesDone"], r["tablesLeft"]) == (3, 1, 2)
    assert r["rowsDone"] == 300 + 500 + 250 and r["rows"] == 300 + 1000 + 40
    assert r["chunksDone"] == chunks_left(300, 100, 250) + chunks_read(500, 100, 250) + 3
    # the next batch continues where this one ended: nothing counted again
    p.planned({"tables": ["d.b", "d.c"], "after": [99]},
              {"tables": ["d.c"], "after": None}, 10)
    assert len(calls) == 1 and p.report()["rowsDone"] == 300 + 500 + 250 + 10


def test_a_re_snapshot_is_a_snapshot_of_its_own_and_no_limit_uses_the_estimates():
    p, _clock, _ = _progress({"d.a": 30, "d.b": 70}, batch_rows=None)
    p.start(["d.a", "d.b"])
    p.planned({"tables": ["d.a", "d.b"], "after": None}, None, None)
    r = p.report()
    assert r["done"] and (r["rowsDone"], r["rows"], r["tablesDone"]) == (100, 100, 2)
    assert r["chunksDone"] == 2
    p.start(["d.b"])                                   # a signal: re-read d.b
    r = p.report()
    assert (r["tables"], r["tablesLeft"], r["rowsDone"], r["rows"]) == (1, 1, 0, 70)


REPORT = {"tables": 3, "tablesDone": 1, "tablesLeft": 2, "table": "d.orders", "after": [500],
          "chunks": 12, "chunksDone": 4, "rows": 3350, "rowsDone": 1050,
          "rowsPerSecond": 150.0, "etaSeconds": 15.3, "done": False}


def test_the_job_and_demo_lines_say_the_snapshot_progress():
    import json

    from streaming.apps.demo import snapshot_line
    from streaming.apps.job import progress_line
    p = {"batchId": 3, "numInputRows": 1000, "processedRowsPerSecond": 250.0,
         "sources": [{"latestOffset": json.dumps({"snapshot": REPORT})}]}
    assert progress_line(p) == ("batch 3: 1000 rows (250 rows/s); snapshot: tables 1/3, "
                                "chunks 4/12, rows 1050/~3350, 150.0 rows/s, ETA 15 s")
    assert snapshot_line(REPORT) == ("snapshot of d.orders: tables 1/3, chunks 4/12, rows "
                                     "1,050/~3,350, 150 rows/s, ETA 15 s")
    unknown = dict(REPORT, rowsPerSecond=None, etaSeconds=None)
    assert snapshot_line(unknown).endswith("rows/s not known yet, ETA not known yet")
    done = dict(REPORT, tablesDone=3, tablesLeft=0, rowsDone=3350, done=True)
    assert snapshot_line(done) == ("snapshot done (tables 3/3, chunks 4/12, rows 3,350/~3,350), "
                                   "the binlog next")
    assert snapshot_line("done") == "snapshot done, the binlog next"


def test_tables_estimated_small_are_counted_once():
    """InnoDB's estimate of a new small table is often 0: below exact_below rows, count."""
    p, _clock, calls = _progress({"d.a": 0, "d.big": 5000}, counted={"d.a": 42},
                                 exact_below=1000)
    p.start(["d.a", "d.big"])
    assert p.report()["rows"] == 42 + 5000
    assert p.report()["rows"] == 42 + 5000
    assert calls == [("d.a", None)]


def test_the_demo_does_not_repeat_a_stale_snapshot_report(capsys):
    """A batch replayed from the checkpoint after a restart has no report of its own: the demo
    says so instead of printing the previous batch's progress again."""
    import json

    from streaming.apps.demo import ProgressPrinter

    class Timed:
        lags: dict = {}

    class Query:
        def __init__(self, progress):
            self.recentProgress = progress
            self.id = "q"

    def prog(batch, rows, report):
        latest = json.dumps({"snapshot": report}) if report is not None else None
        return {"batchId": batch, "numInputRows": rows, "sources": [{"latestOffset": latest}]}

    printer = ProgressPrinter(Timed())
    printer.poll(Query([prog(1, 1000, REPORT)]))
    printer.poll(Query([prog(2, 1000, None)]))
    lines = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert lines[0].endswith("rows 1,050/~3,350, 150 rows/s, ETA 15 s")
    assert lines[1].endswith("snapshot: a batch replayed from the checkpoint (no progress "
                             "reported)")
