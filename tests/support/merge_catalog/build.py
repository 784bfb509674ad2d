"""Compile the test-only MERGE-capable catalog (``src/bincdc/test/*.java``) into a jar.

``python3 -m tests.support.merge_catalog.build [OUT_DIR]`` prints the jar's path. The sources
are compiled with ``javac`` against the jars in pyspark's ``jars/`` directory; the jar is put
on ``spark.jars`` with::

    spark.sql.catalog.<name>       bincdc.test.MergeCatalog
    spark.sql.catalog.<name>.path  <a directory for the tables>

:func:`build_jar` raises :class:`Unavailable` (the reason) when there is no ``javac`` or no
pyspark, so tests can skip with it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SRC = Path(__file__).resolve().parent / "src"
CATALOG_CLASS = "bincdc.test.MergeCatalog"
DUMP_CLASS = "bincdc.test.Dump"


class Unavailable(Exception):
    """The jar cannot be built here (the message says why)."""


def spark_jars() -> Path:
    try:
        import pyspark
    except ImportError:
        raise Unavailable("pyspark is not installed") from None
    jars = Path(pyspark.__file__).parent / "jars"
    if not jars.is_dir():
        raise Unavailable(f"pyspark has no jars directory at {jars}")
    return jars


def javac() -> str:
    path = shutil.which("javac")
    if path is None:
        raise Unavailable("javac not found (install a JDK, e.g. apt-get install "
                          "default-jdk-headless)")
    return path


def build_jar(out_dir: Path) -> Path:
    """The jar (rebuilt only when the sources change), in *out_dir*."""
    sources = sorted(SRC.rglob("*.java"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    out_dir = Path(out_dir)
    jar = out_dir / f"merge-catalog-{digest}.jar"
    if jar.is_file():
        return jar
    compiler = javac()
    classpath = str(spark_jars() / "*")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        r = subprocess.run([compiler, "-nowarn", "-encoding", "UTF-8", "-cp", classpath,
                            "-d", tmp, *map(str, sources)],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"javac failed:\n{r.stdout}{r.stderr}")
        part = jar.with_suffix(".part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for f in sorted(Path(tmp).rglob("*.class")):
                z.write(f, f.relative_to(tmp).as_posix())
        part.replace(jar)
    return jar


def dump_table(jar: Path, table_dir: Path) -> list[dict]:
    """The rows of a table of the catalog (its directory), each a dict of column -> the value's
    Spark ``toString`` (None for null), read by the jar's ``Dump`` (no Spark session)."""
    import json
    java = shutil.which("java") or "java"
    cp = f"{jar}:{spark_jars() / '*'}"
    r = subprocess.run([java, "-cp", cp, DUMP_CLASS, str(table_dir)], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"Dump failed: {r.stderr}")
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    names = lines[0]
    return [dict(zip(names, row)) for row in lines[1:]]


if __name__ == "__main__":
    try:
        print(build_jar(Path(sys.argv[1] if len(sys.argv) > 1 else "build/merge-catalog")))
    except Unavailable as e:
        print(f"cannot build the merge catalog: {e}", file=sys.stderr)
        sys.exit(2)
