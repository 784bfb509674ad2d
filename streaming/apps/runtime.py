"""What the job and the demo share around a running streaming query.

* :func:`cdc_error`: the binlog-cdc error behind an exception, also when Spark wrapped it
  (``StreamingQueryException``, ``AnalysisException``, ...: their text carries the Python
  traceback of the source or of ``foreachBatch``, ending in ``cdc.errors.<Name>: <message>``);
* :func:`failure_summary`: one line for any other failure of a query;
* :class:`Batches`: the real micro-batches of a run, each once (Spark's idle progress events
  carry the id of the *next* batch and no data; they are not batches);
* :func:`offset_text` and :func:`committed_offset`: where a stopped stream resumes;
* :class:`StopSignals`: SIGINT and SIGTERM ask for a graceful stop instead of killing the
  process mid-batch (a second one exits at once); :func:`stop_between_batches` does it;
* :func:`raise_if_failed`: a query that has ended is a success only when it stopped as Spark
  stops a query and it was asked to (its exception, or a :class:`QueryEndedError`, else);
* :func:`quiet_query_errors`: Spark's own log of a failed query (the same error as a Java
  stack trace) switched off, for a session the application started and reports errors of.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time

import cdc.errors
from cdc.checkpoint import committed_offset
from cdc.errors import CdcError

__all__ = ["cdc_error", "failure_summary", "report_failure", "Batches", "batch_offsets",
           "is_real_batch", "offset_text",
           "committed_offset", "StopSignals", "stop_between_batches", "QueryEndedError",
           "raise_if_failed", "quiet_query_errors"]

#: how a binlog-cdc error ends a Python traceback that Spark quotes in its own message
_CDC_LINE = re.compile(r"\bcdc\.errors\.([A-Za-z_]\w*): (.*)")
#: the last line of any Python traceback (``KeyError: 'x'``, ``pkg.mod.SomeError: ...``)
_ERROR_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit)): (.*)$",
                         re.M)
_SQLSTATE = re.compile(r"\s+SQLSTATE: \w+$")


def cdc_error(exc: BaseException | None) -> CdcError | None:
    """The :class:`~cdc.errors.CdcError` that *exc* is or wraps, else None. A Spark exception
    (it crossed the JVM as text) gives a new instance of the same class with the message."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, CdcError):
            return exc
        found = _cdc_error_in(_text(exc))
        if found is not None:
            return found
        exc = exc.__cause__ or exc.__context__
    return None


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the error being reported
        return repr(exc)


def _cdc_error_in(text: str) -> CdcError | None:
    matches = _CDC_LINE.findall(text)
    if not matches:
        return None
    name, message = matches[-1]           # the outermost one: Python prints causes first
    message = _SQLSTATE.sub("", message.rstrip())
    cls = getattr(cdc.errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, CdcError)):
        cls = CdcError
    err = cls.__new__(cls)
    Exception.__init__(err, message)      # subclasses' __init__ take other arguments
    return err


def failure_summary(exc: BaseException) -> str:
    """One line for a failure that is not a binlog-cdc error: the last Python error line that
    Spark's message quotes (the error raised in the source or in ``foreachBatch``), else the
    first line of the message."""
    text = _text(exc).split("\nJVM stacktrace:", 1)[0]
    lines = [(n, m) for n, m in _ERROR_LINE.findall(text)
             if not n.startswith(("py4j.", "pyspark.errors", "org.", "java.", "scala."))]
    if lines:
        name, message = lines[-1]
        return f"{name}: {_SQLSTATE.sub('', message.rstrip())}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


# --- progress ----------------------------------------------------------------------------------


def report_failure(exc: BaseException, prog: str, what: str = "failed") -> int:
    """One line on stderr for a failure of the job or the demo, and its exit status: 2 with the
    binlog-cdc error's message (a user's mistake), else 1 with the Python error Spark quotes
    (the caller re-raises instead when the user asked for the traceback)."""
    err = cdc_error(exc)
    if err is not None:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    print(f"{prog}: {what}: {failure_summary(exc)} (--traceback shows the whole error)",
          file=sys.stderr)
    return 1


def _offset(value) -> dict | None:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        return None
    try:
        d = json.loads(value)
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


def batch_offsets(progress: dict) -> tuple[dict | None, dict | None]:
    """(start, end) offsets of the binlog-cdc source in a progress event (None: not there;
    the start of a query's first batch is None)."""
    for s in progress.get("sources") or []:
        start, end = _offset(s.get("startOffset")), _offset(s.get("endOffset"))
        if end is not None and "file" in end:
            return start, end
    return None, None


def is_real_batch(progress: dict) -> bool:
    """True for a micro-batch that ran: it read rows, or it moved a source's offset (a batch of
    filtered-out transactions, the first batch). An idle progress event (no new data: Spark
    reports one now and then, with the id the next batch will have) is not one."""
    if (progress.get("numInputRows") or 0) > 0:
        return True
    return any(_offset(s.get("startOffset")) != _offset(s.get("endOffset"))
               for s in progress.get("sources") or [])


