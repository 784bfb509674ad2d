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
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cdc.errors import CdcError, ConfigurationError

SECTIONS = {"source", "delta", "stream", "metrics", "spark"}


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
        return self.trigger.replace("_", "").lower() == "availablenow"


def load_config(path: str | os.PathLike) -> JobConfig:
    """Read and check a job config (TOML); errors name the file and the key to fix."""
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
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"job config {where} is not valid TOML: {e}") from None
    unknown = set(raw) - SECTIONS
    if unknown:
        raise ConfigurationError(f"job config {where}: unknown section(s) {sorted(unknown)}; "
                                 f"the sections are {sorted(SECTIONS)}")

    def need(section: str, key: str):
        value = raw.get(section, {}).get(key)
        if value in (None, ""):
            raise ConfigurationError(f"job config {where}: [{section}] {key} is required")
        return value

    source = {str(k): _option_text(v) for k, v in raw.get("source", {}).items()}
    secret_env = source.pop("password_env", None)
    secret_file = source.pop("password_file", None)
    if secret_env:
        if secret_env not in os.environ:
            raise ConfigurationError(f"job config {where}: [source] password_env names "
                                     f"{secret_env}, which is not set in the environment")
        source["password"] = os.environ[secret_env]
    elif secret_file:
        try:
            source["password"] = Path(secret_file).read_text().rstrip("\n")
        except OSError as e:
            raise ConfigurationError(f"job config {where}: [source] password_file: {e}") \
                from None
    need("source", "host")
    stream = raw.get("stream", {})
    port = raw.get("metrics", {}).get("port")
    return JobConfig(source=source, delta_path=str(need("delta", "path")),
                     app_id=str(need("delta", "app_id")), checkpoint=str(need("stream", "checkpoint")),
                     trigger=str(stream.get("trigger", "10 seconds")),
                     query_name=stream.get("query_name"),
                     metrics_port=int(port) if port is not None else None,
                     spark={str(k): _option_text(v) for k, v in raw.get("spark", {}).items()})


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
    from streaming.options import SourceOptions
    if upserter is None:
        # the upserter reaches the server exactly as the stream does (TLS settings included)
        config = SourceOptions.parse({k: _option_text(v) for k, v in cfg.source.items()}) \
            .replica_config()
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
