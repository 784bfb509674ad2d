"""streaming.apps.local_spark's table-format settings: the connector of each Spark version, a
clear error where none exists, and the settings a session writing Delta and Iceberg gets."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from cdc.errors import ConfigurationError  # noqa: E402
from streaming.apps.local_spark import connector, format_settings  # noqa: E402


def test_the_connector_of_each_spark_version():
    assert connector("delta", "4.2.1") == "io.delta:delta-spark_4.2_2.13:4.4.0"
    assert connector("iceberg", "4.1.4").startswith(
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:")
    with pytest.raises(ConfigurationError, match=r"no delta connector release supports Spark "
                                                 r"4\.3\.0 \(Spark versions with one: 4\.0, "
                                                 r"4\.1, 4\.2\)"):
        connector("delta", "4.3.0")
    with pytest.raises(ConfigurationError, match="Spark 4.2.1"):
        connector("iceberg", "4.2.1")


def test_format_settings(monkeypatch, tmp_path):
    monkeypatch.setattr("pyspark.__version__", "4.1.4")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    s = format_settings(["delta", "iceberg"], "/wh")
    assert s["spark.jars.packages"] == ",".join([connector("delta", "4.1.4"),
                                                 connector("iceberg", "4.1.4")])
    assert s["spark.jars.ivy"] == str(tmp_path / "binlog-cdc" / "ivy")
    assert s["spark.sql.extensions"] == ("io.delta.sql.DeltaSparkSessionExtension,org.apache."
                                         "iceberg.spark.extensions.IcebergSparkSessionExtensions")
    assert s["spark.sql.catalog.iceberg.warehouse"] == "/wh"
    assert format_settings([]) == {}
    with pytest.raises(ConfigurationError, match="needs a warehouse"):
        format_settings(["iceberg"])
    with pytest.raises(ConfigurationError, match="use delta and/or iceberg"):
        format_settings(["hudi"])
