"""DeltaUpserter follows DDL as the source server does (streaming.sinks.delta.ddl): each DDL runs on
the harness's MariaDB over a table with rows, the same change reaches the upserter as a
hand-built schema-change record (the format of the source's includeSchemaChanges), and the Delta
table must equal ``SELECT *`` afterwards -- columns in order, and the values existing rows got
(DEFAULT literals, MySQL's implicit defaults of NOT NULL columns, converted types)."""

from __future__ import annotations

from decimal import Decimal

import pytest

pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")
pa = pytest.importorskip("pyarrow")

from cdc.values.render import to_json_text  # noqa: E402
from streaming.sinks.delta.upserter import DeltaUpserter  # noqa: E402

pytestmark = [pytest.mark.server]

ID = {"name": "id", "type": "int(11)", "nullable": False, "charset": None, "default": None,
      "default_expr": False}
V = {"name": "v", "type": "varchar(10)", "nullable": True, "charset": "utf8mb4",
     "default": None, "default_expr": False}
N = {"name": "n", "type": "int(11)", "nullable": True, "charset": None, "default": None,
     "default_expr": False}


def col(name, type_, nullable=True, default=None, charset=None):
    return {"name": name, "type": type_, "nullable": nullable, "charset": charset,
            "default": default, "default_expr": False}


# (DDL after "ALTER TABLE t ", the record's columns, renamed columns)
CASES = {
    "int_default": ("ADD w INT NOT NULL DEFAULT 7", [ID, V, N, col("w", "int(11)", False, 7)]),
    "text_default": ("ADD w VARCHAR(10) NOT NULL DEFAULT 'x y'",
                     [ID, V, N, col("w", "varchar(10)", False, "x y", "utf8mb4")]),
    "decimal_default": ("ADD w DECIMAL(6,2) DEFAULT 1.5",
                        [ID, V, N, col("w", "decimal(6,2)", True, Decimal("1.50"))]),
    "datetime_default": ("ADD w DATETIME DEFAULT '2020-01-02 03:04:05'",
                         [ID, V, N, col("w", "datetime", True, "2020-01-02T03:04:05")]),
    "int_not_null_implicit": ("ADD w INT NOT NULL", [ID, V, N, col("w", "int(11)", False)]),
    "text_not_null_implicit": ("ADD w VARCHAR(5) NOT NULL",
                               [ID, V, N, col("w", "varchar(5)", False, None, "utf8mb4")]),
    "enum_not_null_implicit": ("ADD w ENUM('p','q') NOT NULL",
                               [ID, V, N, col("w", "enum('p','q')", False, None, "utf8mb4")]),
    "nullable_first": ("ADD w INT FIRST", [col("w", "int(11)"), ID, V, N]),
    "after_column": ("ADD w BIGINT UNSIGNED DEFAULT 18446744073709551615 AFTER id",
                     [ID, col("w", "bigint(20) unsigned", True, 18446744073709551615), V, N]),
    "drop": ("DROP COLUMN v", [ID, N]),
    "rename": ("RENAME COLUMN v TO label", [ID, col("label", "varchar(10)", True, None,
                                                    "utf8mb4"), N], {"v": "label"}),
    "change": ("CHANGE n amount BIGINT", [ID, V, col("amount", "bigint(20)")], {"n": "amount"}),
    "widen_int": ("MODIFY n BIGINT", [ID, V, col("n", "bigint(20)")]),
    "int_to_decimal": ("MODIFY n DECIMAL(12,3)", [ID, V, col("n", "decimal(12,3)")]),
    "int_to_double": ("MODIFY n DOUBLE", [ID, V, col("n", "double")]),
    "int_to_text": ("MODIFY n VARCHAR(20)", [ID, V, col("n", "varchar(20)", True, None,
                                                       "utf8mb4")]),
    "longer_text": ("MODIFY v VARCHAR(40)", [ID, col("v", "varchar(40)", True, None, "utf8mb4"),
                                             N]),
    "date_not_null_implicit": ("ADD w DATE NOT NULL", [ID, V, N, col("w", "date", False)]),
    "narrow_int": ("MODIFY n SMALLINT", [ID, V, col("n", "smallint(6)")]),
    "text_to_int": ("MODIFY v INT", [ID, col("v", "int(11)"), N], {}, [(1, "12", 10),
                                                                        (2, None, -3),
                                                                        (3, "-4", None)]),
    "decimal_up": ("MODIFY w DECIMAL(14,4)", [ID, V, N, col("w", "decimal(14,4)")], {}, None,
                   "w DECIMAL(6,2)"),
    "float_to_double": ("MODIFY w DOUBLE", [ID, V, N, col("w", "double")], {}, None, "w FLOAT"),
    "charset": ("MODIFY v VARCHAR(10) CHARACTER SET latin1", [ID, col("v", "varchar(10)", True,
                                                                      None, "latin1"), N]),
}
ROWS = [(1, "a", 10), (2, None, -3), (3, "ccc", None)]


