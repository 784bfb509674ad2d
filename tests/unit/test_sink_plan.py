"""streaming.sinks.plan: what a batch's TRUNCATE and schema-change records do to one table's
plan (the cut, the final shape, where each final column comes from in the rows before each DDL,
the column renames a target needs), and the MERGE's clauses both sinks render."""

from __future__ import annotations

import pytest

from cdc.errors import ConfigurationError, SchemaError
from streaming.sinks.plan import (OP_COLUMN, Origin, TableEvents, merge_clauses, plan_table,
                                  record_columns, refuse_keyless, table_moves)


def col(name, type_="int", nullable=True, default=None, expr=False):
    return {"name": name, "type": type_, "nullable": nullable, "charset": "utf8mb4",
            "default": default, "default_expr": expr}


def rec(kind, columns, key=("id",), renamed=None, renamed_from=None):
    return {"type": kind, "ddl": f"{kind} ...", "renamed_from": renamed_from,
            "renamed_columns": renamed or {}, "columns": columns, "primary_key": list(key),
            "unsure": False}


V1 = [col("id", nullable=False), col("v", "varchar(10)")]
V2 = [col("id", nullable=False), col("w", "varchar(10)"), col("q", nullable=False, default=5),
      col("z", nullable=False)]


def never():
    raise AssertionError("the server is not asked when the records tell the shape")


def test_rows_before_an_alter_are_read_under_their_old_names():
    ev = TableEvents("d", "t", [("0001", "s", rec("CREATE", V1)),
                                ("0005", "s", rec("ALTER", V2, renamed={"v": "w"}))])
    plan = plan_table(ev, None, never)
    assert plan.cut == "0001" and plan.has_ddl
    assert plan.final.names == ["id", "w", "q", "z"]
    assert plan.origins(1) == {"id": Origin("id"), "w": Origin("v"), "q": Origin(None, 5),
                               "z": Origin(None, 0)}          # MySQL's implicit NOT NULL 0
    assert plan.origins(2) == {n: Origin(n) for n in ("id", "w", "q", "z")}
    assert plan.renames(["id", "v"]) == [("v", "w")]
    assert plan.renames(["id", "w"]) == []                    # already renamed: a replay


def test_a_batch_starting_from_an_unknown_shape_reads_columns_the_image_has():
    ev = TableEvents("d", "t", [("0005", "s", rec("ALTER", V2, renamed={"v": "w"}))])
    plan = plan_table(ev, None, never)
    assert plan.cut is None
    assert plan.origins(0)["w"] == Origin("v")
    assert plan.origins(0)["q"] == Origin("q", 5, None, True)
    known = plan_table(ev, (V1, ["id"]), never)                # the target's recorded shape
    assert known.origins(0)["q"] == Origin(None, 5)


def test_the_last_truncate_cuts_and_drop_create_start_over():
    ev = TableEvents("d", "t", [("0002", "t", None), ("0003", "s", rec("ALTER", V2)),
                                ("0004", "t", None)])
    plan = plan_table(ev, (V1, ["id"]), never)
    assert plan.cut == "0004" and plan.steps == []
    assert plan.final.names == ["id", "w", "q", "z"]
    dropped = plan_table(TableEvents("d", "t", [("0002", "s", rec("DROP", None))]),
                         (V1, ["id"]), never)
    assert dropped.final is None and dropped.cut == "0002"
    again = plan_table(TableEvents("d", "t", [("0002", "s", rec("DROP", None)),
                                              ("0003", "s", rec("CREATE", V1))]),
                       (V2, ["id"]), never)
    assert again.cut == "0003" and again.final.names == ["id", "v"]
    assert again.renaming[0].prev == []                   # a new table: nothing to rename


def test_without_records_the_table_definition_is_asked():
    plan = plan_table(TableEvents("d", "t", [("0002", "t", None)]), None,
                      lambda: (record_columns({"columns": V1}), ["id"]))
    assert plan.cut == "0002" and not plan.has_ddl and plan.final.names == ["id", "v"]


def test_refusals():
    with pytest.raises(ConfigurationError, match="d.t has no primary key"):
        refuse_keyless("SparkMerge", "d", "t", [])
    with pytest.raises(SchemaError, match="no column list"):
        plan_table(TableEvents("d", "t", [("0001", "s", rec("ALTER", None))]), None, never)


