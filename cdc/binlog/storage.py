"""Where binlog files are: the local disk, or any filesystem behind the :class:`Storage` interface.

:class:`BinlogFileReader <cdc.binlog.files.BinlogFileReader>` lists and reads its files through a
``Storage``: :data:`LOCAL` (the local disk, the default) or another implementation, such as the
object-store one of the Spark source (:mod:`streaming.source.storage`: ``s3://``, ``gs://``,
``abfs://``, ``hdfs://`` and ``file://`` through ``pyarrow.fs``; the core package itself stays
free of pyarrow).  A file is always read as a stream of chunks fed to the sans-IO parser: never
a whole file in memory.

:func:`expand` turns what a user gives (files, directories, ``.index`` files, globs) into the
binlog files, in order, on any storage.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from typing import BinaryIO, Iterable

from cdc.errors import ConfigurationError

NUMBERED = re.compile(r"\.\d{6,}$")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_GLOB = re.compile(r"[*?\[]")


def url_scheme(path: str | os.PathLike) -> str | None:
    """The scheme of a URL (``"s3"`` of ``s3://bucket/key``), lower case; None for a plain
    path (a Windows drive letter is no scheme)."""
    m = _URL.match(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else None
    return m.group(1).lower() if m else None


def local_path(url: str) -> str:
    """A ``file://`` URL as a local path; another URL is a ConfigurationError that says how to
    read it (the local reader reads the local disk)."""
    scheme = url_scheme(url)
    if scheme == "file":
        rest = url.split("://", 1)[1]
        return "/" + rest.split("/", 1)[1] if not rest.startswith("/") and "/" in rest else rest
    raise ConfigurationError(
        f"{url}: a {scheme}:// URL, and this reads local files only: read it with the Spark "
        f"source (spark.read.format('binlog-cdc').load('{url}'), which reads s3://, gs://, "
        f"abfs:// and hdfs:// through pyarrow.fs) or copy the files to a local directory first")


class Storage:
    """A filesystem binlog files are listed and read from.  Paths are strings in the storage's
    own spelling; directories are separated by ``/``."""

    def kind(self, path: str) -> str | None:
        """``"file"``, ``"dir"``, or None when nothing is there."""
        raise NotImplementedError

    def list_files(self, directory: str) -> list[str]:
        """The paths of the files directly in *directory*."""
        raise NotImplementedError

    def size(self, path: str) -> int:
        raise NotImplementedError

    def open(self, path: str, offset: int = 0) -> BinaryIO:
        """A binary stream of *path* from byte *offset* (``read(n)``, ``close()``)."""
        raise NotImplementedError

    def glob(self, pattern: str) -> list[str]:
        """The files matching *pattern*; the wildcards may only be in its last component."""
        parent, _, name = pattern.rpartition("/")
        if _GLOB.search(parent):
            raise ConfigurationError(f"{pattern}: a glob may only have wildcards in its last "
                                     f"part on this storage")
        if self.kind(parent) != "dir":
            return []
        return sorted(p for p in self.list_files(parent) if fnmatch.fnmatchcase(self.name(p), name))

    def read_text(self, path: str) -> str:
        """A small text file (a ``.index``)."""
        parts = []
        with self.open(path) as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                parts.append(chunk)
        return b"".join(parts).decode("utf-8", "replace")

    # path arithmetic (``/``-separated; LocalStorage uses os.path)
    def name(self, path: str) -> str:
        return path.rstrip("/").rpartition("/")[2]

    def parent(self, path: str) -> str:
        return path.rstrip("/").rpartition("/")[0]

    def join(self, directory: str, name: str) -> str:
        return directory.rstrip("/") + "/" + name

    def is_absolute(self, path: str) -> bool:
        return True


class LocalStorage(Storage):
    """The local disk (paths as given; relative ones against the working directory)."""

    def kind(self, path: str) -> str | None:
        if os.path.isdir(path):
            return "dir"
        if os.path.isfile(path):
            return "file"
        return None

    def list_files(self, directory: str) -> list[str]:
        return [e.path for e in os.scandir(directory) if e.is_file()]

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def open(self, path: str, offset: int = 0) -> BinaryIO:
        f = open(path, "rb")
        if offset:
            f.seek(offset)
        return f

    def glob(self, pattern: str) -> list[str]:
        return [m for m in sorted(glob.glob(pattern)) if os.path.isfile(m)]

    def name(self, path: str) -> str:
        return os.path.basename(path)

    def parent(self, path: str) -> str:
        return os.path.dirname(path)

    def join(self, directory: str, name: str) -> str:
        return os.path.join(directory, name)

    def is_absolute(self, path: str) -> bool:
        return os.path.isabs(path)


LOCAL = LocalStorage()


def expand(items: Iterable[str | os.PathLike], storage: Storage = LOCAL) -> list[str]:
    """Files, globs, directories and ``.index`` files as the binlog files they mean, in order.

    A directory contributes the files listed in its ``*.index`` file when there is one, else its
    files named like ``name.000123``. Order is that of the arguments, each expanded in order.
    """
    out: list[str] = []
    for item in items:
        item = os.fspath(item)
        if storage is LOCAL and url_scheme(item):
            item = local_path(item)
        kind = storage.kind(item)
        if kind == "dir":
            files = sorted(storage.list_files(item), key=storage.name)
            indexes = [f for f in files if storage.name(f).endswith(".index")]
            if indexes:
                out += from_index(indexes[0], storage)
            else:
                out += [f for f in files if NUMBERED.search(storage.name(f))]
        elif kind == "file" and item.endswith(".index"):
            out += from_index(item, storage)
        elif kind == "file":
            out.append(item)
        else:
            matches = storage.glob(item) if _GLOB.search(item) else []
            if not matches:
                raise ConfigurationError(f"no binlog file at {item!s}: give a file, a directory of "
                                         f"binlogs, a .index file or a glob")
            out += matches
    return out


def from_index(index: str, storage: Storage = LOCAL) -> list[str]:
    """The files a ``.index`` file lists that exist beside it (or at their absolute path)."""
    files = []
    here = storage.parent(index)
    for line in storage.read_text(index).splitlines():
        line = line.strip()
        if not line:
            continue
        f = line if storage is LOCAL and os.path.isabs(line) else \
            storage.join(here, line.replace("\\", "/").rpartition("/")[2])
        if storage.kind(f) == "file":
            files.append(f)
    return files
