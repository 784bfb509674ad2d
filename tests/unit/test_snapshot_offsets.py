"""The offsets of snapshot batches (streaming.source.snapshot): the binlog offset a batch read up
to, with the snapshot's state after it (no server)."""

import pytest

pytest.importorskip("pyspark")

from streaming.source.snapshot import KEY, in_snapshot, lost_at, with_state  # noqa: E402

BINLOG = {"file": "mysql-bin.000007", "pos": 4711, "gtid": "0-1-42", "schema": {"t": 1}}


def test_a_snapshot_batch_ends_at_the_binlog_it_read_with_the_state_after_it():
    end = with_state(BINLOG, {"tables": ["shop.a", "shop.b"], "after": [500]})
    assert end == dict(BINLOG, snapshot={"tables": ["shop.a", "shop.b"], "after": [500]})
    assert list(end)[:4] == ["file", "pos", "gtid", "schema"]     # Spark compares the JSON text
    assert in_snapshot(end) and lost_at(end) is None


def test_the_batch_that_ends_the_snapshot_ends_at_a_plain_binlog_offset():
    end = with_state(BINLOG, None)
    assert end == BINLOG and not in_snapshot(end)


def test_a_signal_met_while_a_snapshot_runs_adds_its_tables_to_those_left():
    asked = dict(BINLOG, snapshot={"tables": ["shop.b", "shop.c"], "after": None})
    end = with_state(asked, {"tables": ["shop.a", "shop.b"], "after": [7]})
    assert end[KEY] == {"tables": ["shop.a", "shop.b", "shop.c"], "after": [7]}
    assert with_state(asked, None) == asked           # after the snapshot: a re-snapshot starts


def test_a_re_snapshot_after_data_loss_carries_where_the_loss_began():
    state = {"tables": ["shop.a"], "after": [9], "lost": "mysql-bin.000003:120"}
    end = with_state(BINLOG, state)
    assert lost_at(end) == "mysql-bin.000003:120" and lost_at(BINLOG) is None
    assert lost_at(with_state(BINLOG, None)) is None
