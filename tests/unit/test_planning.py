"""streaming.source.planning: offsets and chunks from made-up transaction boundaries (no Spark, no
server)."""

import pytest

from cdc.binlog.gtid import GtidSet
from cdc.binlog.xa import Prepared
from cdc.positions import Position
from streaming.source.planning import (Boundary, Chunk, after_anchor, choose, decided_in,
                                delivered_before, delivers_nothing, holds_quiet, lag_report,
                                need_scan, plan_chunks, quiet_until, skip_set)

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
F1, F2, F3 = "mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"


def B(file, pos, rows=10, nbytes=100, ts=None, quiet=False):
    return Boundary(Position(file, pos), rows, nbytes, ts, (), quiet)


# five transactions of 10 rows / 100 bytes in F1 ending at 200..600
BS = [B(F1, 100 + 100 * i) for i in range(1, 6)]


def test_choose_stops_at_the_row_and_byte_limits_and_the_target():
    far = (1, 10 ** 9)
    assert choose(BS, None, None, far) is BS[-1]
    assert choose(BS, 25, None, far) is BS[1]            # 20 rows fit, 30 do not
    assert choose(BS, None, 300, far) is BS[2]           # 300 bytes fit
    assert choose(BS, 1000, 1000, (1, 400)) is BS[2]     # nothing past the target
    assert choose(BS, 1000, None, (1, 150)) is None      # the first ends past the target
    assert choose([], 5, 5, far) is None


def test_a_transaction_larger_than_the_limit_is_a_batch_of_its_own():
    big = [B(F1, 5000, rows=500, nbytes=4000), B(F1, 5100)]
    assert choose(big, 100, 100, (1, 10 ** 9)) is big[0]


def test_need_scan():
    far = (1, 10 ** 9)
    assert need_scan([], None, None, None, far)
    assert not need_scan([], (1, 10 ** 9), None, None, far)      # scanned up to the target
    assert not need_scan(BS, None, None, None, (1, 600))         # the cache reaches the target
    assert need_scan(BS, None, 1000, None, far)                  # 50 rows: not enough for 1000
    assert not need_scan(BS, None, 40, None, far)                # 50 rows > 40: enough
    assert not need_scan(BS, None, None, 450, far)               # 500 bytes > 450: enough


def test_after_anchor():
    assert after_anchor(BS, Position(F1, 300)) == BS[2:]
    assert after_anchor(BS, Position(F1, 600)) == []
    assert after_anchor(BS, Position(F1, 250)) is None           # not a known boundary


def test_plan_chunks_balances_bytes_at_transaction_boundaries():
    logs = [(F1, 1000)]
    cuts = [b.position for b in BS]                              # 200, 300, ..., 600
    chunks = plan_chunks(Position(F1, 100), Position(F1, 600), logs, cuts, min_partitions=3)
    # 500 bytes in 3 parts: cut once a chunk holds >= 167 bytes
    assert chunks == [Chunk(F1, 100, 300, False), Chunk(F1, 300, 500, False),
                      Chunk(F1, 500, 600, False)]
    assert plan_chunks(Position(F1, 100), Position(F1, 600), logs, cuts) == \
        [Chunk(F1, 100, 600, False)]
    assert plan_chunks(Position(F1, 100), Position(F1, 600), logs, cuts,
                       max_bytes_per_partition=200) == \
        [Chunk(F1, 100, 300, False), Chunk(F1, 300, 500, False), Chunk(F1, 500, 600, False)]


def test_plan_chunks_over_files_and_a_purged_start():
    logs = [(F2, 800), (F3, 900)]                                # F1 was purged
    chunks = plan_chunks(Position(F1, 500), Position(F3, 300), logs, [])
    assert chunks == [Chunk(F2, 4, 800, True), Chunk(F3, 4, 300, False)]
    chunks = plan_chunks(Position(F2, 700), Position(F3, 4), logs, [])
    assert chunks == [Chunk(F2, 700, 800, True)]                 # nothing of F3 yet
    assert plan_chunks(Position(F2, 700), Position(F2, 700), logs, []) == []
    assert plan_chunks(Position(F3, 10), Position(F2, 700), logs, []) == []


def test_plan_chunks_never_exceeds_max_chunks():
    logs = [(F1, 100_000)]
    cuts = [Position(F1, p) for p in range(104, 100_000, 100)]
    chunks = plan_chunks(Position(F1, 4), Position(F1, 99_904), logs, cuts,
                         min_partitions=1024, max_chunks=16)
    assert 8 <= len(chunks) <= 16
    assert chunks[0].start == 4 and chunks[-1].end == 99_904
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))


def test_lag_report():
    end = Position(F2, 300)
    logs = [(F1, 1000), (F2, 300)]
    pending = [B(F1, 900, ts=1000), B(F2, 300, ts=1005)]
    r = lag_report(Position(F1, 800), end, logs, pending, None, now=1010.0)
    assert r == {"file": F2, "pos": 300, "behindBytes": 200 + 300, "behindTransactions": 2,
                 "lagSeconds": 10.0}
    r = lag_report(end, end, logs, pending, None, now=1010.0)
    assert r["behindBytes"] == 0 and r["lagSeconds"] == 0.0 and r["behindTransactions"] == 0
    r = lag_report(Position(F1, 800), end, logs, [], None, now=1010.0)
    assert r["lagSeconds"] is None                               # nothing known in between
    assert lag_report(Position(F1, 800), None, logs, pending, None, now=0) is None


class _Tx:
    def __init__(self, gtid):
        self.gtid = gtid


