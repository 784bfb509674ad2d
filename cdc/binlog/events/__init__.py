"""Binlog event classes and the one event registry (type code -> body decoder).

Each decoder gets the event *body* (bytes after the common header, checksum removed) and the
parser context (format description, table maps, row decoder), and returns an :class:`Event`.
Unknown event types, and types with the IGNORABLE flag this parser does not know, come out as
:class:`RawEvent` -- never dropped.

One module per family of events, each registering its decoders in :data:`REGISTRY` (importing
this package imports them all); every public name is re-exported here:

* :mod:`~cdc.binlog.events.base` -- :class:`EventHeader`, :class:`Event`,
  FORMAT_DESCRIPTION, :class:`Context`, the registry, :class:`RawEvent`;
* :mod:`~cdc.binlog.events.control` -- ROTATE, STOP, XID, INTVAR, RAND, USER_VAR, INCIDENT,
  HEARTBEAT, ROWS_QUERY, checkpoints, LOAD DATA blocks, group replication and XA events;
* :mod:`~cdc.binlog.events.query` -- QUERY;
* :mod:`~cdc.binlog.events.rows` -- TABLE_MAP and rows events;
* :mod:`~cdc.binlog.events.gtids` -- GTID events of MySQL and MariaDB;
* :mod:`~cdc.binlog.events.payload` -- TRANSACTION_PAYLOAD and the framing helpers
  (type/length/value fields, MariaDB compression).
"""

from __future__ import annotations

from cdc.binlog.events.base import (HEADER, REGISTRY, Context, Decode, Event, EventHeader,
                                    FormatDescriptionEvent, RawEvent, decode_raw, new_event,
                                    new_tuple, parse_fde_body, register)
from cdc.binlog.events.control import (BinlogCheckpointEvent, DeleteFileEvent, HeartbeatEvent,
                                       IncidentEvent, IntvarEvent, LoadBlockEvent, RandEvent,
                                       RotateEvent, RowsQueryEvent, StopEvent,
                                       TransactionContextEvent, UserVarEvent, ViewChangeEvent,
                                       XaPrepareEvent, XidEvent)
from cdc.binlog.events.gtids import (GtidEvent, MariaGtidEvent, MariaGtidListEvent,
                                     PreviousGtidsEvent)
from cdc.binlog.events.payload import TransactionPayloadEvent, maria_uncompress, tlv_fields
from cdc.binlog.events.query import ExecuteLoadQueryEvent, QueryEvent, parse_status_vars
from cdc.binlog.events.rows import RowsEvent, TableMapEvent

__all__ = [
    # base
    "HEADER", "REGISTRY", "Context", "Decode", "Event", "EventHeader", "FormatDescriptionEvent",
    "RawEvent", "decode_raw", "new_event", "new_tuple", "parse_fde_body", "register",
    # control
    "BinlogCheckpointEvent", "DeleteFileEvent", "HeartbeatEvent", "IncidentEvent",
    "IntvarEvent", "LoadBlockEvent", "RandEvent", "RotateEvent", "RowsQueryEvent", "StopEvent",
    "TransactionContextEvent", "UserVarEvent", "ViewChangeEvent", "XaPrepareEvent", "XidEvent",
    # GTIDs
    "GtidEvent", "MariaGtidEvent", "MariaGtidListEvent", "PreviousGtidsEvent",
    # payloads
    "TransactionPayloadEvent", "maria_uncompress", "tlv_fields",
    # QUERY
    "ExecuteLoadQueryEvent", "QueryEvent", "parse_status_vars",
    # tables and rows
    "RowsEvent", "TableMapEvent",
]
