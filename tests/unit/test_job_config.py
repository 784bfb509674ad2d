"""streaming.apps.job's config file: what it accepts and what it says about mistakes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from cdc.errors import ConfigurationError  # noqa: E402
from streaming.apps.job import load_config  # noqa: E402
from streaming.contract.envelope import UPSERT_FIELDS  # noqa: E402

GOOD = """
[source]
host = "db1"
port = 3307
user = "cdc"
password_file = "{secret}"
includeTables = "shop.*"
startingPosition = {{file = "mysql-bin.000003", pos = 4}}
failOnDataLoss = false

[delta]
path = "/tmp/d"
app_id = "a1"

[stream]
checkpoint = "/tmp/c"

[metrics]
port = 9108
"""


def _write(tmp_path, text, name="job.toml"):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_good_config(tmp_path):
    secret = _write(tmp_path, "s3cret\n", "pw")
    cfg = load_config(_write(tmp_path, GOOD.format(secret=secret)))
    assert cfg.source == {"host": "db1", "port": "3307", "user": "cdc", "password": "s3cret",
                          "includeTables": "shop.*", "failOnDataLoss": "false",
                          "startingPosition": json.dumps({"file": "mysql-bin.000003", "pos": 4}),
                          "includeSchemaChanges": "true", "fields": ",".join(UPSERT_FIELDS)}
    assert (cfg.delta_path, cfg.app_id, cfg.checkpoint) == ("/tmp/d", "a1", "/tmp/c")
    assert cfg.trigger == "10 seconds" and not cfg.available_now
    assert cfg.metrics_port == 9108


def test_example_config_in_conf_loads(monkeypatch):
    from pathlib import Path
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", "pw")
    cfg = load_config(Path(__file__).resolve().parents[2] / "streaming" / "apps" / "job.example.toml")
    assert cfg.source["password"] == "pw" and cfg.source["includeTables"] == "shop.*"
    assert cfg.metrics_port == 9108 and cfg.spark["master"] == "local[2]"


@pytest.mark.parametrize("text, message", [
    ("[source]\nhost = 'x'\n[delta]\napp_id = 'a'\n[stream]\ncheckpoint = 'c'\n",
     r"\[delta\] path is required"),
    ("[source]\nhost = 'x'\n[delta]\npath = 'p'\napp_id = 'a'\n", r"\[stream\] checkpoint"),
    ("[delta]\npath = 'p'\napp_id = 'a'\n[stream]\ncheckpoint = 'c'\n", r"\[source\] host"),
    ("[sourc]\nhost = 'x'\n", r"unknown section\(s\) \['sourc'\]"),
    ("[source\nhost = 'x'\n", "not valid TOML"),
    ("[source]\nhost = 'x'\npassword_env = 'NO_SUCH_VAR_FOR_TEST'\n",
     "NO_SUCH_VAR_FOR_TEST, which is not set"),
])
def test_mistakes_are_named(tmp_path, monkeypatch, text, message):
    monkeypatch.delenv("NO_SUCH_VAR_FOR_TEST", raising=False)
    with pytest.raises(ConfigurationError, match=message):
        load_config(_write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist.*streaming.job --example"):
        load_config(tmp_path / "nope.toml")


# --- every section is checked before Spark starts (issue: a bad [source] was a Spark traceback) ---

VALID = {
    "source": {"host": "'db1'", "user": "'cdc'", "password": "'pw'", "port": "3307"},
    "delta": {"path": "'/tmp/d'", "app_id": "'a1'"},
    "stream": {"checkpoint": "'/tmp/c'", "trigger": "'5 seconds'"},
    "metrics": {"port": "9108"},
    "spark": {"master": "'local[2]'", '"spark.sql.shuffle.partitions"': "'2'"},
}


def _config(tmp_path, section=None, key=None, value=None):
    """VALID with ``[section] key = value`` set (value None: the key removed)."""
    sections = {s: dict(kv) for s, kv in VALID.items()}
    if section is not None:
        sections.setdefault(section, {})
        if value is None:
            sections[section].pop(key, None)
        else:
            sections[section][key] = value
    text = "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) + "\n"
                   for s, kv in sections.items())
    return _write(tmp_path, text)


def test_the_valid_base_config_loads(tmp_path):
    cfg = load_config(_config(tmp_path))
    assert cfg.source == {"host": "db1", "user": "cdc", "password": "pw", "port": "3307",
                          "includeSchemaChanges": "true", "fields": ",".join(UPSERT_FIELDS)}
    assert cfg.trigger == "5 seconds" and cfg.metrics_port == 9108
    assert cfg.spark == {"master": "local[2]", "spark.sql.shuffle.partitions": "2"}


@pytest.mark.parametrize("section, key, value, message", [
    # [source]: the very parser of the Spark source (streaming.source.options.SourceOptions)
    ("source", "maxEventsPerTriger", "5",
     r"\[source\] unknown key 'maxEventsPerTriger' \(did you mean maxEventsPerTrigger\?\)"),
    ("source", "port", "'abc'", r"\[source\] option port must be an integer, not 'abc'"),
    ("source", "port", "0", r"\[source\] option port must be from 1 to 65535, not 0"),
    ("source", "sslMode", "'bogus'", r"\[source\] sslMode must be one of disabled, preferred"),
    ("source", "startingPosition", "'garbage'",
     r"\[source\] startingPosition 'garbage' is not understood"),
    ("source", "startingPosition", "{ file = 3 }", r"\[source\] startingPosition .* is not"),
    ("source", "maxRetries", "-1", r"\[source\] option maxRetries must be >= 1, not -1"),
    ("source", "failOnDataLoss", "'maybe'", r"\[source\] option failOnDataLoss must be true"),
    ("source", "user", None, r"\[source\] .*needs option user"),
    ("source", "path", "'/var/lib/mysql'", r"\[source\] path is for batch reads"),
    ("source", "password_env", "'HOME'",
     r"\[source\] password, password_env and password_file exclude each other"),
    ("source", "includeTables", "3", r"\[source\] includeTables must be a string"),
    # the other sections
    ("delta", "pth", "'x'", r"\[delta\] unknown key 'pth' \(did you mean path\?\)"),
    ("delta", "app_id", "7", r"\[delta\] app_id must be a string, not 7"),
    ("stream", "trigger", "'10s'", r"\[stream\] trigger '10s' is not an interval"),
    ("stream", "trigger", "10", r"\[stream\] trigger must be a string"),
    ("stream", "trigger", "'1 month'", r"\[stream\] trigger '1 month' is not an interval"),
    ("stream", "checkpointLocation", "'c'", r"\[stream\] unknown key 'checkpointLocation'"),
    ("stream", "query_name", "''", r"\[stream\] query_name must not be empty"),
    ("metrics", "port", "'x'", r"\[metrics\] port must be an integer from 0 to 65535, not 'x'"),
    ("metrics", "port", "70000", r"\[metrics\] port must be an integer from 0 to 65535"),
    ("metrics", "prot", "1", r"\[metrics\] unknown key 'prot' \(did you mean port\?\)"),
    ("spark", "shuffle", "'2'", r"\[spark\] shuffle is not a Spark setting"),
])
def test_every_section_and_key_is_checked(tmp_path, section, key, value, message):
    with pytest.raises(ConfigurationError, match=r"job config .*job\.toml: " + message):
        load_config(_config(tmp_path, section, key, value))


def test_a_section_that_is_not_a_table(tmp_path):
    with pytest.raises(ConfigurationError, match=r"\[stream\] must be a table"):
        load_config(_write(tmp_path, "stream = 'x'\n[source]\nhost = 'h'\n"))


@pytest.mark.parametrize("trigger", ["10 seconds", "1 minute 30 seconds", "500 milliseconds",
                                     "interval 2 Seconds", "0 seconds", "1.5 seconds",
                                     "availableNow", "available_now"])
def test_triggers_spark_accepts(tmp_path, trigger):
    assert load_config(_config(tmp_path, "stream", "trigger", f"'{trigger}'")).trigger == trigger


def test_metrics_port_zero_means_any_free_port(tmp_path):
    assert load_config(_config(tmp_path, "metrics", "port", "0")).metrics_port == 0


def test_table_lists_become_the_comma_separated_option(tmp_path):
    cfg = load_config(_config(tmp_path, "source", "includeTables", "['shop.*', 'crm.users']"))
    assert cfg.source["includeTables"] == "shop.*,crm.users"


def _run_main(tmp_path, config) -> tuple[int, str, str, bool]:
    """``main([config])`` in a fresh interpreter: (exit status, stdout, stderr, whether pyspark
    was imported)."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    code = ("import sys\nfrom streaming.apps.job import main\nrc = main([sys.argv[1]])\n"
            "print('PYSPARK' if any(m.startswith('pyspark') for m in sys.modules) else 'NO', "
            "file=sys.stderr)\nsys.exit(rc)\n")
    run = subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True,
                         text=True, timeout=60, cwd=root, env={**__import__("os").environ,
                                                                "PYTHONPATH": str(root)})
    *lines, marker = run.stderr.splitlines()
    return run.returncode, run.stdout, "\n".join(lines), marker == "PYSPARK"


