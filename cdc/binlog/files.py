"""Reading binlog files from disk: one file, many files, or a directory / .index file, in order."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

from cdc.binlog.events import Event
from cdc.binlog.parser import DEFAULT_CHARSET, BinlogParser
from cdc.binlog.storage import LOCAL, Storage, expand
from cdc.binlog.tablemap import apply_default_charset, charset_columns
from cdc.binlog.transactions import Transaction, TransactionAssembler
from cdc.errors import ConfigurationError
from cdc.rows.backend import resolve_decoder
from cdc.values.charsets import collation_for_charset

__all__ = ["BinlogFileReader", "EarlierPrepared", "read_events", "binlog_paths", "CHUNK",
           # re-exported: the default charset of text without charset metadata and its helpers
           "DEFAULT_CHARSET", "collation_for_charset", "charset_columns", "apply_default_charset"]

CHUNK = 1 << 20

def binlog_paths(paths: Iterable[str | os.PathLike], storage: Storage | None = None) -> list:
    """Expand files, globs, directories and ``.index`` files into binlog files, in order
    (:func:`cdc.binlog.storage.expand`): Paths on the local disk, the storage's path strings on
    another *storage*.

    A directory contributes the files listed in its ``*.index`` file when there is one, else its
    files named like ``name.000123``. Order is that of the arguments, each expanded in order.
    """
    if storage is None or storage is LOCAL:
        return [Path(p) for p in expand(paths, LOCAL)]
    return expand(paths, storage)


class BinlogFileReader:
    """Decode binlog files in order, yielding events with ``file``/``pos`` set.

    :param start_position: skip events before this offset of the *first* file (its format
        description is still read first).
    :param stop_position: stop at the first event at or after this offset of the *last* file.
    :param follow_rotate: after the last given file, continue into the file its closing ROTATE
        names when it exists in the same directory.
    :param progress: called as ``progress(bytes_done, bytes_total)`` after each chunk.
    :param row_decoder: the row decoder of the rows events (``"c"``, ``"python"``, ``"auto"``;
        None: the process default), as :class:`~cdc.binlog.parser.BinlogParser` takes it.
    :param charset: the character set of text columns whose TABLE_MAP carries none
        (:data:`DEFAULT_CHARSET`, utf8mb4; ``"binary"``: keep their bytes), as
        :class:`~cdc.binlog.parser.BinlogParser` takes it.
    :param storage: where the files are (:class:`~cdc.binlog.storage.Storage`; default the
        local disk): each file is read as a stream of *chunk_size* chunks.
    """

    def __init__(self, paths: Iterable[str | os.PathLike] | str | os.PathLike, *,
                 start_position: int | None = None, stop_position: int | None = None,
                 verify_checksum: bool = True, follow_rotate: bool = False,
                 progress: Callable[[int, int], None] | None = None, chunk_size: int = CHUNK,
                 row_decoder: str | None = None, charset: str = DEFAULT_CHARSET,
                 storage: Storage | None = None):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        self.storage = storage or LOCAL
        self.paths = binlog_paths(paths, self.storage)
        if not self.paths:
            raise ConfigurationError("no binlog files to read")
        self.start_position = start_position
        self.stop_position = stop_position
        self.verify_checksum = verify_checksum
        self.follow_rotate = follow_rotate
        self.progress = progress
        self.chunk_size = chunk_size
        self.row_decoder = resolve_decoder(row_decoder)
        self.charset = charset
        collation_for_charset(charset)          # an unknown name: ConfigurationError now
        self.parser: BinlogParser | None = None

    def events(self) -> Iterator[Event]:
        st = self.storage
        paths = [str(p) for p in self.paths]
        total = sum(st.size(p) for p in paths)
        done = 0
        i = 0
        while i < len(paths):
            path = paths[i]
            first, last = i == 0, i == len(paths) - 1
            start = self.start_position if first else None
            stop = self.stop_position if last else None
            if stop is None:
                yield from self._file_events(path, start)
            else:
                for ev in self._file_events(path, start):
                    if ev.pos is not None and ev.pos >= stop:
                        return
                    yield ev
            rotate_to = self.parser.rotated_to
            done += st.size(path)
            if self.progress:
                self.progress(done, total)
            if last and self.follow_rotate and rotate_to:
                nxt = st.join(st.parent(path), rotate_to)
                if st.kind(nxt) == "file" and nxt not in paths:
                    paths.append(nxt)
                    total += st.size(nxt)
            i += 1

    __iter__ = events

    def _file_events(self, path: str, start: int | None) -> Iterator[Event]:
        parser = BinlogParser(file=self.storage.name(path), verify_checksum=self.verify_checksum,
                              row_decoder=self.row_decoder, charset=self.charset)
        self.parser = parser
        if start is not None and start > 4:
            # The format description first (it says how to read the rest), then jump.
            with self.storage.open(path) as f:
                while parser.format_description is None:
                    chunk = f.read(4096)
                    if not chunk:
                        break
                    parser.feed(chunk)
                    for ev in parser.events():
                        if parser.format_description is not None:
                            break
            parser.seek(start)
        with self.storage.open(path, start if start is not None and start > 4 else 0) as f:
            while True:
                chunk = f.read(self.chunk_size)
                if not chunk:
                    break
                parser.feed(chunk)
                yield from parser.events()
        parser.close()


class EarlierPrepared:
    """The prepared XA transactions of earlier binlog files, found when asked: a reader of one
    file of several (a Spark task of a batch read) that meets the XA COMMIT of a transaction
    prepared in an earlier file reads the earlier files back, newest first, until one holds
    it. The assembler's ``missing_prepared``.

    :param earlier: gives the earlier files, oldest first (called once, when first needed).
    :param reader_kw: :class:`BinlogFileReader` options (``storage``, ``row_decoder``, ...).
    """

    def __init__(self, earlier: Callable[[], Iterable[str]], table_filter=None, **reader_kw):
        self._earlier = earlier
        self._paths: list[str] | None = None
        self._found: dict[str, Transaction] = {}
        self._filter = table_filter
        self._kw = reader_kw

    def __call__(self, xid: str) -> Transaction | None:
        if self._paths is None:
            self._paths = list(self._earlier())
        while xid not in self._found and self._paths:
            asm = TransactionAssembler(self._filter)
            for ev in BinlogFileReader([self._paths.pop()], **self._kw).events():
                asm.push(ev)
            for k, tx in asm.prepared.items():
                self._found.setdefault(k, tx)
        return self._found.pop(xid, None)


def read_events(paths, **kw) -> Iterator[Event]:
    """Shorthand for ``BinlogFileReader(paths, **kw).events()`` (``row_decoder=``, ``charset=``
    too)."""
    return BinlogFileReader(paths, **kw).events()
