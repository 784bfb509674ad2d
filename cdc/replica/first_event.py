"""When a binlog file begins: the timestamp of its first event (the format description the
server writes when it opens the file), read through a short binlog dump of that file.

``SHOW BINLOG EVENTS`` shows no times, and the files' dates are the server's to know; a dump
needs only the replication privilege a stream has anyway. The dump is what ``mysqlbinlog
--read-from-remote-server`` does without ``--stop-never``: server id 0 and non-blocking (it
registers no replica and ends no other replica's dump).
"""

from __future__ import annotations

import struct

from cdc.errors import CdcError
from cdc.positions import Start
from cdc.replica import preflight
from cdc.replica.packets import frame, take_over
from cdc.replica.protocol import binlog_dump, dump_flags
from cdc.replica.server import ServerInfo

__all__ = ["first_event_time"]

#: events read at most before the first with a time (the dump's artificial ROTATE has none)
_MOST = 4


def first_event_time(conn, info: ServerInfo, variables: dict, file: str) -> int | None:
    """The Unix time of the first event of binlog *file*, read on the logged-in connection
    *conn* (which it takes over: the caller closes it with ``conn._force_close()`` and uses it
    for nothing else); *variables* as :func:`~cdc.replica.preflight.server_variables` gives
    them. None when the dump ends or fails first (the file was purged meanwhile, a privilege
    is missing: other checks say so)."""
    for sql in preflight.session_sql(info, variables, Start.at(file, 4), heartbeat_ns=None):
        with conn.cursor() as cur:
            cur.execute(sql)
    reader = take_over(conn)
    reader.sock.settimeout(max(float(conn.connect_timeout or 10), 5.0))
    reader.sock.sendall(frame(binlog_dump(file, 4, 0, flags=dump_flags(
        info, variables, blocking=False)), 0))
    reader.seq = 1
    for _ in range(_MOST):
        try:
            payload = reader.read_payload()
        except (CdcError, OSError):
            return None
        if len(payload) < 5 or payload[0] != 0:
            return None          # an error packet or the end of the dump
        (timestamp,) = struct.unpack_from("<I", payload, 1)
        if timestamp:
            return timestamp
    return None