@pytest.mark.parametrize("section, key, value, message", [
    ("source", "port", "'abc'", "[source] option port must be an integer, not 'abc'"),
    ("source", "maxRetries", "-1", "[source] option maxRetries must be >= 1, not -1"),
    ("stream", "trigger", "'soon'", "[stream] trigger 'soon' is not an interval"),
])
def test_a_bad_config_exits_2_with_one_line_before_spark_starts(tmp_path, section, key, value,
                                                                message):
    rc, out, err, spark_imported = _run_main(tmp_path, _config(tmp_path, section, key, value))
    assert rc == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"binlog-cdc job: job config {tmp_path / 'job.toml'}: {message}"), err
    assert not spark_imported          # no JVM was started for a config that cannot run
    assert out == ""


def test_the_cli_on_a_bad_config_is_quick_and_quiet(tmp_path):
    import subprocess
    import sys
    import time
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    t = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "streaming.job",
                          str(_config(tmp_path, "source", "sslMode", "'bogus'"))],
                         capture_output=True, text=True, timeout=60, cwd=root,
                         env={**__import__("os").environ, "PYTHONPATH": str(root)})
    took = time.monotonic() - t
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and "[source] sslMode must be one of" in run.stderr
    assert took < 5, took     # ~0.3 s: no Spark session (which takes 10 s and more)


