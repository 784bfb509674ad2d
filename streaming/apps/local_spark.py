"""A local SparkSession set up the way binlog-cdc's demo, tests and benchmarks use it."""

from __future__ import annotations

import glob
import hashlib
import os
import shlex
import sys
import zipfile
from urllib.parse import urlparse

from streaming._compat import CHECKPOINT_FILE_MANAGER

# Spark's checkpoint writer that renames a temporary file with the FileSystem API. The default
# (FileContext) one costs ~40 ms per log file on a local disk, and every micro-batch writes two
# (the offset log and the commit log): with this one both take ~10-20 ms. The rename is atomic
# on local disks and HDFS, which is what a checkpoint needs; on object stores keep Spark's
# default (see docs/performance.md "Low latency").
FILE_SYSTEM_CHECKPOINTS = ("spark.sql.streaming.checkpointFileManagerClass",
                           CHECKPOINT_FILE_MANAGER)


def renames_atomically(location: str) -> bool:
    """True for a checkpoint *location* on a local disk or HDFS (a plain path, ``file:``,
    ``hdfs:``), where :data:`FILE_SYSTEM_CHECKPOINTS` is safe."""
    return urlparse(location).scheme in ("", "file", "hdfs")


# Spark puts $SPARK_HOME/python/lib/pyspark.zip and py4j-*-src.zip first on every Python
# worker's PYTHONPATH. With PySpark installed by pip these zips hold the same files as the
# installed packages, but Python caches no bytecode for a zip: each worker compiles PySpark and
# Py4J again. A local session starts ~5 workers one after the other before its first batch
# (data source lookup, creation, the stream's driver-side reader, planning, tasks) and one more
# per query (the stream reader). Measured on 2 cores (bench e2e's start run, interleaved): first
# batch 10.7-11.8 s -> 6.4-6.8 s on a fresh session, 1.6-1.7 s -> 1.0 s on a warm one.
_LAUNCHER = """#!/bin/sh
# Written by binlog-cdc (streaming.apps.local_spark.worker_python): runs the Python below for Spark's
# Python workers without the entries of Spark's PYTHONPATH they do not need (copies of packages
# installed at the same version, a jar without Python files), so that they import the
# installed packages, with cached bytecode.
set -f
p=
IFS=:
for e in $PYTHONPATH; do
  case "$e" in
    {paths}) ;;
    *) p="${{p:+$p:}}$e" ;;
  esac
done
unset IFS
set +f
if [ -n "$p" ]; then PYTHONPATH=$p; export PYTHONPATH; else unset PYTHONPATH; fi
exec {python} "$@"
"""


def redundant_paths(package: str) -> list[str]:
    """The entries Spark puts on a worker's PYTHONPATH from *package* (the pip-installed
    PySpark, its ``SPARK_HOME``) that a worker of this interpreter does not need:
    ``python/lib/pyspark.zip`` (this very package), ``python/lib/py4j-<v>-src.zip`` when the
    installed Py4J is version *v*, and ``jars/spark-core_*.jar`` when it holds no Python file
    (Spark adds it for deployments that ship PySpark inside it; reading its index of ~6,000
    entries costs each worker 50-90 ms)."""
    from importlib.metadata import PackageNotFoundError, version
    lib = os.path.join(package, "python", "lib")
    paths = [os.path.join(lib, "pyspark.zip")]
    try:
        paths.append(os.path.join(lib, f"py4j-{version('py4j')}-src.zip"))
    except PackageNotFoundError:
        pass
    for jar in glob.glob(os.path.join(glob.escape(package), "jars", "spark-core_*.jar")):
        try:
            with zipfile.ZipFile(jar) as z:
                if not any(n.endswith((".py", ".pyc")) for n in z.namelist()):
                    paths.append(jar)
        except (OSError, zipfile.BadZipFile):
            pass
    return [p for p in paths if os.path.isfile(p)]


def worker_python() -> str:
    """The Python that a local session's workers should run: this interpreter, through a
    launcher (in ``~/.cache/binlog-cdc``) that keeps :func:`redundant_paths` off their
    PYTHONPATH, when Spark runs from the pip-installed PySpark this interpreter imports
    (``SPARK_HOME`` unset or that package). Otherwise (or not on a POSIX system, or when the
    launcher cannot be written) :data:`sys.executable` itself. Only for local sessions:
    executors elsewhere have no such file."""
    import pyspark
    package = os.path.dirname(os.path.realpath(pyspark.__file__))
    home = os.environ.get("SPARK_HOME")
    if os.name != "posix" or (home and os.path.realpath(home) != package):
        return sys.executable
    redundant = redundant_paths(package)
    if not redundant:
        return sys.executable
    text = _LAUNCHER.format(paths="|".join(map(shlex.quote, redundant)),
                            python=shlex.quote(sys.executable))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = os.path.join(cache, "binlog-cdc", f"python-{digest}")
    try:
        if not os.path.isfile(path) or _read(path) != text:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(text)
            os.chmod(tmp, 0o755)
            os.replace(tmp, path)
    except OSError:
        return sys.executable
    return path


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


#: Spark's log settings of a local session (:func:`quiet_start`)
LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")