def test_merge_clauses():
    assert merge_clauses(False) == [("delete", f"s.{OP_COLUMN} = 'd'"),
                                    ("update", f"s.{OP_COLUMN} <> 'd'"),
                                    ("insert", f"s.{OP_COLUMN} <> 'd'")]
    assert merge_clauses(True)[-1] == ("delete_unmatched", None)


def test_a_rename_record_is_a_step_of_its_new_name():
    plan = plan_table(TableEvents("d", "t", [("0001", "s", rec("RENAME", V1,
                                                                 renamed_from="d.old"))]),
                      (V1, ["id"]), never)
    assert plan.has_ddl and plan.final.names == ["id", "v"] and plan.cut is None
    # a rename of a table whose shape is not known: moved as it is, no step
    plan = plan_table(TableEvents("d", "t", [("0001", "s", rec("RENAME", None,
                                                                 renamed_from="d.old"))]),
                      None, lambda: (record_columns({"columns": V1}), ["id"]))
    assert not plan.has_ddl and plan.final.names == ["id", "v"]


def test_table_moves_follow_a_table_through_its_renames():
    """a -> a2 -> a3 in one batch, and a new table a made after the first rename: a's changes
    before the rename and a2's before the second belong to a3; a2 is vacated, a is not."""
    moves = table_moves([
        TableEvents("d", "a", [("0001", "t", None), ("0006", "s", rec("CREATE", V1))]),
        TableEvents("d", "a2", [("0004", "s", rec("RENAME", V1, renamed_from="d.a"))]),
        TableEvents("d", "a3", [("0008", "s", rec("RENAME", V1, renamed_from="a2"))])])
    assert moves.moves == [("0004", ("d", "a"), ("d", "a2")), ("0008", ("d", "a2"), ("d", "a3"))]
    assert moves.vacated == [("d", "a2")]
    final = moves.final
    assert final(("d", "a"), "0001") == final(("d", "a"), "0003") == ("d", "a3")
    assert final(("d", "a"), "0005") == ("d", "a")          # (no table then) and after CREATE:
    assert final(("d", "a"), "0006") == final(("d", "a"), "0099") == ("d", "a")
    assert final(("d", "a2"), "0004") == final(("d", "a2"), "0007") == ("d", "a3")
    assert final(("d", "a3"), "0008") == ("d", "a3")
    # a swap a -> tmp, b -> a, tmp -> b
    moves = table_moves([
        TableEvents("d", "tmp", [("0002", "s", rec("RENAME", V1, renamed_from="d.a"))]),
        TableEvents("d", "a", [("0001", "t", None), ("0003", "s", rec("RENAME", V1,
                                                                      renamed_from="d.b"))]),
        TableEvents("d", "b", [("0001", "t", None), ("0004", "s", rec("RENAME", V1,
                                                                      renamed_from="d.tmp"))])])
    assert moves.final(("d", "a"), "0001") == ("d", "b")
    assert moves.final(("d", "b"), "0001") == ("d", "a")
    assert moves.vacated == [("d", "tmp")]
    assert table_moves([TableEvents("d", "t", [("0001", "s", rec("ALTER", V1))])]) == (
        [], {}, [])


def test_check_types_names_the_column_both_types_and_what_to_do():
    same = (lambda c, have: have == ("int" if c.name == "id" else "string"))
    plan = plan_table(TableEvents("d", "t", [("0001", "s", rec("ALTER", V1))]), (V1, ["id"]),
                      never)
    plan.check_types({"id": "int", "v": "string"}, "T", same)
    with pytest.raises(SchemaError) as e:
        plan.check_types({"id": "int", "v": "int"}, "T", same, hint="T widens only")
    assert str(e.value) == ("T cannot take the source's columns: column v is int in T but "
                            "varchar(10) in the source (T widens only); nothing was written; "
                            "re-snapshot the table into a new target table (the source's option "
                            "signalTable, docs/snapshot.md), or migrate the target table by hand")
    plan = plan_table(TableEvents("d", "t", []), None,
                      lambda: (record_columns({"columns": V1}), ["id"]))
    with pytest.raises(SchemaError, match="column v is int in T but varchar in the source"):
        plan.check_types({"v": "int"}, "T", same)