@pytest.mark.parametrize("extra, want", [
    ("", "true"),                                   # the upserter follows DDL by default
    ("includeSchemaChanges = false\n", "false"),     # the user's choice stands
    ("schemaHistory = false\n", None),               # no history: no schema-change records
    ("layout = \"flat\"\ntable = \"shop.t\"\n", None),   # the flat layout has no place for them
])
def test_the_job_turns_schema_changes_on_unless_told_otherwise(tmp_path, extra, want):
    text = _config(tmp_path).read_text().replace("[source]\n", "[source]\n" + extra, 1)
    cfg = load_config(_write(tmp_path, text, "job2.toml"))
    assert cfg.source.get("includeSchemaChanges") == want


@pytest.mark.parametrize("checkpoint, fast", [
    ("/tmp/c", True), ("file:///tmp/c", True), ("hdfs://nn/chk", True),
    ("s3a://bucket/chk", False), ("abfss://c@a.dfs.core.windows.net/chk", False)])
def test_local_and_hdfs_checkpoints_get_the_file_system_checkpoint_writer(tmp_path, checkpoint,
                                                                         fast):
    from streaming.apps.job import session_settings
    from streaming.apps.local_spark import FILE_SYSTEM_CHECKPOINTS
    secret = tmp_path / "pw"
    secret.write_text("x")
    text = GOOD.format(secret=secret).replace('checkpoint = "/tmp/c"',
                                              f'checkpoint = "{checkpoint}"')
    settings = session_settings(load_config(_write(tmp_path, text)))
    key, writer = FILE_SYSTEM_CHECKPOINTS
    assert (settings.get(key) == writer) is fast
    # [spark] names another writer: it wins
    text += f'\n[spark]\n"{key}" = "my.Writer"\n'
    assert session_settings(load_config(_write(tmp_path, text)))[key] == "my.Writer"


def test_the_job_delivers_only_the_upserters_columns_unless_told(tmp_path):
    secret = _write(tmp_path, "s3cret\n", "pw")
    text = GOOD.format(secret=secret)
    told = text.replace('includeTables = "shop.*"', 'includeTables = "shop.*"\nfields = "op,after"')
    assert load_config(_write(tmp_path, told)).source["fields"] == "op,after"
    flat = text.replace('includeTables = "shop.*"', 'table = "shop.orders"\nlayout = "flat"')
    assert "fields" not in load_config(_write(tmp_path, flat)).source