class Batches:
    """The real batches of the queries of one run, each reported once, oldest first.

    ``new(query)`` returns the progress dicts of the batches not reported yet (call it every
    second or so: Spark keeps the last 100 progress events). It works across queries that share
    a checkpoint (batch ids continue there). ``rows`` is the running total of their input rows;
    ``offset`` the end offset of the latest progress, batch or idle event (for idle events
    that is the committed offset)."""

    def __init__(self):
        self.seen: set[int] = set()
        self.rows = 0
        self.offset: dict | None = None

    def new(self, query) -> list[dict]:
        out = []
        for p in query.recentProgress:
            for s in p.get("sources") or []:
                end = _offset(s.get("endOffset"))
                if end is not None:
                    self.offset = end
            bid = p.get("batchId")
            if bid is None or bid in self.seen or not is_real_batch(p):
                continue
            self.seen.add(bid)
            self.rows += p.get("numInputRows") or 0
            out.append(p)
        return out


def offset_text(offset: dict | None) -> str:
    """``mysql-bin.000003:12345 (GTID 0-1-42)`` for an offset of the binlog-cdc source."""
    if not offset:
        return "?"
    if "file" in offset and "pos" in offset:
        text = f"{offset['file']}:{offset['pos']}"
        return f"{text} (GTID {offset['gtid']})" if offset.get("gtid") else text
    return json.dumps(offset)


# --- stopping ----------------------------------------------------------------------------------


class StopSignals:
    """SIGINT (Ctrl-C) and SIGTERM set :attr:`requested` instead of interrupting the program;
    a second signal exits at once (status 128 + signal). ``install()`` again after creating a
    SparkContext: PySpark installs its own SIGINT handler (which raises KeyboardInterrupt).
    Handlers can only be installed in the main thread; elsewhere this does nothing."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, prog: str = "binlog-cdc", err=None):
        self.requested = threading.Event()
        self.name: str | None = None
        self.prog = prog
        self.err = err
        self._old: dict = {}

    def install(self) -> "StopSignals":
        if threading.current_thread() is not threading.main_thread():
            return self
        for s in self.SIGNALS:
            old = signal.signal(s, self._handle)
            self._old.setdefault(s, old)
        return self

    def restore(self) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old.clear()

    def __enter__(self) -> "StopSignals":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.restore()

    def __bool__(self) -> bool:
        return self.requested.is_set()

    def _handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        err = self.err or sys.stderr
        if self.requested.is_set():
            print(f"{self.prog}: {name} again: exiting at once (the stream resumes from its "
                  f"checkpoint)", file=err, flush=True)
            os._exit(128 + signum)
        self.name = name
        self.requested.set()
        print(f"{self.prog}: {name}: stopping after the running micro-batch (again to exit at "
              f"once) ...", file=err, flush=True)


def stop_between_batches(query, wait: float = 30.0) -> None:
    """Stop *query* once its running micro-batch has ended (waiting *wait* seconds at most: a
    batch interrupted by the stop runs again on the next start, which is safe but wasted work).
    A query behind the binlog runs its batches back to back: the end of the running one is
    seen as a new progress event."""
    def last():
        p = query.lastProgress
        return (p or {}).get("timestamp"), (p or {}).get("batchId")

    before = last()
    deadline = time.monotonic() + wait
    while query.isActive and query.status.get("isTriggerActive") and last() == before \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


#: the status message of a query whose thread ended through Spark's own ending: stopped (by
#: ``stop()``, or an availableNow trigger that drained its sources). A failed query's is
#: "Terminated with exception: ..."; a thread killed by an error Spark did not catch keeps the
#: message of what it was doing ("Processing new data", ...).
STOPPED = "Stopped"


class QueryEndedError(Exception):
    """A streaming query ended without an exception, yet not as it should have."""


def raise_if_failed(query, stop_asked: bool) -> None:
    """Raise the failure of *query*, which has ended: its exception; else a
    :class:`QueryEndedError` when its thread did not end through Spark's stop (an error Spark
    did not catch ended it: Spark's log on stderr has it) or when it was not asked to end
    (*stop_asked*: this program stopped it, or its trigger was availableNow)."""
    exc = query.exception()
    if exc is not None:
        raise exc
    message = (query.status or {}).get("message")
    if message != STOPPED:
        raise QueryEndedError(f"the stream's query ended without an error Spark reported, in the "
                              f"middle of its work (status {message!r}); the error is in "
                              f"Spark's log on stderr")
    if not stop_asked:
        raise QueryEndedError("the stream's query was stopped, but not by this program (no "
                              "error reported)")


def quiet_query_errors(spark) -> None:
    """Switch off Spark's ERROR log of a failed streaming query (a Java stack trace with the
    Python one quoted in it), for an application that reports the failure itself."""
    try:
        jvm = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.OFF
        for name in ("org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
                     "org.apache.spark.sql.execution.streaming.MicroBatchExecution"):
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception:  # noqa: BLE001 - another logging backend: the log stays, nothing breaks
        pass
