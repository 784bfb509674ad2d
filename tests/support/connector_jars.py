"""The local jar files of a table-format connector, for a ``spark-pipelines`` run.

``spark-pipelines`` runs the pipeline in a Spark Connect session, and that session loads
catalogs, data sources and session extensions from the JVM's class path only: jars given with
``--packages`` or ``--jars`` are fetched and added, but a Connect session does not see them
(``DATA_SOURCE_NOT_FOUND``, ``ClassNotFoundException: io.delta.sql.DeltaSparkSessionExtension``).
So the connector's jars are fetched first, with Spark's own resolver (``spark-submit --packages``
into an ivy cache), and put on ``SPARK_DIST_CLASSPATH``, which Spark's launcher appends to the
JVM's class path (after Spark's own jars: where both have a library, Spark's copy wins).

:func:`resolve` raises :class:`Unavailable` (the reason) when the jars cannot be fetched, so
tests can skip with it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: ``found io.delta#delta-storage;4.4.0 in central`` (Spark's resolver, one line per module)
FOUND = re.compile(r"^\s*found (\S+?)#(\S+?);(\S+) in ", re.M)


class Unavailable(Exception):
    """The connector's jars cannot be had here (the message says why)."""


def spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).resolve().parent


def spark_libraries() -> set[str]:
    """The names (without versions) of the libraries in PySpark's ``jars/``."""
    return {re.sub(r"-\d[^-]*(-[^-]*)*\.jar$", "", p.name)
            for p in (spark_home() / "jars").glob("*.jar")}


def resolve(coordinate: str, ivy: Path) -> list[Path]:
    """The jars of *coordinate* (``group:artifact:version``) and its dependencies that PySpark
    does not have itself, fetched (once) into the ivy cache *ivy*."""
    ivy = Path(ivy)
    with tempfile.TemporaryDirectory() as tmp:
        noop = Path(tmp) / "noop.py"
        noop.write_text("")
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
        try:
            r = subprocess.run([str(spark_home() / "bin" / "spark-submit"), "--packages",
                                coordinate, "--conf", f"spark.jars.ivy={ivy}", str(noop)],
                               capture_output=True, text=True, timeout=600, env=env)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Unavailable(f"spark-submit --packages {coordinate}: {e}") from None
    out = r.stdout + r.stderr
    found = FOUND.findall(out)
    if r.returncode != 0 or not found:
        tail = "\n".join(out.splitlines()[-5:])
        raise Unavailable(f"spark-submit --packages {coordinate} failed ({r.returncode}): {tail}")
    have = spark_libraries()
    jars = [ivy / "jars" / f"{org}_{name}-{rev}.jar" for org, name, rev in found
            if name not in have]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise Unavailable(f"the resolver named jars it did not store: {', '.join(missing)}")
    return jars
