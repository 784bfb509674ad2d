"""The launcher a local session's Python workers run (streaming.apps.local_spark.worker_python):
Spark's zips of PySpark and Py4J and its core jar off PYTHONPATH, everything else kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from streaming.apps.local_spark import redundant_paths, worker_python  # noqa: E402

PACKAGE = os.path.dirname(os.path.realpath(__import__("pyspark").__file__))

# what a worker reports: its PYTHONPATH and where it imported pyspark and py4j from
REPORT = ("import os, pyspark, py4j; print(repr(os.environ.get('PYTHONPATH'))); "
          "print(pyspark.__file__); print(py4j.__file__)")


def _run(launcher: str, pythonpath: str | None, tmp_path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([launcher, "-c", REPORT], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.fixture
def launcher(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_HOME", raising=False)
    path = worker_python()
    if path == sys.executable:
        pytest.skip("PySpark is not pip-installed with its python/lib zips here")
    return path


def test_the_redundant_paths_are_sparks_copies_of_installed_packages():
    paths = redundant_paths(PACKAGE)
    names = [os.path.relpath(p, PACKAGE) for p in paths]
    assert os.path.join("python", "lib", "pyspark.zip") in names
    from importlib.metadata import version
    assert os.path.join("python", "lib", f"py4j-{version('py4j')}-src.zip") in names
    assert all(os.path.isfile(p) for p in paths)
    # a jar is only left out when nothing in it could be imported
    import zipfile
    for jar in (p for p in paths if p.endswith(".jar")):
        assert not any(n.endswith((".py", ".pyc")) for n in zipfile.ZipFile(jar).namelist())


def test_workers_import_the_installed_pyspark_and_keep_the_rest_of_their_path(launcher,
                                                                               tmp_path):
    spark_path = redundant_paths(PACKAGE)
    # Spark's order: its zips (and core jar) first, then the user's entries
    mine = [str(tmp_path / "a b"), str(tmp_path / "c*"), str(tmp_path / "d")]
    pythonpath, pyspark_file, py4j_file = _run(launcher, ":".join(spark_path[:2] + mine[:2] +
                                                                  spark_path[2:] + mine[2:]),
                                               tmp_path)
    assert pythonpath == repr(":".join(mine))
    assert pyspark_file == os.path.join(PACKAGE, "__init__.py")
    assert ".zip" not in py4j_file
    # nothing but Spark's entries: no PYTHONPATH at all (an empty one would mean the cwd)
    assert _run(launcher, ":".join(spark_path), tmp_path)[0] == "None"
    assert _run(launcher, None, tmp_path)[0] == "None"


def test_the_plain_interpreter_unless_spark_is_this_pip_installed_pyspark(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))          # another Spark: its own zips
    assert worker_python() == sys.executable
    monkeypatch.setenv("SPARK_HOME", PACKAGE)
    assert worker_python() != sys.executable or not redundant_paths(PACKAGE)
    # a launcher that cannot be written: the interpreter itself
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert worker_python() == sys.executable


def test_the_launcher_is_written_once_and_private(launcher, tmp_path):
    st = os.stat(launcher)
    assert worker_python() == launcher and os.stat(launcher).st_mtime_ns == st.st_mtime_ns
    assert st.st_mode & 0o022 == 0 and os.stat(os.path.dirname(launcher)).st_mode & 0o077 == 0


@pytest.mark.spark
def test_a_local_sessions_workers_run_through_the_launcher(spark):
    """The tests' sessions (like the demo's, the job's and the benchmarks') use it: a task's
    worker imported PySpark from the installed package, not from Spark's zip."""
    if spark.sparkContext.pythonExec == sys.executable:
        pytest.skip("PySpark is not pip-installed with its python/lib zips here")
    seen = spark.range(1).rdd.map(lambda _: (__import__("pyspark").__file__,
                                             os.environ.get("PYTHONPATH"))).collect()
    [(pyspark_file, pythonpath)] = seen
    assert pyspark_file == os.path.join(PACKAGE, "__init__.py")
    assert not set(redundant_paths(PACKAGE)) & set((pythonpath or "").split(":"))