def _source_rows(mariadb, db):
    cur = mariadb.execute(f"SELECT * FROM `{db}`.t ORDER BY id")
    names = [r[0] for r in mariadb.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
        "TABLE_NAME = 't' ORDER BY ORDINAL_POSITION", (db,))]
    return names, [tuple(r) for r in cur]


def _delta_rows(path):
    data = deltalake.DeltaTable(path).to_pyarrow_table().sort_by([("id", "ascending")])
    return data.column_names, [tuple(r.values()) for r in data.to_pylist()]


def _seq(i):
    return "0000000001:%012d:%010d" % (i, 0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_delta_equals_select_star_after_the_ddl(mariadb, db, tmp_path, case):
    ddl, columns, *more = CASES[case]
    renamed, rows, extra = (more + [{}, None, None])[:3] if more else ({}, None, None)
    rows = rows or ROWS
    extra_col = (", " + extra) if extra else ""
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT NOT NULL PRIMARY KEY, v VARCHAR(10), "
                    f"n INT{extra_col})")
    names = ["id", "v", "n"] + (["w"] if extra else [])
    rows = [r + ((Decimal("1.25") if "DECIMAL" in extra else 1.5),) if extra else r
            for r in rows]
    for r in rows:
        mariadb.execute(f"INSERT INTO `{db}`.t VALUES ({', '.join(['%s'] * len(r))})", r)
    p = mariadb.cdc_params()
    up = DeltaUpserter(tmp_path, host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="ddl")
    try:
        seed = [("c", db, "t", None, to_json_text(dict(zip(names, r))), _seq(i), None)
                for i, r in enumerate(rows[:2])]
        up.upsert_arrow(_table(seed), 0)         # rows 1, 2 are in Delta; 3 comes in the batch
        mariadb.execute(f"ALTER TABLE `{db}`.t {ddl}")
        record = to_json_text({"type": "ALTER", "ddl": f"ALTER TABLE t {ddl}", "renamed_from": None,
                             "renamed_columns": renamed,
                             "columns": columns, "primary_key": ["id"], "unsure": False})
        batch = [("c", db, "t", None, to_json_text(dict(zip(names, rows[2]))), _seq(10), None),
                 ("s", db, "t", None, None, None, _seq(20), record)]
        batch = [r if len(r) == 7 else r[:5] + r[6:] for r in batch]
        up.upsert_arrow(_table(batch), 1)
    finally:
        up.close()
    want = _source_rows(mariadb, db)
    got = _delta_rows(str(tmp_path / db / "t"))
    assert got[0] == want[0]
    assert got[1] == [tuple(_delta_value(v) for v in r) for r in want[1]]


def _delta_value(v):
    """A value of SELECT * as the Delta table holds it: zero dates (PyMySQL: the text) null."""
    if isinstance(v, str) and v.startswith("0000-00-00"):
        return None
    return v


def _table(rows):
    names = ["op", "db", "table", "before", "after", "seq", "schema_change"]
    return pa.table({n: pa.array(list(c), pa.string()) for n, c in zip(names, zip(*rows))})
