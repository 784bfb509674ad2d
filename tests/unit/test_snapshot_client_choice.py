"""Which client library reads snapshot chunks (cdc.snapshot.reader.snapshot_client)."""

from __future__ import annotations

import pytest

from cdc.errors import ConfigurationError
from cdc.replica.config import ReplicaConfig, SslOptions
from cdc.snapshot import reader


def _config(ssl=None):
    return ReplicaConfig("127.0.0.1", 3306, "u", "p", ssl=ssl)


def test_mysqlclient_when_importable_and_no_tls_else_pymysql(monkeypatch):
    monkeypatch.delenv(reader.CLIENT_ENV, raising=False)
    monkeypatch.setattr(reader, "_mysqlclient", lambda: object())
    assert reader.snapshot_client(_config()) == "mysqlclient"
    assert reader.snapshot_client(_config(ssl=False)) == "mysqlclient"
    assert reader.snapshot_client(_config(ssl=SslOptions(ca="/ca.pem"))) == "pymysql"
    monkeypatch.setenv(reader.CLIENT_ENV, "pymysql")
    assert reader.snapshot_client(_config()) == "pymysql"
    monkeypatch.setattr(reader, "_mysqlclient", lambda: None)
    monkeypatch.delenv(reader.CLIENT_ENV)
    assert reader.snapshot_client(_config()) == "pymysql"


def test_a_client_asked_for_must_exist(monkeypatch):
    monkeypatch.setattr(reader, "_mysqlclient", lambda: None)
    with pytest.raises(ConfigurationError, match="mysqlclient is not installed"):
        reader.snapshot_client(_config(), "mysqlclient")
    with pytest.raises(ConfigurationError, match="must be one of mysqlclient, pymysql"):
        reader.snapshot_client(_config(), "jdbc")
