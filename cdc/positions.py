"""Places in the binlog: the one position type, the one start parser, the purged-binlog error.

* :class:`Position` -- a point in the binlog stream: ``file``/``pos`` and, when the server has
  GTIDs, the GTID state there (a MySQL :class:`~cdc.binlog.gtid.GtidSet` of the transactions
  before it, or a MariaDB :class:`~cdc.binlog.gtid.MariaGtidPosition`), and where the XA
  transactions prepared before it and not yet decided are (:mod:`cdc.binlog.xa`). Positions order by
  (binlog file number, byte position); :meth:`Position.bytes_behind` measures the distance to
  another; :meth:`Position.to_offset` / :meth:`Position.from_offset` give the Spark offset form
  (JSON with a fixed key order).
* :class:`Start` -- where a stream starts: ``earliest``, ``latest``, a file position, a MySQL
  GTID set or a MariaDB GTID position; :meth:`Start.parse` reads every spelling the CLI and the
  Spark option ``startingPosition`` accept.
* :func:`purged_error` -- the one message for "this binlog file is no longer on the server".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Iterable, Mapping, Union

from cdc.binlog.gtid import GtidSet, MariaGtidPosition
from cdc.binlog.xa import PREPARE, Prepared
from cdc.errors import BinlogPurgedError, CdcError, ConfigurationError

__all__ = ["Position", "Start", "GtidState", "binlog_file_number", "purged_error"]

GtidState = Union[GtidSet, MariaGtidPosition]

_NUMBER = re.compile(r"(\d+)$")
_NO_DEFAULT = object()
_MARIA_POS_RE = re.compile(r"\s*\d+-\d+-\d+\s*(,\s*\d+-\d+-\d+\s*)*\Z")
_FILE_POS_RE = re.compile(r"(?P<file>[^:\s]+):(?P<pos>\d+)\Z")
_UUID_RE = re.compile(r"[0-9a-fA-F-]{36}")


@lru_cache(maxsize=4096)
def _file_number(name: str) -> int | None:
    m = _NUMBER.search(name)
    return int(m.group(1)) if m else None


def binlog_file_number(name: str, default=_NO_DEFAULT) -> int:
    """The sequence number of a binlog file name (``mysql-bin.000042`` -> 42); binlog files
    order by it. A name without one raises ConfigurationError, or gives *default* if given."""
    n = _file_number(name or "")
    if n is not None:
        return n
    if default is not _NO_DEFAULT:
        return default
    raise ConfigurationError(f"{name!r} is not a binlog file name (<basename>.<number>)")


def parse_gtid_state(text: str | None, mariadb: bool | None = None) -> GtidState | None:
    """A GTID state from its text: a MariaDB GTID position (``0-1-42,1-2-7``) or a MySQL GTID
    set (``uuid:1-42``). The empty text is ambiguous: *mariadb* (the server's flavour) decides;
    unknown, it is a MySQL set (an empty one skips nothing)."""
    if text is None:
        return None
    t = text.strip()
    if not t:
        return MariaGtidPosition.parse("") if mariadb else GtidSet.parse("")
    if mariadb is None:
        mariadb = bool(_MARIA_POS_RE.match(t))
    return MariaGtidPosition.parse(t) if mariadb else GtidSet.parse(t)


@dataclass(frozen=True)
class Position:
    """A point in the binlog: right after a transaction (a resume point), or a file start.

    ``file``/``pos`` say where (None until an ``earliest``/``latest`` start is resolved, or in a
    GTID start before the server said where); ``gtid`` is the GTID state there: the MySQL set of
    transactions delivered up to this point, or the MariaDB GTID position (None without GTIDs).
    ``last_gtid`` is the GTID of the transaction that ends here (not part of equality).
    ``prepared``: the XA transactions prepared before this point and not committed or rolled
    back there (:class:`~cdc.binlog.xa.Prepared`, in binlog order): a stream resuming here reads
    them again, to deliver their changes at their XA COMMIT.
    """

    file: str | None
    pos: int | None
    gtid: GtidState | None = None
    last_gtid: str | None = field(default=None, compare=False)
    prepared: tuple[Prepared, ...] = ()

    # --- the GTID state --------------------------------------------------------------------

    @property
    def gtid_set(self) -> GtidSet | None:
        """The MySQL GTID set (None in MariaDB or file mode)."""
        return self.gtid if isinstance(self.gtid, GtidSet) else None

    @property
    def mariadb_gtid(self) -> MariaGtidPosition | None:
        """The MariaDB GTID position (None in MySQL or file mode)."""
        return self.gtid if isinstance(self.gtid, MariaGtidPosition) else None

    @property
    def mode(self) -> str:
        """How a stream resumes from here: ``gtid`` (MySQL), ``mariadb_gtid`` or ``file``."""
        if isinstance(self.gtid, GtidSet):
            return "gtid"
        if isinstance(self.gtid, MariaGtidPosition):
            return "mariadb_gtid"
        return "file"

    def after(self, file: str | None, pos: int | None, gtid: str | None,
              xa=None) -> "Position":
        """The position right after a transaction ending at *file*:*pos* whose GTID is *gtid*:
        the GTID state advances by it; *xa* (the transaction's
        :class:`~cdc.binlog.xa.XaStep`): an XA PREPARE is held from here on, an XA COMMIT or
        ROLLBACK decides one."""
        state = self.gtid
        if gtid and state is not None:
            state = state.add(gtid) if isinstance(state, GtidSet) else state.advance(gtid)
        held = self.prepared
        if xa is not None:
            held = tuple(p for p in held if p.xid != xa.xid)
            if xa.action == PREPARE:
                held += (xa.held,)
        return Position(file, pos, state, gtid, held)

    def holding(self, prepared: Iterable[Prepared]) -> "Position":
        """The same position holding *prepared* instead (the places completed when read)."""
        return replace(self, prepared=tuple(prepared))

    def moved_to(self, file: str | None, pos: int | None) -> "Position":
        """The same GTID state at another file position (a rotation between transactions)."""
        return replace(self, file=file, pos=pos)

    # --- order and distance ----------------------------------------------------------------

    @cached_property
    def key(self) -> tuple[int, int]:
        """(binlog file number, byte position): positions order by it (computed once: the
        driver's planning orders every boundary's position several times)."""
        if self.file is None or self.pos is None:
            raise ConfigurationError(f"position {self} has no file and byte position to order by")
        return (binlog_file_number(self.file), int(self.pos))

    def __lt__(self, other: "Position") -> bool:
        return self.key < other.key

    def __le__(self, other: "Position") -> bool:
        return self.key <= other.key

    def __gt__(self, other: "Position") -> bool:
        return self.key > other.key

    def __ge__(self, other: "Position") -> bool:
        return self.key >= other.key

    def same_place(self, other: "Position") -> bool:
        """The same file and byte position (GTID state aside)."""
        return self.file == other.file and self.pos == other.pos

    def bytes_behind(self, end: "Position", logs: Iterable[tuple[str, int]] | None = None) -> int:
        """Binlog bytes from here to *end*: the rest of this file, every file in between and
        *end.pos* bytes of the last one (file sizes from ``SHOW BINARY LOGS`` rows *logs*; a
        file missing there counts as ending here). 0 when at or past *end*."""
        first = binlog_file_number(self.file, -1)
        last = binlog_file_number(end.file, -1)
        if (first, self.pos) >= (last, end.pos):
            return 0
        if self.file == end.file:
            return end.pos - self.pos
        sizes = dict(logs or ())
        between = sum(size for name, size in sizes.items()
                      if first < binlog_file_number(name, -1) < last)
        return max(0, sizes.get(self.file, self.pos) - self.pos) + between + end.pos

    # --- forms -------------------------------------------------------------------------------

    def to_offset(self) -> dict:
        """The Spark offset: ``{"file", "pos"[, "gtid"][, "xa"]}`` in this key order (Spark
        compares offsets by their JSON text); ``xa``: the held prepared XA transactions,
        ``[[xid, file, pos, end], ...]``, only when there are some."""
        d: dict = {"file": self.file, "pos": int(self.pos)}
        if self.gtid is not None:
            d["gtid"] = str(self.gtid)
        if self.prepared:
            d["xa"] = [p.to_json() for p in self.prepared]
        return d

    @classmethod
    def from_offset(cls, d: "Mapping | str | Position", mariadb: bool | None = None) -> "Position":
        """A Spark offset (a dict, or its JSON text) back into a position; *mariadb* resolves
        an empty GTID text (see :func:`parse_gtid_state`)."""
        if isinstance(d, Position):
            return d
        try:
            if isinstance(d, str):
                d = json.loads(d)
            return cls(str(d["file"]), int(d["pos"]), parse_gtid_state(d.get("gtid"), mariadb),
                       prepared=tuple(Prepared.from_json(p) for p in d.get("xa") or ()))
        except (KeyError, TypeError, ValueError, CdcError):
            raise ConfigurationError(f"not a binlog-cdc offset: {d!r}") from None

    def to_start(self) -> "Start":
        """Where a stream resumes to continue right after this position (holding its prepared
        XA transactions)."""
        if isinstance(self.gtid, GtidSet):
            return Start("gtid", gtid=str(self.gtid), prepared=self.prepared)
        if isinstance(self.gtid, MariaGtidPosition):
            return Start("mariadb_gtid", gtid=str(self.gtid), prepared=self.prepared)
        if not self.file or self.pos is None:
            raise ConfigurationError("this position has no file and position to resume from")
        return Start.at(self.file, self.pos, prepared=self.prepared)

    def cli_args(self) -> str:
        """How to resume with ``binlog-cdc tail``."""
        xa = f" --xa {','.join(map(str, self.prepared))}" if self.prepared else ""
        if self.gtid is not None:
            return f"--gtid '{self.gtid}'{xa}"
        return f"--file {self.file} --pos {self.pos}{xa}"

    def __str__(self) -> str:
        where = f"{self.file}:{self.pos}" if self.file or self.gtid is None else ""
        if isinstance(self.gtid, GtidSet):
            where = f"{where} gtid_set={self.gtid}".lstrip()
        elif isinstance(self.gtid, MariaGtidPosition):
            where = f"{where} gtid={self.gtid}".lstrip()
        return where + _holding(self.prepared)


def _holding(prepared: tuple[Prepared, ...]) -> str:
    if not prepared:
        return ""
    return " holding prepared XA at " + ", ".join(map(str, prepared))


@dataclass(frozen=True)
class Start:
    """Where streaming starts. Build one with a class method, or :meth:`parse` a spelling."""

    kind: str                       # "file", "gtid", "mariadb_gtid", "earliest", "latest"
    file: str | None = None
    pos: int = 4
    gtid: str | None = None
    #: prepared XA transactions to hold from the start on (see :attr:`Position.prepared`)
    prepared: tuple[Prepared, ...] = ()

    @classmethod
    def at(cls, file: str, pos: int = 4, prepared: Iterable[Prepared] = ()) -> "Start":
        """A binlog file and the position of an event in it (a transaction's ``end_pos``);
        *prepared*: the XA transactions prepared before it and undecided there."""
        if not file:
            raise ConfigurationError("a file start needs a binlog file name")
        if not isinstance(pos, int) or isinstance(pos, bool) or pos < 4:
            raise ConfigurationError(f"binlog position must be an integer >= 4, not {pos!r}")
        return cls("file", file=file, pos=pos, prepared=tuple(prepared))

    def holding(self, prepared: Iterable[Prepared]) -> "Start":
        """The same start, holding *prepared* (``tail --xa``) too."""
        prepared = tuple(prepared)
        if self.kind in ("earliest", "latest") and prepared:
            raise ConfigurationError(f"prepared XA transactions to hold (--xa) need a start at "
                                     f"a position (--file/--pos or --gtid), not {self.kind}")
        return replace(self, prepared=self.prepared + prepared)

    @classmethod
    def gtid_set(cls, text: str) -> "Start":
        """MySQL: stream every transaction *not* in this GTID set (what the replica has)."""
        return cls("gtid", gtid=str(GtidSet.parse(text)))

    @classmethod
    def mariadb_gtid(cls, text: str) -> "Start":
        """MariaDB: the GTID position already applied (``'0-1-42'``, one GTID per domain)."""
        return cls("mariadb_gtid", gtid=str(MariaGtidPosition.parse(text)))

    @classmethod
    def gtid_text(cls, text: str) -> "Start":
        """A MariaDB GTID position or a MySQL GTID set, told apart by their form."""
        if _MARIA_POS_RE.match(text):
            return cls.mariadb_gtid(text)
        return cls.gtid_set(text)

    @classmethod
    def earliest(cls) -> "Start":
        """The first binlog file the server still has."""
        return cls("earliest")

    @classmethod
    def latest(cls) -> "Start":
        """The current end of the binlog: only changes committed from now on."""
        return cls("latest")

    @property
    def is_gtid(self) -> bool:
        return self.kind in ("gtid", "mariadb_gtid")

    @classmethod
    def parse(cls, spec: "Start | Position | str | tuple | Mapping | None", *,
              option: str | None = None) -> "Start":
        """Every spelling of a start:

        ``'earliest'``, ``'latest'`` (also None or blank), ``'file:pos'``, a MySQL GTID set
        (``'uuid:1-42'``), a MariaDB GTID position (``'0-1-42'``), the JSON objects
        ``{"file": "mysql-bin.000042", "pos": 4}`` and ``{"gtid": "..."}`` (the Spark option
        ``startingPosition``), a ``(file, pos)`` tuple, a mapping, or a :class:`Position`.
        *option* names the option in error messages."""
        if isinstance(spec, Start):
            return spec
        if isinstance(spec, Position):
            return spec.to_start()
        if isinstance(spec, tuple) and len(spec) == 2:
            return cls.at(spec[0], int(spec[1]))
        if spec is None:
            return cls("latest")
        if isinstance(spec, Mapping):
            return cls._from_mapping(spec, spec, option)
        if not isinstance(spec, str):
            raise ConfigurationError(f"cannot use {spec!r} as a start position")
        text = spec.strip()
        if not text or text.lower() in ("earliest", "latest"):
            return cls(text.lower() or "latest")
        if text.startswith("{"):
            try:
                d = json.loads(text)
            except ValueError:
                d = None
            if isinstance(d, dict):
                return cls._from_mapping(d, spec, option)
            raise cls._not_understood(spec, option)
        if _MARIA_POS_RE.match(text):
            return cls.mariadb_gtid(text)
        m = _FILE_POS_RE.match(text)
        if m and not _UUID_RE.fullmatch(m.group("file")):
            return cls.at(m.group("file"), int(m.group("pos")))
        try:
            return cls.gtid_set(text)
        except CdcError:
            raise cls._not_understood(spec, option) from None

    @classmethod
    def _from_mapping(cls, d: Mapping, spec, option: str | None) -> "Start":
        keys = set(d)
        if keys == {"gtid"} and isinstance(d["gtid"], str):
            try:
                return cls.gtid_text(d["gtid"].strip())
            except CdcError:
                raise cls._not_understood(spec, option) from None
        if {"file", "pos"} <= keys <= {"file", "pos", "gtid"} and isinstance(d["file"], str) \
                and isinstance(d["pos"], int) and not isinstance(d["pos"], bool) \
                and d["pos"] >= 4:
            return cls.at(d["file"], d["pos"])
        raise cls._not_understood(spec, option)

    @staticmethod
    def _not_understood(spec, option: str | None) -> ConfigurationError:
        what = f"{option} {spec!r} is not understood" if option else \
            f"cannot understand start {spec!r}"
        return ConfigurationError(
            f"{what}: use earliest, latest, 'file:pos' or "
            f'{{"file": "mysql-bin.000042", "pos": 4}}, a MySQL GTID set (\'uuid:1-42\') or a '
            f'MariaDB GTID position (\'0-1-42\'), also as {{"gtid": "0-1-42"}}')

    def position(self) -> Position | None:
        """The resume position this start stands for (None for earliest/latest, which the
        server resolves)."""
        if self.kind == "file":
            return Position(self.file, self.pos, prepared=self.prepared)
        if self.kind == "gtid":
            return Position(None, None, GtidSet.parse(self.gtid), prepared=self.prepared)
        if self.kind == "mariadb_gtid":
            return Position(None, None, MariaGtidPosition.parse(self.gtid),
                            prepared=self.prepared)
        return None

    def describe(self) -> str:
        if self.kind == "file":
            return f"file {self.file} position {self.pos}{_holding(self.prepared)}"
        if self.kind == "gtid":
            return f"GTID set '{self.gtid}'{_holding(self.prepared)}"
        if self.kind == "mariadb_gtid":
            return f"MariaDB GTID position '{self.gtid}'{_holding(self.prepared)}"
        return self.kind


def purged_error(file: str, logs: Iterable[tuple[str, int]], where: str, *,
                 context: str = "", fix: str) -> BinlogPurgedError:
    """The error for a binlog *file* that the server *where* no longer has (it lists *logs*,
    ``SHOW BINARY LOGS`` rows): what is missing, what the server has, and *fix* (what to do)."""
    names = [n for n, _ in logs]
    have = f"{names[0]} .. {names[-1]}" if names else "no binlog files"
    ctx = f" ({context})" if context else ""
    return BinlogPurgedError(
        f"binlog file {file}{ctx} is no longer on {where} (it has {have}): it was purged, or "
        f"never existed, so the changes in it are lost to this stream. {fix}")
