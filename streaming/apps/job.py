"""Run a CDC pipeline from a config file: the binlog-cdc stream upserted into Delta tables.

    python3 -m streaming.job --example > job.toml     # then edit it
    python3 -m streaming.job job.toml [--available-now]
    python3 -m streaming.job --check job.toml         # binlog-cdc check of the source

The TOML file (the example: ``job.example.toml`` next to this module) has the sections

* ``[source]``: the options of ``spark.readStream.format("binlog-cdc")`` as they are written
  there (``host``, ``port``, ``user``, ``includeTables``, ``startingPosition``, ...);
  ``password_env`` / ``password_file`` read the password from an environment variable / a file
  instead of writing it in the config; ``includeTables``/``excludeTables`` may be lists;
* ``[delta]``: ``path`` (one Delta table per source table under it, ``<path>/<db>/<table>``)
  and ``app_id`` (names the stream in the tables' transaction logs: one per checkpoint);
* ``[stream]``: ``checkpoint`` (required), ``trigger`` (``"10 seconds"``, or ``"availableNow"``
  to drain what is there and stop), ``query_name``;
* ``[metrics]``: ``port`` of a Prometheus ``/metrics`` endpoint (optional; 0: any free port);
* ``[spark]``: ``master`` and any ``spark.*`` settings for the session (when the job starts
  it; an already running session is used as it is).

The whole file is checked before Spark starts, ``[source]`` by the source's own option parser: a
mistake is one line naming the section and the key, exit status 2.

A job whose ``includeTables`` names one table exactly streams it in typed mode and starts its
query again when DDL changes the table's shape (:mod:`streaming.apps.job_typed`).

One line is printed per micro-batch that ran (batch id, rows, lag). SIGINT (Ctrl-C) or SIGTERM
stops the stream after its running micro-batch and prints the committed offset the next run
resumes from (exit status 0; a second signal exits at once). A failure of the stream is one line
on stderr: a binlog-cdc error (wrong password, unreachable server, purged binlog, a table
without primary key, ...) with exit status 2, anything else with 1 (``--traceback`` for all of
it). A stream that ends without an error, other than by a signal or at availableNow's end (it
was stopped from elsewhere, or Spark's query thread died of an error Spark did not catch), is a
failure too (exit status 1).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cdc.errors import CdcError, ConfigurationError, did_you_mean

SECTIONS = ("source", "delta", "stream", "metrics", "spark")
DELTA_KEYS = ("path", "app_id")
STREAM_KEYS = ("checkpoint", "trigger", "query_name")
METRICS_KEYS = ("port",)
PASSWORD_KEYS = ("password_env", "password_file")      # read by the job, not Spark options
TABLE_LISTS = ("includeTables", "excludeTables")        # a TOML list or "db.a,db.b"
BATCH_ONLY = ("path", "paths")                          # options of spark.read, not of a stream
_UNITS = r"(?:week|day|hour|minute|second|millisecond|microsecond)s?"
#: the example config, shipped in the package, and how a user gets it
EXAMPLE = Path(__file__).with_name("job.example.toml")
EXAMPLE_COMMAND = "python3 -m streaming.job --example > job.toml"
#: --help: what the job does, in plain words
DESCRIPTION = f"""\
Run a CDC pipeline from a TOML config: the binlog-cdc stream of a MySQL or MariaDB
server upserted into Delta tables. Start from the example config:

    {EXAMPLE_COMMAND}

The config's sections: [source] the options of the binlog-cdc source (docs/source.md;
password_env or password_file instead of a password), [delta] path and app_id,
[stream] checkpoint, trigger ("10 seconds" or "availableNow") and query_name, [metrics]
port (Prometheus), [spark] master and spark.* settings. The whole file is checked before
Spark starts.

