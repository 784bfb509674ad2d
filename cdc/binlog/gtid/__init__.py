"""Global transaction identifiers: MySQL GTID sets (tags included) and MariaDB GTID positions.

This package re-exports the public names of its modules, one job each:

* :mod:`~cdc.binlog.gtid.mysql` -- MySQL :class:`Gtid` (``uuid:gno``, ``uuid:tag:gno``) and
  :class:`GtidSet`: text form (``uuid:1-5:7``, ``uuid:1-13:mytag:1-2``), binary form
  (``Gtid_set::encode``, :func:`decode_gtid_set`) and set algebra.
* :mod:`~cdc.binlog.gtid.mysql_events` -- body decoders of GTID_LOG_EVENT /
  ANONYMOUS_GTID_LOG_EVENT (:func:`parse_mysql_gtid_body`, :func:`decode_mysql_gtid_body`),
  GTID_TAGGED_LOG_EVENT (:func:`decode_mysql_gtid_tagged_body`) and PREVIOUS_GTIDS_LOG_EVENT
  (:func:`decode_previous_gtids_body`), giving :class:`MysqlGtidInfo`.
* :mod:`~cdc.binlog.gtid.mariadb` -- MariaDB :class:`MariaGtid` (``domain-server-seq``) and
  :class:`MariaGtidPosition` (at most one GTID per replication domain).
* :mod:`~cdc.binlog.gtid.mariadb_events` -- body decoders of MariaDB GTID_EVENT
  (:func:`decode_maria_gtid_body`, :class:`MariaGtidInfo`) and GTID_LIST_EVENT
  (:func:`decode_maria_gtid_list_body`).
* :mod:`~cdc.binlog.gtid.parts` (UUIDs, tags, GNO limits), :mod:`~cdc.binlog.gtid.intervals`
  (interval-list algebra) and :mod:`~cdc.binlog.gtid.varlen` (``mysql::serialization``
  variable-length integers): what the modules above are built from.

An event *body* is the event bytes after the 19-byte common header, with the 4-byte CRC32
checksum (if any) already stripped.  All decoders accept ``bytes``, ``bytearray`` or
``memoryview``.
"""

# Also importable from here as before the split, though not in __all__: the FL_* flags, GNO_END
# and the parser's fast path (parse_mysql_gtid_body, mysql_gtid_info, mysql_gtid_text).
from cdc.binlog.gtid.mariadb import MariaGtid, MariaGtidPosition
from cdc.binlog.gtid.mariadb_events import (  # noqa: F401
    FL_ALLOW_PARALLEL, FL_COMMIT_ALTER, FL_COMPLETED_XA, FL_DDL, FL_EXTRA_MULTI_ENGINE,
    FL_EXTRA_THREAD_ID, FL_GROUP_COMMIT_ID, FL_PREPARED_XA, FL_ROLLBACK_ALTER, FL_STANDALONE,
    FL_START_ALTER, FL_TRANSACTIONAL, FL_WAITED, MariaGtidInfo, MariaXid, decode_maria_gtid_body,
    decode_maria_gtid_list_body)
from cdc.binlog.gtid.mysql import Gtid, GtidSet, decode_gtid_set
from cdc.binlog.gtid.mysql_events import (  # noqa: F401
    MysqlGtidInfo, decode_mysql_gtid_body, decode_mysql_gtid_tagged_body,
    decode_previous_gtids_body, mysql_gtid_info, mysql_gtid_text, parse_mysql_gtid_body)
from cdc.binlog.gtid.parts import GNO_END, GNO_MAX, TAG_MAX_LENGTH  # noqa: F401
from cdc.binlog.gtid.varlen import read_varlen_signed, read_varlen_unsigned

__all__ = [
    "GNO_MAX",
    "TAG_MAX_LENGTH",
    "Gtid",
    "GtidSet",
    "decode_gtid_set",
    "MysqlGtidInfo",
    "decode_mysql_gtid_body",
    "decode_mysql_gtid_tagged_body",
    "decode_previous_gtids_body",
    "MariaGtid",
    "MariaGtidPosition",
    "MariaXid",
    "MariaGtidInfo",
    "decode_maria_gtid_body",
    "decode_maria_gtid_list_body",
    "read_varlen_unsigned",
    "read_varlen_signed",
]