def quiet_start() -> dict[str, str]:
    """The settings of a local session that starts without Spark's notices (its log settings
    from :data:`LOG4J2`: warnings and errors, no "default log4j profile" or "default log level"
    lines, no warning that Hadoop's native library is missing), and ``SPARK_LOCAL_IP`` set to
    the loopback address unless set (a local session binds there anyway; unset, Spark warns
    that the host name resolves to it). Only for a session whose driver starts in this
    process, and not when ``spark.driver.extraJavaOptions`` is set otherwise."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2}"}


#: Maven coordinates of the table-format connectors by Spark minor version (docs/sinks.md)
CONNECTORS = {
    "delta": {"4.0": "io.delta:delta-spark_4.0_2.13:4.4.0",
              "4.1": "io.delta:delta-spark_4.1_2.13:4.4.0",
              "4.2": "io.delta:delta-spark_4.2_2.13:4.4.0"},
    "iceberg": {"4.0": "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.1",
                "4.1": "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"},
}
#: the name of the Iceberg catalog of a local session (a Hadoop catalog in its warehouse)
ICEBERG_CATALOG = "iceberg"


def connector(fmt: str, spark_version: str | None = None) -> str:
    """The Maven coordinates of *fmt*'s connector for this PySpark (or *spark_version*);
    :class:`~cdc.errors.ConfigurationError` when no release supports it."""
    from cdc.errors import ConfigurationError
    if spark_version is None:
        import pyspark
        spark_version = pyspark.__version__
    minor = ".".join(spark_version.split(".")[:2])
    found = CONNECTORS.get(fmt, {}).get(minor)
    if found is None:
        have = ", ".join(sorted(CONNECTORS.get(fmt, {}))) or "none"
        raise ConfigurationError(f"no {fmt} connector release supports Spark {spark_version} "
                                 f"(Spark versions with one: {have}); run a PySpark of those")
    return found


def _ivy_cache() -> str:
    """Where the sessions' Maven packages are fetched to (once)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "binlog-cdc", "ivy")


def format_settings(formats, warehouse: str | None = None) -> dict[str, str]:
    """The settings of a session that writes *formats* (``delta``, ``iceberg``): the
    connectors' jars (``spark.jars.packages``, fetched once into ``~/.cache/binlog-cdc/ivy``),
    their SQL extensions, delta-spark's catalog as the session catalog, and
    :data:`ICEBERG_CATALOG`, a Hadoop catalog in *warehouse*."""
    formats = list(formats)
    if not formats:
        return {}
    unknown = [f for f in formats if f not in CONNECTORS]
    if unknown:
        from cdc.errors import ConfigurationError
        raise ConfigurationError(f"table formats {unknown}: use delta and/or iceberg")
    out = {"spark.jars.packages": ",".join(connector(f) for f in formats),
           "spark.jars.ivy": _ivy_cache()}
    ext = []
    if "delta" in formats:
        ext.append("io.delta.sql.DeltaSparkSessionExtension")
        out["spark.sql.catalog.spark_catalog"] = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    if "iceberg" in formats:
        if not warehouse:
            from cdc.errors import ConfigurationError
            raise ConfigurationError("an Iceberg session needs a warehouse directory")
        ext.append("org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        cat = f"spark.sql.catalog.{ICEBERG_CATALOG}"
        out.update({cat: "org.apache.iceberg.spark.SparkCatalog", f"{cat}.type": "hadoop",
                    f"{cat}.warehouse": warehouse})
    out["spark.sql.extensions"] = ",".join(ext)
    return out


def _jvm_with(packages: str) -> None:
    """Make sure the next session's JVM has *packages* on its classpath: a driver's jars are
    fixed when its JVM starts, and a new session in a JVM this process already started (an
    earlier session, stopped or not) would silently lack them (``ClassNotFoundException`` at
    the first table). So a running JVM started without them is stopped first."""
    from pyspark import SparkContext
    if SparkContext._gateway is None:
        return
    sc = SparkContext._active_spark_context
    if sc is not None and sc.getConf().get("spark.jars.packages", "") == packages:
        return
    if sc is not None:
        sc.stop()
    SparkContext._gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None


def local_spark(app_name: str = "binlog-cdc", cores: int = 2, formats=(),
                warehouse: str | None = None, packages=()):
    """``local[cores]``, no UI or console progress bars, UTC session time zone, 2 shuffle
    partitions, Python workers on this interpreter (through :func:`worker_python`'s launcher
    unless ``PYSPARK_PYTHON`` names one), a quiet start (:func:`quiet_start`), log level ERROR
    once started, the checkpoint writer of :data:`FILE_SYSTEM_CHECKPOINTS` (its checkpoints
    are local). *formats*: the table formats it writes with Spark (:func:`format_settings`);
    *packages*: more Maven coordinates for its classpath (e.g. a catalog's JDBC driver)."""
    settings = format_settings(formats, warehouse)
    if packages:
        jars = [settings["spark.jars.packages"]] if settings.get("spark.jars.packages") else []
        settings["spark.jars.packages"] = ",".join(jars + list(packages))
        settings.setdefault("spark.jars.ivy", _ivy_cache())
    if "PYSPARK_PYTHON" not in os.environ:     # (setdefault would build the launcher anyway)
        os.environ["PYSPARK_PYTHON"] = worker_python()
    if settings.get("spark.jars.packages"):
        _jvm_with(settings["spark.jars.packages"])
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in {**quiet_start(), **settings}.items():
        builder = builder.config(key, value)
    spark = (builder
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config(*FILE_SYSTEM_CHECKPOINTS).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