One line is printed per micro-batch. Ctrl-C or SIGTERM stops after the running micro-batch
and prints the offset the next run resumes from (a second signal exits at once).
Exit status: 0 on success, 2 for a binlog-cdc error (a mistake in the config, a server
that refuses the user, a purged binlog, ...), 1 for any other failure."""
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
        (:class:`streaming.source.options.SourceOptions`); raises its :class:`ConfigurationError`."""
        from streaming.source.options import SourceOptions
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
        raise ConfigurationError(f"job config {where} does not exist (start from the example: "
                                 f"{EXAMPLE_COMMAND})") from None
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
    lower = {v.lower() for v in valid}
    for key in table:
        if str(key).lower() in lower:
            continue
        hint = did_you_mean(key, valid)
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
    from streaming.contract.envelope import UPSERT_FIELDS
    from streaming.source.options import OPTIONS
    for key in table:
        if key in BATCH_ONLY:
            raise ConfigurationError(f"[source] {key} is for batch reads of binlog files "
                                     f"(spark.read), not for the job's stream")
    _known_keys("source", table, [k for k in OPTIONS if k not in BATCH_ONLY] + list(PASSWORD_KEYS),
                also=" (docs/source.md: Options)")
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
    lower = {k.lower(): v for k, v in source.items()}
    # the upserter follows the source's DDL (docs/sinks.md: schema changes) unless told otherwise
    if "includeschemachanges" not in lower \
            and lower.get("schemahistory", "true").lower() != "false" \
            and lower.get("layout", "envelope").lower() != "flat":
        source["includeSchemaChanges"] = "true"
    # Spark does not prune a Python source's columns: deliver only what the upserter reads
    if "fields" not in lower and lower.get("layout", "envelope").lower() != "flat":
        source["fields"] = ",".join(UPSERT_FIELDS)
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


def checks(cfg: JobConfig) -> list:
    """The findings of ``binlog-cdc check`` (:mod:`cdc.check`) for the job's source: its
    tables and snapshot, into Delta tables that are upserted (a table without primary key, row
    images that are not FULL, a column the upserter refuses: FAIL). The start position is the source's to check (its errors
    name the Spark remedies)."""
    from cdc.check import run_checks
    from streaming.sinks.delta.check import sink_check
    opts = cfg.source_options()
    f = opts.table_filter()
    return run_checks(opts.replica_config(), include=f.include if f else (),
                      exclude=f.exclude if f else (), snapshot=opts.snapshot, upsert=True,
                      sink_check=sink_check, batch_rows=opts.snapshot_batch_rows())


def start(spark, cfg: JobConfig, upserter=None, typed: str | None = None):
    """Start the streaming query of *cfg* (foreachBatch into a DeltaUpserter); returns it.
    *typed*: the table it streams in typed mode (:func:`streaming.apps.job_typed.typed_table`)."""
    from streaming.apps.job_typed import with_typed_table
    from streaming.sinks.delta.upserter import DeltaUpserter
    if upserter is None:
        # the upserter reaches the server exactly as the stream does (TLS settings included)
        config = cfg.source_options().replica_config()
        upserter = DeltaUpserter(cfg.delta_path, config=config, app_id=cfg.app_id)
    reader = spark.readStream.format("binlog-cdc")
    for k, v in with_typed_table(cfg.source, typed).items():
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
    head = f"batch {p.get('batchId')}: {p.get('numInputRows', 0)} rows ({rate:,.0f} rows/s); "
    snap = lag.get("snapshot")
    if isinstance(snap, dict):           # an initial snapshot or a re-snapshot is read
        eta = snap.get("etaSeconds")
        return (head + f"snapshot: tables {snap.get('tablesDone')}/{snap.get('tables')}, "
                f"chunks {snap.get('chunksDone')}/{snap.get('chunks')}, rows "
                f"{snap.get('rowsDone')}/~{snap.get('rows')}, "
                f"{snap.get('rowsPerSecond')} rows/s, ETA "
                f"{'?' if eta is None else f'{eta:.0f}'} s")
    return (head + f"lag {lag.get('lagSeconds')} s, {lag.get('behindBytes')} bytes / "
            f"{lag.get('behindTransactions')} transactions behind")


