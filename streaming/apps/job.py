"""Run a CDC pipeline from a config file: the binlog-cdc stream upserted into Delta tables.

    python3 -m streaming.job conf/job.example.toml [--available-now]

The TOML file (see ``conf/job.example.toml``) has the sections

* ``[source]``: the options of ``spark.readStream.format("binlog-cdc")`` as they are written
  there (``host``, ``port``, ``user``, ``includeTables``, ``startingPosition``, ...);
  ``password_env`` / ``password_file`` read the password from an environment variable / a file
  instead of writing it in the config;
* ``[delta]``: ``path`` (one Delta table per source table under it, ``<path>/<db>/<table>``)
  and ``app_id`` (names the stream in the tables' transaction logs: one per checkpoint);
* ``[stream]``: ``checkpoint`` (required), ``trigger`` (``"10 seconds"``, or ``"availableNow"``
  to drain what is there and stop), ``query_name``;
* ``[metrics]``: ``port`` of a Prometheus ``/metrics`` endpoint (optional);
* ``[spark]``: ``master`` and any ``spark.*`` settings for the session (when the job starts
  it; an already running session is used as it is).

Progress (batch, rows, lag) is printed after every micro-batch.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cdc.errors import CdcError, ConfigurationError

SECTIONS = ("source", "delta", "stream", "metrics", "spark")
DELTA_KEYS = ("path", "app_id")
STREAM_KEYS = ("checkpoint", "trigger", "query_name")
METRICS_KEYS = ("port",)
PASSWORD_KEYS = ("password_env", "password_file")      # read by the job, not Spark options
TABLE_LISTS = ("includeTables", "excludeTables")        # a TOML list or "db.a,db.b"
BATCH_ONLY = ("path", "paths")                          # options of spark.read, not of a stream
_UNITS = r"(?:week|day|hour|minute|second|millisecond|microsecond)s?"
#: the interval texts Spark's processingTime trigger takes ("10 seconds", "1 minute 30 seconds")
TRIGGER_INTERVAL = re.compile(rf"(?:interval\s+)?(?:\d+(?:\.\d+)?\s+{_UNITS}\s*)+",
                              re.IGNORECASE)


@dataclass
class JobConfig:
    source: dict[str, str]
    delta_path: str
    app_id: str
    checkpoint: str
    trigger: str = "10 seconds"
    query_name: str | None = None
    metrics_port: int | None = None
    spark: dict[str, str] = field(default_factory=dict)

    @property
    def available_now(self) -> bool:
        return _is_available_now(self.trigger)

    def source_options(self):
        """The ``[source]`` options parsed by the source's own parser
        (:class:`streaming.options.SourceOptions`); raises its :class:`ConfigurationError`."""
        from streaming.options import SourceOptions
        return SourceOptions.parse(self.source, streaming=True)


def _is_available_now(trigger: str) -> bool:
    return trigger.replace("_", "").lower() == "availablenow"


def load_config(path: str | os.PathLike) -> JobConfig:
    """Read and check a whole job config (TOML), the ``[source]`` options with the Spark source's
    own parser, so that a mistake stops the job before Spark starts. Every error is a
    :class:`ConfigurationError` naming the file, the section and the key to fix."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10: the same parser as a package
        import tomli as tomllib
    where = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigurationError(f"job config {where} does not exist (start from "
                                 f"conf/job.example.toml)") from None
    except OSError as e:
        raise ConfigurationError(f"job config {where} cannot be read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"job config {where} is not valid TOML: {e}") from None
    try:
        return _check(raw)
    except ConfigurationError as e:
        raise ConfigurationError(f"job config {where}: {e}") from None


def _check(raw: dict) -> JobConfig:
    unknown = [k for k in raw if k not in SECTIONS]
    if unknown:
        raise ConfigurationError(f"unknown section(s) {sorted(unknown)}; the sections are "
                                 f"{sorted(SECTIONS)}")
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise ConfigurationError(f"[{name}] must be a table (a [{name}] header with keys "
                                     f"under it), not {value!r}")
    source = _source(raw.get("source", {}))
    delta = raw.get("delta", {})
    _known_keys("delta", delta, DELTA_KEYS)
    stream = raw.get("stream", {})
    _known_keys("stream", stream, STREAM_KEYS)
    cfg = JobConfig(source=source, delta_path=_text("delta", delta, "path", required=True),
                    app_id=_text("delta", delta, "app_id", required=True),
                    checkpoint=_text("stream", stream, "checkpoint", required=True),
                    trigger=_trigger(stream), query_name=_text("stream", stream, "query_name"),
                    metrics_port=_metrics_port(raw.get("metrics", {})),
                    spark=_spark(raw.get("spark", {})))
    try:
        cfg.source_options()
    except ConfigurationError as e:
        raise ConfigurationError(f"[source] {e}") from None
    return cfg


def _known_keys(section: str, table: dict, valid, also: str = "") -> None:
    import difflib
    lower = {v.lower(): v for v in valid}
    for key in table:
        if str(key).lower() in lower:
            continue
        close = difflib.get_close_matches(str(key).lower(), list(lower), n=1, cutoff=0.6)
        hint = f" (did you mean {lower[close[0]]}?)" if close else ""
        raise ConfigurationError(f"[{section}] unknown key {key!r}{hint}; the keys are "
                                 f"{', '.join(valid)}{also}")


def _text(section: str, table: dict, key: str, required: bool = False) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            raise ConfigurationError(f"[{section}] {key} is required")
        return None
    if not isinstance(value, str):
        raise ConfigurationError(f"[{section}] {key} must be a string, not {value!r}")
    if not value.strip():
        raise ConfigurationError(f"[{section}] {key} must not be empty")
    return value


def _source(table: dict) -> dict[str, str]:
    from streaming.options import OPTIONS
    for key in table:
        if key in BATCH_ONLY:
            raise ConfigurationError(f"[source] {key} is for batch reads of binlog files "
                                     f"(spark.read), not for the job's stream")
    _known_keys("source", table, [k for k in OPTIONS if k not in BATCH_ONLY] + list(PASSWORD_KEYS),
                also=" (README: Options)")
    given = [k for k in ("password", "passwordFile", *PASSWORD_KEYS)
             if any(str(t).lower() == k.lower() for t in table)]
    if len(given) > 1:
        raise ConfigurationError(f"[source] password, password_env and password_file exclude "
                                 f"each other (given: {', '.join(given)})")
    source = {}
    for key, value in table.items():
        if key in TABLE_LISTS and isinstance(value, list) \
                and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        elif key in TABLE_LISTS and not isinstance(value, str):
            raise ConfigurationError(f"[source] {key} must be a string (\"db.t1,db.t2\") or a "
                                     f"list of strings, not {value!r}")
        source[str(key)] = _option_text(value)
    secret_env = source.pop("password_env", None)
    secret_file = source.pop("password_file", None)
    if secret_env:
        if secret_env not in os.environ:
            raise ConfigurationError(f"[source] password_env names {secret_env}, which is not "
                                     f"set in the environment")
        source["password"] = os.environ[secret_env]
    elif secret_file:
        try:
            source["password"] = Path(secret_file).read_text().rstrip("\n")
        except OSError as e:
            raise ConfigurationError(f"[source] password_file: {e}") from None
    if not source.get("host"):
        raise ConfigurationError("[source] host is required")
    return source


def _trigger(stream: dict) -> str:
    trigger = _text("stream", stream, "trigger")
    if trigger is None:
        return "10 seconds"
    if not _is_available_now(trigger) and not TRIGGER_INTERVAL.fullmatch(trigger.strip()):
        raise ConfigurationError(f"[stream] trigger {trigger!r} is not an interval Spark takes "
                                 f"(\"10 seconds\", \"1 minute\", \"500 milliseconds\") nor "
                                 f"\"availableNow\"")
    return trigger


def _metrics_port(metrics: dict) -> int | None:
    _known_keys("metrics", metrics, METRICS_KEYS)
    port = metrics.get("port")
    if port is None:
        return None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigurationError(f"[metrics] port must be an integer from 0 to 65535, not "
                                 f"{port!r} (0: any free port)")
    return port


def _spark(table: dict) -> dict[str, str]:
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            raise ConfigurationError(f"[spark] {key} is a table: quote a setting's dotted name, "
                                     f"\"spark.sql.shuffle.partitions\" = \"2\"")
        if key != "master" and not key.startswith("spark."):
            raise ConfigurationError(f"[spark] {key} is not a Spark setting: the keys are master "
                                     f"and spark.* settings (quoted: \"spark.sql.shuffle."
                                     f"partitions\" = \"2\")")
        out[key] = _option_text(value)
    return out


def _option_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        import json
        return json.dumps(v)
    return str(v)


def start(spark, cfg: JobConfig, upserter=None):
    """Start the streaming query of *cfg* (foreachBatch into a DeltaUpserter); returns it."""
    from streaming.delta import DeltaUpserter
    if upserter is None:
        # the upserter reaches the server exactly as the stream does (TLS settings included)
        config = cfg.source_options().replica_config()
        upserter = DeltaUpserter(cfg.delta_path, config=config, app_id=cfg.app_id)
    reader = spark.readStream.format("binlog-cdc")
    for k, v in cfg.source.items():
        reader = reader.option(k, v)
    writer = (reader.load().writeStream.foreachBatch(upserter)
              .option("checkpointLocation", cfg.checkpoint))
    if cfg.query_name:
        writer = writer.queryName(cfg.query_name)
    writer = (writer.trigger(availableNow=True) if cfg.available_now
              else writer.trigger(processingTime=cfg.trigger))
    return writer.start()


def progress_line(p: dict) -> str:
    """One line per micro-batch: batch id, rows, rows/s and the source's lag report."""
    lag = {}
    for s in p.get("sources") or []:
        latest = s.get("latestOffset")
        if isinstance(latest, str):
            import json
            try:
                latest = json.loads(latest)
            except ValueError:
                latest = None
        if isinstance(latest, dict):
            lag = latest
    rate = p.get("processedRowsPerSecond") or 0.0
    return (f"batch {p.get('batchId')}: {p.get('numInputRows', 0)} rows ({rate:,.0f} rows/s); "
            f"lag {lag.get('lagSeconds')} s, {lag.get('behindBytes')} bytes / "
            f"{lag.get('behindTransactions')} transactions behind")


def run(cfg: JobConfig, spark=None, out=sys.stdout) -> int:
    """Run the job until it stops (availableNow) or is interrupted; 0 on success."""
    if spark is None:
        spark = _session(cfg)
    if cfg.metrics_port is not None:
        from streaming.metrics import start_metrics
        start_metrics(spark, port=cfg.metrics_port)
        print(f"Prometheus metrics on http://127.0.0.1:{cfg.metrics_port}/metrics", file=out)
    query = start(spark, cfg)
    print(f"streaming {cfg.source.get('host')} into {cfg.delta_path} (checkpoint "
          f"{cfg.checkpoint}, trigger {cfg.trigger})", file=out, flush=True)
    seen = -1
    try:
        while True:
            done = query.awaitTermination(1.0)
            for p in query.recentProgress:
                if p.get("batchId", -1) > seen:
                    seen = p["batchId"]
                    print(progress_line(p), file=out, flush=True)
            if done:
                break
    except KeyboardInterrupt:
        print("interrupted: stopping the query (it resumes from its checkpoint)", file=out)
        query.stop()
    if query.exception() is not None:
        raise query.exception()
    return 0


def _session(cfg: JobConfig):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    b = SparkSession.builder.appName(cfg.query_name or "binlog-cdc-job")
    b = b.master(cfg.spark.get("master", "local[2]"))
    b = b.config("spark.sql.session.timeZone", "UTC")
    for k, v in cfg.spark.items():
        if k != "master":
            b = b.config(k, v)
    return b.getOrCreate()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m streaming.job", description=__doc__.split(
        "\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("config", help="the job's TOML file (see conf/job.example.toml)")
    ap.add_argument("--available-now", action="store_true",
                    help="drain what the binlog holds now, then stop (overrides [stream] trigger)")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config)
        if args.available_now:
            cfg.trigger = "availableNow"
        t = time.monotonic()
        rc = run(cfg)
        print(f"stopped after {time.monotonic() - t:.1f} s", flush=True)
        return rc
    except CdcError as e:
        print(f"binlog-cdc job: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
