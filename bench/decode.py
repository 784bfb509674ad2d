"""Decoders measured side by side on the same binlog files / stream.

Every measurement runs in a fresh child process (``python -m bench.decode METHOD ...``) so
that its peak RSS is its own; the child prints one JSON line: rows, seconds, peak RSS.

Methods
-------
tuples      binlog-cdc: files -> transactions -> decoded row tuples (``ev.decode_rows()``), with
            the compiled row decoder when it is built (cdc.rows._rowdecode)
tuples_py   the same, pure Python (BINLOG_CDC_DECODER=python)
arrow       binlog-cdc: files -> Arrow RecordBatches of the Spark source's schema
            (``streaming.source.batches.BatchBuilder``, JSON images: the default mode), 8192 rows each
arrow_typed the same with typed images (``option table``: struct of the table's Spark types)
delta       ``arrow`` batches streamed into a new Delta table (``deltalake.write_deltalake``)
pmr         python-mysql-replication 1.0.17 from the live server (it cannot read files)
mariadb     ``mariadb-binlog -v --base64-output=decode-rows`` on the files (C)
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time


def m_tuples(files, **_):
    from cdc.binlog.files import read_events
    from cdc.binlog.transactions import assemble
    n = 0
    for tx in assemble(read_events(files)):
        for ev in tx.rows_events:
            n += len(ev.decode_rows())   # not ev.rows: that keeps them on the event
    return n


def _batches(files, typed: bool):
    from cdc.binlog.events import RowsEvent
    from cdc.binlog.files import read_events
    from cdc.binlog.transactions import assemble
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import JSON_SCHEMA, typed_schema
    if typed:
        cols = next(ev.table.columns for ev in read_events(files)
                    if isinstance(ev, RowsEvent) and ev.table is not None)
        builder = BatchBuilder(typed_schema(cols), cols)
    else:
        builder = BatchBuilder(JSON_SCHEMA)
    return builder, record_batches(assemble(read_events(files)), builder, rows_per_batch=8192)


def m_arrow(files, typed=False, **_):
    _, batches = _batches(files, typed)
    return sum(b.num_rows for b in batches)


def m_arrow_typed(files, **_):
    return m_arrow(files, typed=True)


def m_delta(files, out, **_):
    import pyarrow as pa
    from deltalake import write_deltalake
    builder, batches = _batches(files, False)
    count = [0]

    def counted():
        for b in batches:
            count[0] += b.num_rows
            yield b
    write_deltalake(out, pa.RecordBatchReader.from_batches(builder.arrow_schema, counted()),
                    mode="overwrite")
    return count[0]


def m_pmr(files, conn=None, start_file=None, **_):
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
    stream = BinLogStreamReader(connection_settings=conn, server_id=9999, blocking=False,
                                resume_stream=True, log_file=start_file, log_pos=4,
                                only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    n = 0
    for ev in stream:
        n += len(ev.rows)
    stream.close()
    return n


def m_mariadb(files, **_):
    out = subprocess.run(["mariadb-binlog", "--no-defaults", "-v", "--base64-output=decode-rows",
                          *map(str, files)], capture_output=True, check=True).stdout
    return out.count(b"\n### INSERT") + out.count(b"\n### UPDATE") + out.count(b"\n### DELETE")


def m_tuples_py(files, **_):
    """``tuples`` with the compiled row decoder switched off (BINLOG_CDC_DECODER=python)."""
    return m_tuples(files)


METHODS = {"tuples": m_tuples, "tuples_py": m_tuples_py, "arrow": m_arrow, "arrow_typed": m_arrow_typed, "delta": m_delta,
           "pmr": m_pmr, "mariadb": m_mariadb}


def measure(method: str, files, **kw) -> dict:
    """Run *method* in a child process: {"rows", "seconds" (wall), "cpu_seconds" (user + system
    of the decoding process, so shared-machine contention does not count), "rss_mib"}."""
    arg = json.dumps({"method": method, "files": [str(f) for f in files], "kw": kw})
    env = dict(os.environ, **METHOD_ENV.get(method, {}))
    out = subprocess.run([sys.executable, "-m", "bench.decode", arg], capture_output=True,
                         text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"{method} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


METHOD_ENV = {"tuples_py": {"BINLOG_CDC_DECODER": "python"}}

_IMPORTS = {"tuples": ["cdc.binlog.files", "cdc.binlog.transactions", "cdc.binlog.gtid", "cdc.rows.compile"],
            "arrow": ["cdc.binlog.files", "cdc.binlog.transactions", "cdc.binlog.gtid", "cdc.rows.compile", "streaming.source.batches",
                      "pyarrow"],
            "pmr": ["pymysqlreplication", "pymysqlreplication.row_event"]}
_IMPORTS["tuples_py"] = _IMPORTS["tuples"]
_IMPORTS["arrow_typed"] = _IMPORTS["arrow"]
_IMPORTS["delta"] = _IMPORTS["arrow"] + ["deltalake"]


def _hwm_kib() -> int:
    """Peak RSS of this process image (VmHWM). Not ru_maxrss: Linux carries that over from the
    parent across fork/exec, so a child of a big parent would report the parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _child(arg: str) -> None:
    import importlib
    spec = json.loads(arg)
    fn = METHODS[spec["method"]]
    for mod in _IMPORTS.get(spec["method"], []):   # imports are not part of the timing
        importlib.import_module(mod)
    cpu0 = _cpu()
    t = time.perf_counter()
    n = fn(spec["files"], **spec["kw"])
    dt = time.perf_counter() - t
    cpu = _cpu() - cpu0
    rss = max(_hwm_kib(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    print(json.dumps({"rows": n, "seconds": dt, "cpu_seconds": cpu, "rss_mib": rss}))


if __name__ == "__main__":
    _child(sys.argv[1])