def run(cfg: JobConfig, spark=None, out=None, stop=None) -> int:
    """Run the job until it ends (``availableNow``: the binlog drained), *stop* is set (a
    :class:`~streaming.apps.runtime.StopSignals` or a :class:`threading.Event`) or the query
    fails (its exception is raised; a query that ended otherwise without one raises
    :class:`~streaming.apps.runtime.QueryEndedError`). Prints one line per real micro-batch
    and, at the end, the committed offset the next run resumes from. Returns 0.

    Without *spark* the job starts its own session (``[spark]`` settings) and stops it at the
    end; the metrics listener and its HTTP server are removed in any case. *out* defaults to
    ``sys.stdout`` (at call time)."""
    from streaming.apps.job_typed import shape_changed, typed_table
    from streaming.apps.runtime import Batches, raise_if_failed, stop_between_batches
    from cdc.check import WARN, require
    out = out if out is not None else sys.stdout
    started = time.monotonic()
    for finding in require(checks(cfg)):       # before the session starts, and the snapshot
        if finding.status == WARN:
            print(f"warning: {finding.check}: {finding.message}", file=out, flush=True)
    owned = False
    if spark is None:
        spark, owned = _session(cfg)
        if hasattr(stop, "install"):
            stop.install()       # a new SparkContext has just put its own SIGINT handler in place
    listener = query = None
    batches = Batches()
    try:
        if _requested(stop):
            print("stopped before the stream started", file=out, flush=True)
            return 0
        if cfg.metrics_port is not None:
            from streaming.metrics import start_metrics
            listener = start_metrics(spark, port=cfg.metrics_port)
            print(f"Prometheus metrics on http://127.0.0.1:{listener.port}/metrics", file=out,
                  flush=True)
        config = cfg.source_options().replica_config()
        typed = typed_table(cfg.source, config)
        query = start(spark, cfg, typed=typed)
        print(f"streaming {cfg.source.get('host')} into {cfg.delta_path} (checkpoint "
              f"{cfg.checkpoint}, trigger {cfg.trigger}"
              + (f"; {typed} in typed mode" if typed else "") + ")", file=out, flush=True)
        done, restarted_at = False, None
        while not done and not _requested(stop):
            try:
                done = query.awaitTermination(1.0)     # raises the query's failure
            except Exception as e:  # noqa: BLE001 - re-raised unless typed mode's shape change
                changed = shape_changed(e) if typed else None
                if changed is None or str(changed) == restarted_at:
                    raise          # (the same statement again after a restart: not a new shape)
                restarted_at = str(changed)
                # typed mode stopped at DDL that changed the table: again from the checkpoint
                for p in batches.new(query):
                    print(progress_line(p), file=out, flush=True)
                typed = typed_table(cfg.source, config)
                print(f"the table's shape changed ({_first_sentence(changed)}): the "
                      f"stream starts again from its checkpoint with the new shape",
                      file=out, flush=True)
                query = start(spark, cfg, typed=typed)
            for p in batches.new(query):
                print(progress_line(p), file=out, flush=True)
        if not done:
            stop_between_batches(query)
            for p in batches.new(query):
                print(progress_line(p), file=out, flush=True)
        # a success ends with a stop of ours (a signal) or availableNow's end
        raise_if_failed(query, stop_asked=not done or cfg.available_now)
        print(_stopped_line(cfg, batches, time.monotonic() - started), file=out, flush=True)
        return 0
    finally:      # a failing clean-up must not hide the error being raised, if any
        if query is not None:
            _quietly(lambda: query.isActive and query.stop())
        if listener is not None:
            from streaming.metrics import stop_metrics
            _quietly(lambda: stop_metrics(spark, listener))
        if owned:
            _quietly(spark.stop)


def _first_sentence(error) -> str:
    text = str(error)
    return text.split(". ", 1)[0]


def _quietly(call) -> None:
    try:
        call()
    except Exception:  # noqa: BLE001 - see the caller
        logging.getLogger("streaming.job").debug("clean-up failed", exc_info=True)


def _requested(stop) -> bool:
    if stop is None:
        return False
    if hasattr(stop, "is_set"):
        return stop.is_set()
    return bool(stop)


def _stopped_line(cfg: JobConfig, batches, seconds: float) -> str:
    from streaming.apps.runtime import committed_offset, offset_text
    offset = committed_offset(cfg.checkpoint) or batches.offset
    ran = f"after {seconds:.1f} s, {len(batches.seen)} batches, {batches.rows} rows"
    if offset is None:
        return f"stopped before a batch was committed ({ran})"
    return (f"stopped at offset {offset_text(offset)} ({ran}); the next run resumes there from "
            f"the checkpoint {cfg.checkpoint}")


