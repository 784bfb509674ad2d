"""streaming.sinks.spark.values.widens: the column type changes SparkMerge makes in place, per
format (Delta's type widening, Iceberg's type promotions); anything else is refused."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from streaming.sinks.spark.values import widens  # noqa: E402


@pytest.mark.parametrize("have,want,delta,iceberg", [
    ("int", "bigint", True, True),
    ("tinyint", "int", True, True),
    ("smallint", "bigint", True, True),
    ("bigint", "int", False, False),                 # narrowing
    ("int", "string", False, False),
    ("string", "int", False, False),
    ("float", "double", True, True),
    ("double", "float", False, False),
    ("int", "double", True, False),
    ("bigint", "double", False, False),
    ("decimal(6,2)", "decimal(12,2)", True, True),
    ("decimal(6,2)", "decimal(12,4)", True, False),  # scale: Delta only
    ("decimal(6,2)", "decimal(7,4)", False, False),  # fewer integer digits
    ("decimal(12,2)", "decimal(6,2)", False, False),
    ("int", "decimal(10,0)", True, False),
    ("int", "decimal(9,0)", False, False),
    ("bigint", "decimal(20,0)", True, False),        # BIGINT -> BIGINT UNSIGNED
    ("date", "timestamp_ntz", True, False),
    ("string", "string", True, True),
])
def test_widens(have, want, delta, iceberg):
    assert widens("delta", have, want) is delta
    assert widens("iceberg", have, want) is iceberg
