"""The README's table of user-facing errors (section "User-facing errors"): each mistake gives its
message and exit code, with no traceback. CLI mistakes run the real ``binlog-cdc`` entry point
(no server: a closed loopback port where one is needed); Spark option mistakes go through the
option parser the source uses (a query with them fails with the same message, see
tests/live/test_spark_source.py::test_unknown_option_lists_valid_ones)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.processes import closed_port

from cdc.errors import ConfigurationError
from streaming.source.options import SourceOptions


def _cli(*args: str, tmp_path=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cdc", *args], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)


@pytest.fixture(scope="module")
def junk(tmp_path_factory):
    p = tmp_path_factory.mktemp("junk") / "notabinlog.000001"
    p.write_bytes(b"\xfebin" + b"x")
    return str(p)


CLI_CASES = [
    # (id, argv (JUNK: a file that is not a binlog, PORT: a closed port), message fragment)
    ("missing-file", ["decode", "/nonexistent/mysql-bin.000001"],
     "no binlog file at /nonexistent/mysql-bin.000001: give a file, a directory of binlogs"),
    ("not-a-binlog", ["decode", "JUNK"], "input ends inside an event"),
    ("unknown-charset", ["decode", "--charset", "klingon", "JUNK"],
     "unknown character set 'klingon': give a MySQL character set name"),
    ("bad-start-position", ["decode", "--start-position", "abc", "JUNK"],
     "argument --start-position: invalid int value: 'abc'"),
    ("unknown-command", ["nosuchcmd"], "invalid choice: 'nosuchcmd'"),
    ("tail-without-host", ["tail", "--port", "3306"],
     "the following arguments are required: --host"),
    ("tail-closed-port", ["tail", "--host", "127.0.0.1", "--port", "PORT", "--user", "cdc",
                          "--password", "x", "--connect-timeout", "1"],
     "cannot connect to 127.0.0.1:PORT"),
    ("lag-closed-port", ["lag", "--host", "127.0.0.1", "--port", "PORT", "--user", "cdc",
                         "--password", "x", "--connect-timeout", "1", "--duration", "2"],
     "cannot connect to 127.0.0.1:PORT"),
    ("ssl-mode-typo", ["tail", "--host", "127.0.0.1", "--ssl-mode", "verify-full"],
     "argument --ssl-mode: invalid choice: 'verify-full'"),
    ("ssl-mode-and-ssl", ["tail", "--host", "127.0.0.1", "--port", "PORT", "--ssl-mode",
                          "verify_ca", "--ssl"], "--ssl-mode replaces --ssl"),
    ("password-file-missing", ["tail", "--host", "127.0.0.1", "--port", "PORT",
                               "--password-file", "/nonexistent/pw"], "/nonexistent/pw"),
    ("tail-file-without-pos", ["tail", "--host", "127.0.0.1", "--port", "PORT", "--pos", "4"],
     "--pos"),
    ("tail-xa-without-position", ["tail", "--host", "127.0.0.1", "--port", "PORT", "--xa",
                                  "mysql-bin.000002:1811"],
     "prepared XA transactions to hold (--xa) need a start at a position (--file/--pos or "
     "--gtid), not latest"),
    ("tail-xa-typo", ["tail", "--host", "127.0.0.1", "--port", "PORT", "--file",
                      "mysql-bin.000002", "--xa", "mysql-bin.000002"],
     "--xa 'mysql-bin.000002': expected FILE:POS"),
    ("tail-on-unparsed-ddl-typo", ["tail", "--host", "127.0.0.1", "--on-unparsed-ddl", "ignore"],
     "argument --on-unparsed-ddl: invalid choice: 'ignore' (choose from 'fail', 'skip', "
     "'reseed')"),
]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_mistakes_exit_2_with_the_message_and_no_traceback(case, junk):
    _id, argv, fragment = case
    port = str(closed_port())
    argv = [junk if a == "JUNK" else a.replace("PORT", port) for a in argv]
    res = _cli(*argv)
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert fragment.replace("PORT", port) in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout


OPTION_CASES = [
    ({"hots": "x"}, "unknown option 'hots' for the binlog-cdc source (did you mean host?); "
                      "valid options are: host"),
    ({"port": "abc"}, "option port must be an integer, not 'abc'"),
    ({"port": "70000"}, "option port must be from 1 to 65535, not 70000"),
    ({"startingPosition": "yesterday"}, "startingPosition 'yesterday' is not understood: use "
                                        "earliest, latest, 'file:pos'"),
    ({"startingPosition": "yesterday"}, "; or snapshot (read the tables first)"),
    ({"table": "orders"}, "option table must name one table as db.table, not 'orders'"),
    ({"table": "a.b", "includeTables": "a.*"}, "options table and includeTables exclude each other"),
    ({"maxEventsPerTrigger": "0"}, "option maxEventsPerTrigger must be >= 1, not 0"),
    ({"failOnDataLoss": "maybe"}, "option failOnDataLoss must be true or false, not 'maybe'"),
    ({"sslMode": "verify-full"}, "sslMode must be one of disabled, preferred, required, "
                                 "verify_ca, verify_identity, not 'verify-full'"),
    ({"sslMode": "required", "sslVerify": "true"}, "options sslMode and sslVerify exclude"),
    ({"snapshotKeys": "id"}, "option snapshotKeys must be a JSON object of db.table -> list"),
    ({"snapshotChunkRows": "-5"}, "option snapshotChunkRows must be >= 1, not -5"),
    ({"signalTable": "signals"}, "option signalTable must name one table as db.table"),
    ({"passwordFile": "/nonexistent/pw"}, "/nonexistent/pw"),
    ({"rowDecoder": "fast"}, "option rowDecoder must be c, python or auto, not 'fast'"),
    ({"endingPosition": "earliest"}, "option endingPosition must be latest, a file/pos or a "
                                     "GTID set, not earliest"),
    ({"fs.s3": "x"}, "option 'fs.s3': filesystem settings are spelled fs.<scheme>.<name>"),
    ({"includeSchemaChanges": "sometimes"}, "option includeSchemaChanges must be true or false, "
                                            "not 'sometimes'"),
    ({"onUnparsedDdl": "ignore"}, "option onUnparsedDdl must be fail, skip or reseed, not "
                                  "'ignore'"),
    ({"schemaHistory": "nope"}, "option schemaHistory must be true or false, not 'nope'"),
    ({"includeSchemaChanges": "true", "schemaHistory": "false"},
     "option includeSchemaChanges=true needs the schema history: remove schemaHistory=false"),
    ({"includeSchemaChanges": "true", "table": "a.b", "layout": "flat"},
     "option includeSchemaChanges=true needs layout=envelope"),
    ({"includeSchemaChanges": "true", "path": "/tmp/x.000001"},
     "option includeSchemaChanges=true needs host: binlog files read with path have no schema "
     "history"),
]


@pytest.mark.parametrize("options, fragment", OPTION_CASES,
                         ids=[next(iter(o)) + "-" + str(i) for i, (o, _f) in
                              enumerate(OPTION_CASES)])
def test_spark_option_mistakes_are_configuration_errors(options, fragment):
    with pytest.raises(ConfigurationError) as e:
        SourceOptions.parse({"host": "127.0.0.1", "user": "cdc", **options}, streaming=True)
    assert fragment in str(e.value)


def test_a_stream_without_host_or_user():
    with pytest.raises(ConfigurationError) as e:
        SourceOptions.parse({"user": "cdc"}, streaming=True)
    assert "needs option host" in str(e.value)
    with pytest.raises(ConfigurationError) as e:
        SourceOptions.parse({"host": "h"}, streaming=True)
    assert "needs option user" in str(e.value)