def test_mysql_transactions_delivered_before_are_skipped():
    p = Position(F1, 4, GtidSet.parse(f"{UUID}:1-10:12-13"))
    skip = skip_set(p)
    assert delivered_before(skip, _Tx(f"{UUID}:12"))
    assert not delivered_before(skip, _Tx(f"{UUID}:11"))
    assert not delivered_before(skip, _Tx(None))
    assert skip_set(Position(F1, 4)) is None
    assert skip_set(Position(F1, 4, GtidSet.parse(""))) is None
    assert not delivered_before(None, _Tx(f"{UUID}:12"))


class _Whole:
    """A transaction as the assembler gives it (what delivers_nothing looks at)."""

    def __init__(self, gtid=None, rows=(), queries=(), truncates=(), schema_changes=(), xa=None):
        self.gtid, self.rows_events, self.queries = gtid, list(rows), list(queries)
        self.truncates, self.schema_changes, self.xa = tuple(truncates), schema_changes, xa


def test_transactions_that_deliver_nothing():
    assert delivers_nothing(None, _Whole())                 # other tables' rows only
    for kept in ({"rows": ["ev"]}, {"queries": ["ALTER TABLE ..."]}, {"truncates": ["t"]},
                 {"schema_changes": ("s",)}, {"xa": "step"}):
        assert not delivers_nothing(None, _Whole(**kept)), kept
    skip = GtidSet.parse(f"{UUID}:1-10")
    assert delivers_nothing(skip, _Whole(f"{UUID}:3", rows=["ev"]))     # delivered already
    assert not delivers_nothing(skip, _Whole(f"{UUID}:11", rows=["ev"]))


# F1: quiet transactions (other tables) ending at 200, 300, then one with rows at 400, quiet 500
QB = [B(F1, 200, 0, quiet=True), B(F1, 300, 0, quiet=True), B(F1, 400), B(F1, 500, 0, quiet=True)]


def test_quiet_until_skips_the_leading_quiet_transactions():
    s = Position(F1, 100)
    assert quiet_until(QB, s, (1, 500)).same_place(Position(F1, 300))
    assert quiet_until(QB, s, (1, 250)).same_place(Position(F1, 200))
    assert quiet_until(QB, Position(F1, 300), (1, 500)).same_place(Position(F1, 300))
    assert quiet_until(QB, Position(F1, 400), (1, 500)).same_place(Position(F1, 500))
    assert quiet_until([], s, (1, 500)) is s


def test_holds_quiet_until_bytes_or_time_or_something_to_deliver():
    s, logs = Position(F1, 100), [(F1, 500)]
    kw = dict(max_bytes=1000, max_seconds=60)
    quiet = QB[:2]
    assert holds_quiet(s, quiet[-1], quiet, (1, 300), logs, held_for=0, **kw)
    assert holds_quiet(s, quiet[-1], quiet, (1, 300), logs, held_for=59.9, **kw)
    assert not holds_quiet(s, quiet[-1], quiet, (1, 300), logs, held_for=60, **kw)
    assert not holds_quiet(s, quiet[-1], quiet, (1, 300), logs, held_for=0, max_bytes=200,
                           max_seconds=60)                       # 200 bytes wait
    assert not holds_quiet(s, quiet[-1], quiet, (1, 350), logs, held_for=0, **kw)   # unread
    assert not holds_quiet(s, QB[3], QB, (1, 500), logs, held_for=0, **kw)    # rows at 400
    assert not holds_quiet(s, None, [], (1, 100), logs, held_for=0, **kw)
    # 0 turns holding off
    assert not holds_quiet(s, quiet[-1], quiet, (1, 300), logs, held_for=0, max_bytes=0,
                           max_seconds=60)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_chunks_cover_the_range_exactly(n):
    logs = [(F1, 1000)]
    cuts = [b.position for b in BS]
    chunks = plan_chunks(Position(F1, 100), Position(F1, 600), logs, cuts, min_partitions=n)
    assert chunks[0].start == 100 and chunks[-1].end == 600
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    assert len(chunks) == n


def test_decided_in_names_what_a_chunk_must_read_again():
    """x prepared before the batch and committed in file 2; y prepared in file 1 and rolled
    back in file 2; z prepared in file 2 and still undecided at the end."""
    x = Prepared("X'78',X'',1", "b.000001", 50, 90)
    y = Prepared("X'79',X'',1", "b.000001", 300, 340)
    z = Prepared("X'7a',X'',1", "b.000002", 200, 240)
    s = Position("b.000001", 100, prepared=(x,))
    bounds = [Boundary(Position("b.000001", 340, prepared=(x, y)), 0, 240),
              Boundary(Position("b.000001", 500, prepared=(x, y)), 1, 160),
              Boundary(Position("b.000002", 150, prepared=(y,)), 0, 146),
              Boundary(Position("b.000002", 240, prepared=(y, z)), 0, 90)]
    e = Position("b.000002", 400, prepared=(z,))
    assert decided_in(s, e, bounds, Chunk("b.000001", 100, 500, False)) == ()
    assert decided_in(s, e, bounds, Chunk("b.000001", 100, 800, True)) == ()
    assert decided_in(s, e, bounds, Chunk("b.000002", 4, 400, False)) == (x, y)
    assert decided_in(s, e, bounds, Chunk("b.000002", 4, 150, False)) == (x,)
    assert decided_in(s, e, bounds, Chunk("b.000002", 150, 400, False)) == (y,)
    # without the boundaries (one chunk from start to end): what start holds and end does not
    assert decided_in(s, Position("b.000001", 900), [], Chunk("b.000001", 100, 900, False)) \
        == (x,)