def session_settings(cfg: JobConfig) -> dict[str, str]:
    """The Spark settings of a session the job starts: no console progress bars (they would mix
    with the job's lines), a checkpoint on a local disk or HDFS written with the faster
    FileSystem checkpoint writer, then ``[spark]`` (which wins; ``master`` aside)."""
    from streaming.apps.local_spark import FILE_SYSTEM_CHECKPOINTS, renames_atomically
    settings = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false",
                # Spark's warnings (a batch falling behind, a batch interrupted by the stop)
                # would mix with the job's lines, which say as much
                "spark.log.level": "ERROR",
                # adaptive execution does not apply to streams (Spark warns it is disabled)
                "spark.sql.adaptive.enabled": "false"}
    if renames_atomically(cfg.checkpoint):
        settings.setdefault(*FILE_SYSTEM_CHECKPOINTS)    # ~60 ms less per micro-batch
    settings.update((k, v) for k, v in cfg.spark.items() if k != "master")
    return settings


def _session(cfg: JobConfig):
    """``(session, started here)``: the active session, or a new one with
    :func:`session_settings` (Spark's error log of a failed query off: the job reports the
    error itself)."""
    from pyspark.sql import SparkSession
    from streaming.apps.runtime import quiet_query_errors
    from streaming.apps.local_spark import worker_python
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    master = cfg.spark.get("master", "local[2]")
    # a local session's workers start faster through the launcher; executors elsewhere run
    # the interpreter of the same path as this one
    if "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = worker_python() if master.startswith("local") \
            else sys.executable
    b = SparkSession.builder.appName(cfg.query_name or "binlog-cdc-job").master(master)
    settings = session_settings(cfg)
    if master.startswith("local") and "spark.driver.extraJavaOptions" not in settings:
        from streaming.apps.local_spark import quiet_start
        settings.update(quiet_start())
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    quiet_query_errors(spark)
    return spark, True


def build_parser() -> argparse.ArgumentParser:
    from cdc.cli.entry import add_entry_arguments
    ap = argparse.ArgumentParser(prog="python3 -m streaming.job", description=DESCRIPTION,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", help="the job's TOML file")
    ap.add_argument("--example", action="store_true",
                    help="print the example config (commented) and exit")
    ap.add_argument("--available-now", action="store_true",
                    help="drain what the binlog holds now, then stop (overrides [stream] trigger)")
    ap.add_argument("--traceback", action="store_true",
                    help="on a failure that is not a binlog-cdc error, show the whole traceback")
    ap.add_argument("--check", action="store_true",
                    help="check the source and the config (binlog-cdc check: one line per "
                         "check), then exit: 2 when a check FAILs, else 0")
    add_entry_arguments(ap, "binlog-cdc job")
    return ap


def main(argv=None) -> int:
    from cdc.cli.entry import configure_logging
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.example:
        sys.stdout.write(EXAMPLE.read_text())
        return 0
    if args.config is None:
        ap.error(f"give the job's config file (start from the example: {EXAMPLE_COMMAND})")
    configure_logging(args)
    from streaming.apps.runtime import StopSignals, cdc_error, report_failure
    if args.check:
        return _check_only(args.config)
    with StopSignals("binlog-cdc job") as stop:
        try:
            cfg = load_config(args.config)
            if args.available_now:
                cfg.trigger = "availableNow"
            return run(cfg, stop=stop)
        except KeyboardInterrupt:     # only while PySpark's SIGINT handler was in place
            print("binlog-cdc job: interrupted", file=sys.stderr)
            return 130
        except Exception as e:  # noqa: BLE001 - reported in one line, exit status 1 or 2
            if args.traceback and cdc_error(e) is None:
                raise
            return report_failure(e, "binlog-cdc job", "the stream failed")


def _check_only(path: str) -> int:
    from cdc.check import exit_status, render
    try:
        findings = checks(load_config(path))
    except CdcError as e:
        print(f"binlog-cdc job: error: {e}", file=sys.stderr)
        return 2
    for line in render(findings):
        print(line, flush=True)
    return exit_status(findings)


if __name__ == "__main__":
    sys.exit(main())
