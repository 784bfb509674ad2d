"""tools.spark_env (what a PySpark version's environment gets) and tools.compat_table (the
README's table from the compatibility suite's JUnit XML)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools import compat_table, spark_env

CASE = '<testcase classname="{cls}" name="{name}">{props}{body}</testcase>'


def _xml(path: Path, cases: list[tuple[str, str | None, str]]) -> None:
    out = []
    for name, feature, result in cases:
        props = (f'<properties><property name="compat" value="{feature}"/></properties>'
                 if feature else "")
        body = {"passed": "", "failed": '<failure message="x"/>',
                "skipped": '<skipped message="y"/>'}[result]
        out.append(CASE.format(cls="tests.live.t", name=name, props=props, body=body))
    path.write_text('<testsuites><testsuite name="pytest">' + "".join(out)
                    + "</testsuite></testsuites>")


def test_each_version_gets_its_pyspark_the_extras_and_the_build_requirements():
    for minor, rel in spark_env.RELEASES.items():
        reqs = spark_env.requirements(rel)
        assert [r for r in reqs if r.startswith("pyspark")] == [f"pyspark=={minor}.*"]
        for wanted in ("pymysql>=1.1", "pyarrow>=14", "deltalake>=1.0", "pytest>=8",
                       "setuptools>=68"):
            assert wanted in reqs
    assert spark_env.RELEASES["4.3"].delta_spark is None       # no delta-spark for 4.3 yet
    assert "3.10" not in spark_env.RELEASES["4.3"].pythons     # pyspark 4.3 needs 3.11+
    with pytest.raises(spark_env.SparkEnvError, match="unknown PySpark version '3.5'"):
        spark_env.release("3.5")


def test_the_table_counts_each_feature_per_release_and_the_readme_gets_it(tmp_path):
    _xml(tmp_path / "pyspark-4.0.5-py3.10.xml", [
        ("test_a[mariadb-10.11]", "stream", "passed"), ("test_b", "stream", "failed"),
        ("test_c", "snapshot", "skipped"), ("test_other", None, "passed")])
    _xml(tmp_path / "pyspark-4.3.0-py3.11.xml", [
        ("test_a[mariadb-10.11]", "stream", "passed"), ("test_a[mysql-9.7]", "stream", "passed"),
        ("test_b", "stream", "passed"), ("test_c", "snapshot", "passed")])
    _xml(tmp_path / "pyspark-4.1.4-py3.12.xml", [("test_a[mariadb-10.11]", "stream", "passed")])
    text = compat_table.table(compat_table.runs(tmp_path))
    assert text.splitlines() == [
        "| feature | PySpark 4.0.5 (Python 3.10) | PySpark 4.1.4 (Python 3.12) "
        "| PySpark 4.3.0 (Python 3.11) |",
        "|---|---|---|---|",
        "| snapshot | 0/1 passed (1 skipped) | – | 1/1 passed |",
        "| stream | 1/2 passed (1 failed) | 1/1 passed | 2/2 passed |",
    ]
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{compat_table.BEGIN}\nold\n{compat_table.END}\n\nrest\n")
    assert compat_table.main([str(tmp_path), "--readme", str(readme)]) == 1   # a failure
    assert readme.read_text() == f"# x\n\n{compat_table.BEGIN}\n{text}\n{compat_table.END}\n\nrest\n"
    assert compat_table.totals(compat_table.runs(tmp_path)) == {
        "passed": 7, "failed": 1, "skipped": 1, "xfailed": 0}


def test_an_xfail_is_an_expected_failure_in_the_junit_xml_pytest_writes(tmp_path, capsys):
    """The XML of a real pytest run: an xfail is not counted as skipped (pytest writes both as
    ``<skipped>``), nor an unexpected pass of a non-strict xfail as a failure."""
    (tmp_path / "test_suite.py").write_text(textwrap.dedent("""
        import pytest

        def test_passes(record_property):
            record_property("compat", "f")

        @pytest.mark.xfail(strict=False, reason="an open defect")
        def test_known_defect(record_property):
            record_property("compat", "f")
            assert False

        @pytest.mark.xfail(strict=False, reason="an open defect, fixed by chance")
        def test_known_defect_passes(record_property):
            record_property("compat", "f")

        def test_skips(record_property):
            record_property("compat", "f")
            pytest.skip("no connector")
    """))
    runs = tmp_path / "runs"
    runs.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={runs / 'pyspark-4.1.4-py3.12.xml'}", "test_suite.py"],
                   cwd=tmp_path, env=env, capture_output=True, check=True)
    assert compat_table.table(compat_table.runs(runs)).splitlines()[-1] == \
        "| f | 2/4 passed (1 skipped, 1 expected failure) |"
    assert compat_table.main([str(runs)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "total: 2 passed, 0 failed, 1 skipped, 1 expected failure"
