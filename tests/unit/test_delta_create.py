"""A table's first batch: DeltaUpserter creates the Delta table with one append of the last
changes that are not deletes -- the table a MERGE into an empty table gives, with the batch id
recorded in that one commit -- and MERGEs when the table appeared meanwhile."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

from test_delta_schema import DB, Batch, delta, upserter  # noqa: E402


def _first_batch():
    return (Batch().c("t", id=1, v="a", n=1).c("t", id=2, v="b", n=2)
            .u("t", {"id": 2, "v": "b", "n": 2}, id=3, v="b3", n=3)      # key change
            .c("t", id=4, v="d", n=4).d("t", id=4, v="d", n=4)            # gone again
            .d("t", id=9, v="x", n=9))                                    # never there


def test_the_first_batch_creates_the_table_in_one_commit_like_a_merge(tmp_path):
    up = upserter(tmp_path / "append")
    up.upsert_arrow(_first_batch().arrow(), 5)
    dt = deltalake.DeltaTable(str(tmp_path / "append" / DB / "t"))
    assert dt.version() == 0                                   # one commit
    assert dt.transaction_version("app") == 5                  # with the batch id
    assert dt.metadata().name == f"{DB}.t"
    got = delta(tmp_path / "append", "t")
    assert got == (["id", "v", "n"], [(1, "a", 1), (3, "b3", 3)])
    # the same as the MERGE into an empty table (the old way)
    ref = upserter(tmp_path / "merge")
    deltalake.DeltaTable.create(str(tmp_path / "merge" / DB / "t"),
                                ref._table(DB, "t").schema, name=f"{DB}.t")
    ref.upsert_arrow(_first_batch().arrow(), 5)
    assert delta(tmp_path / "merge", "t") == got
    assert deltalake.DeltaTable(str(tmp_path / "merge" / DB / "t")).schema() == dt.schema()
    # a replay of the batch is skipped, the next one MERGEs
    up.upsert_arrow(_first_batch().arrow(), 5)
    up.upsert_arrow(Batch().u("t", {"id": 1, "v": "a", "n": 1}, id=1, v="a2", n=1).arrow(), 6)
    assert delta(tmp_path / "append", "t")[1] == [(1, "a2", 1), (3, "b3", 3)]
    assert [h["operation"] for h in dt.history()][:2] == ["MERGE", "WRITE"]


def test_a_first_batch_of_deletes_only_creates_an_empty_table_with_the_batch_id(tmp_path):
    up = upserter(tmp_path)
    up.upsert_arrow(Batch().d("t", id=9, v="x", n=9).arrow(), 3)
    dt = deltalake.DeltaTable(str(tmp_path / DB / "t"))
    assert dt.transaction_version("app") == 3
    assert delta(tmp_path, "t") == (["id", "v", "n"], [])


def test_a_table_created_meanwhile_is_merged_into(tmp_path, monkeypatch):
    up = upserter(tmp_path)
    up.upsert_arrow(Batch().c("t", id=1, v="a", n=1).arrow(), 1)
    monkeypatch.setattr(up, "_open", lambda path: None)       # did not see it: created since
    up.upsert_arrow(Batch().c("t", id=1, v="a2", n=1).c("t", id=2, v="b", n=2).arrow(), 2)
    assert delta(tmp_path, "t")[1] == [(1, "a2", 1), (2, "b", 2)]     # no second row for id 1
