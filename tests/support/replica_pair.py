"""A primary and a GTID replica on 127.0.0.1, for failover tests.

:func:`replica_pair` starts both (MariaDB: ``log_slave_updates`` and ``MASTER_USE_GTID=
slave_pos``; MySQL: GTID mode and ``SOURCE_AUTO_POSITION=1``). The replica's binlog differs
from the primary's, as in production: another basename (``replica-bin``), rotated once, and
holding local transactions (MariaDB: in GTID domain 1; MySQL: under the replica's server_uuid)
in a database of its own, ``replica_local``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cdc.embedded import embedded_server


@dataclass
class Pair:
    primary: object
    replica: object

    @property
    def mariadb(self) -> bool:
        return self.primary.FLAVOR == "mariadb"

    def gtid_state(self, server) -> str:
        var = "gtid_binlog_pos" if self.mariadb else "gtid_executed"
        return str(server.execute(f"SELECT @@GLOBAL.{var}")[0][0] or "").replace("\n", "")

    def wait_replicated(self, timeout: float = 60) -> None:
        """Until the replica has applied everything the primary has written."""
        state = self.gtid_state(self.primary)
        sql = "SELECT MASTER_GTID_WAIT(%s, %s)" if self.mariadb else \
            "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)"
        got = self.replica.execute(sql, (state, timeout))[0][0]
        assert int(got) == 0, f"the replica did not catch up with {state}: {got}"

    def stop_replication(self) -> None:
        self.replica.execute("STOP SLAVE" if self.mariadb else "STOP REPLICA")

    def promote(self) -> None:
        """The primary is gone: the replica stops replicating and becomes the primary."""
        self.stop_replication()
        self.replica.execute("RESET SLAVE ALL" if self.mariadb else "RESET REPLICA ALL")

    def cleanup(self) -> None:
        for s in (self.primary, self.replica):
            s.cleanup()


def replica_pair(name: str, basedir) -> Pair:
    """Start a primary and its GTID replica of server *name* under *basedir*."""
    mariadb = name.startswith("mariadb")
    primary = embedded_server(name, basedir=basedir / "primary", server_id=1).start()
    extra = {"log_slave_updates": "ON"} if mariadb else {"log_replica_updates": "ON"}
    replica = embedded_server(name, basedir=basedir / "replica", server_id=2,
                              log_bin_basename="replica-bin", extra_options=extra).start()
    pair = Pair(primary, replica)
    # local transactions on the replica, in a binlog file it then rotates
    with replica.connect() as conn, conn.cursor() as cur:
        if mariadb:
            cur.execute("SET SESSION gtid_domain_id = 1")
        cur.execute("CREATE DATABASE replica_local")
        cur.execute("CREATE TABLE replica_local.beat (id INT PRIMARY KEY, at DATETIME(6))")
        for i in range(5):
            cur.execute("INSERT INTO replica_local.beat VALUES (%s, NOW(6))", (i,))
        conn.commit()
    replica.execute("FLUSH BINARY LOGS")
    # the replica starts after what the primary's own set-up wrote (both made the same users)
    p = primary.cdc_params()
    if mariadb:
        replica.execute("SET GLOBAL gtid_slave_pos = %s", (pair.gtid_state(primary),))
        replica.execute(f"CHANGE MASTER TO MASTER_HOST='{p['host']}', MASTER_PORT={p['port']}, "
                        f"MASTER_USER='{p['user']}', MASTER_PASSWORD='{p['password']}', "
                        f"MASTER_USE_GTID=slave_pos")
        replica.execute("START SLAVE")
    else:
        replica.execute(f"SET GLOBAL gtid_purged = '+{pair.gtid_state(primary)}'")
        replica.execute(f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='{p['host']}', "
                        f"SOURCE_PORT={p['port']}, SOURCE_USER='{p['user']}', "
                        f"SOURCE_PASSWORD='{p['password']}', SOURCE_AUTO_POSITION=1, "
                        f"GET_SOURCE_PUBLIC_KEY=1")
        replica.execute("START REPLICA")
    deadline = time.monotonic() + 30
    primary.execute("CREATE DATABASE IF NOT EXISTS shop")
    while True:
        try:
            pair.wait_replicated(timeout=5)
            return pair
        except AssertionError:
            if time.monotonic() > deadline:
                pair.cleanup()
                raise
