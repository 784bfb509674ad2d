"""streaming.apps.job's config file: what it accepts and what it says about mistakes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from cdc.errors import ConfigurationError  # noqa: E402
from streaming.apps.job import load_config  # noqa: E402

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
                          "startingPosition": json.dumps({"file": "mysql-bin.000003", "pos": 4})}
    assert (cfg.delta_path, cfg.app_id, cfg.checkpoint) == ("/tmp/d", "a1", "/tmp/c")
    assert cfg.trigger == "10 seconds" and not cfg.available_now
    assert cfg.metrics_port == 9108


def test_example_config_in_conf_loads(monkeypatch):
    from pathlib import Path
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", "pw")
    cfg = load_config(Path(__file__).resolve().parents[2] / "conf" / "job.example.toml")
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
    with pytest.raises(ConfigurationError, match="does not exist.*job.example.toml"):
        load_config(tmp_path / "nope.toml")
