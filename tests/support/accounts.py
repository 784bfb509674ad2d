"""Accounts without some privilege, for tests of what binlog-cdc says then: import the
``account`` fixture into a test module (the module's ``server`` is the server)."""

from __future__ import annotations

import pytest


@pytest.fixture
def account(server):
    """``make(name, privileges)``: an account with only *privileges* (``*.*``) and password
    ``pw-<name>``, dropped after the test."""
    made = []

    def make(name: str, privileges: str) -> str:
        server.execute(f"DROP USER IF EXISTS '{name}'@'%'")
        server.execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY 'pw-{name}'")
        server.execute(f"GRANT {privileges} ON *.* TO '{name}'@'%'")
        made.append(name)
        return name

    yield make
    for name in made:
        server.execute(f"DROP USER IF EXISTS '{name}'@'%'")


def monitor_privilege(server) -> str:
    """The privilege the binlog's end needs, in the server's words."""
    return "BINLOG MONITOR" if server.FLAVOR == "mariadb" else "REPLICATION CLIENT"
