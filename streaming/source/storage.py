"""Binlog files on object stores and HDFS for the Spark source, through ``pyarrow.fs``.

``spark.read.format("binlog-cdc").load("s3://bucket/binlogs/")`` (and ``gs://``, ``abfs://``,
``az://``, ``hdfs://``, ``viewfs://``, ``file://``): the driver lists the files, one task per file
opens its own filesystem from the same options and streams the file (1 MiB reads fed to the
sans-IO parser). ``pyarrow.fs`` is the filesystem layer: the ``spark`` extra already needs
pyarrow, its S3, GCS, Azure and HDFS clients are native (Apache Arrow's C++), maintained with
pyarrow, and need no further package.

Settings come from source options ``fs.<scheme>.<name>`` (Spark lower-cases option names; they
are matched without case), which travel with the plan to the executors:

* ``fs.s3.endpoint``: ``http://127.0.0.1:9000`` (MinIO, Ceph, moto...): host:port and scheme;
  ``fs.s3.accessKey``, ``fs.s3.secretKey``, ``fs.s3.sessionToken``, ``fs.s3.region``,
  ``fs.s3.anonymous`` (true/false), ``fs.s3.pathStyle`` (true: path-style addressing)
* any other ``fs.<scheme>.<keyword>`` is passed as a keyword of the pyarrow filesystem class
  (``S3FileSystem``, ``GcsFileSystem``, ``AzureFileSystem``, ``HadoopFileSystem``): ``true`` /
  ``false`` become booleans, digits integers.

Without options the filesystem's own defaults apply (``AWS_*`` environment variables, instance
credentials, ``GOOGLE_APPLICATION_CREDENTIALS``...) -- on the executors, whose environment is
not the driver's.
"""

from __future__ import annotations

from typing import BinaryIO, Mapping

from cdc.binlog.files import binlog_paths
from cdc.binlog.storage import LOCAL, Storage, url_scheme
from cdc.errors import ConfigurationError

#: The option prefix of filesystem settings.
PREFIX = "fs."

_ALIASES = {
    "s3": {"endpoint": "endpoint_override", "accesskey": "access_key",
           "secretkey": "secret_key", "sessiontoken": "session_token",
           "region": "region", "anonymous": "anonymous",
           "pathstyle": "force_virtual_addressing"},
    "gs": {"endpoint": "endpoint_override", "anonymous": "anonymous",
           "accesstoken": "access_token", "projectid": "project_id"},
    "abfs": {"accountname": "account_name", "accountkey": "account_key",
             "endpoint": "blob_storage_authority"},
}
_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs", "abfs": "abfs",
            "abfss": "abfs", "az": "abfs", "hdfs": "hdfs", "viewfs": "hdfs", "file": "file"}
_SECRET_WORDS = ("secret", "key", "token", "password", "credential")


def storage_settings(options: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The ``fs.<scheme>.<name>`` options as ``{scheme: {name (lower case): value}}``."""
    out: dict[str, dict[str, str]] = {}
    for k, v in options.items():
        k = str(k).lower()
        if not k.startswith(PREFIX):
            continue
        scheme, _, name = k[len(PREFIX):].partition(".")
        if not scheme or not name:
            raise ConfigurationError(f"option {k!r}: filesystem settings are spelled "
                                     f"fs.<scheme>.<name>, e.g. fs.s3.endpoint")
        out.setdefault(_SCHEMES.get(scheme, scheme), {})[name] = str(v)
    return out


def redacted(settings: Mapping[str, Mapping[str, str]]) -> dict:
    """*settings* with the values of secret-looking names replaced by ``***`` (for messages)."""
    return {s: {k: ("***" if any(w in k for w in _SECRET_WORDS) else v) for k, v in kv.items()}
            for s, kv in settings.items()}


def _value(text: str):
    t = text.strip()
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if t.isdigit():
        return int(t)
    return t


def _arrow_kwargs(scheme: str, settings: Mapping[str, str]) -> dict:
    aliases = _ALIASES.get(scheme, {})
    kw = {}
    for name, text in settings.items():
        key = aliases.get(name, name)
        value = _value(text)
        if scheme == "s3" and key == "endpoint_override":
            proto, sep, rest = str(value).partition("://")
            if sep:
                kw["scheme"] = proto
                value = rest.rstrip("/")
        if scheme == "s3" and key == "force_virtual_addressing":
            value = not value          # pathStyle=true: no virtual addressing
        kw[key] = value
    return kw


def filesystem(scheme: str, settings: Mapping[str, Mapping[str, str]], authority: str):
    """A ``pyarrow.fs`` filesystem for *scheme* with the settings of *scheme*."""
    import pyarrow.fs as pafs
    kind = _SCHEMES.get(scheme)
    kw = _arrow_kwargs(kind, settings.get(kind, {})) if kind else {}
    try:
        if kind == "s3":
            return pafs.S3FileSystem(**kw)
        if kind == "gs":
            return pafs.GcsFileSystem(**kw)
        if kind == "abfs":
            if "account_name" not in kw and "@" in authority:
                kw["account_name"] = authority.split("@", 1)[1].split(".", 1)[0]
            return pafs.AzureFileSystem(**kw)
        if kind == "hdfs":
            host, _, port = authority.partition(":")
            kw.setdefault("host", host or "default")
            if port:
                kw.setdefault("port", int(port))
            return pafs.HadoopFileSystem(**kw)
        if kind == "file":
            return pafs.LocalFileSystem(**kw)
    except TypeError as e:
        raise ConfigurationError(f"options fs.{scheme}.*: {e}; see the keywords of pyarrow.fs "
                                 f"for {scheme}://") from None
    except OSError as e:
        raise ConfigurationError(f"cannot open the {scheme}:// filesystem: {e}") from None
    raise ConfigurationError(f"{scheme}:// is not a filesystem binlog-cdc reads: use s3://, gs://, "
                             f"abfs://, hdfs:// or file:// (or a local path)")


class ArrowStorage(Storage):
    """Binlog files on a ``pyarrow.fs`` filesystem, spelled as URLs (``s3://bucket/key``)."""

    def __init__(self, scheme: str, authority: str, settings: Mapping[str, Mapping[str, str]]):
        self.scheme, self.authority = scheme, authority
        self.fs = filesystem(scheme, settings, authority)

    def _fs_path(self, url: str) -> str:
        rest = url.split("://", 1)[1]
        kind = _SCHEMES.get(self.scheme)
        if kind in ("s3", "gs"):
            return rest.rstrip("/")                       # bucket/key
        if kind == "abfs":
            container, _, path = rest.partition("/")
            return (container.split("@", 1)[0] + "/" + path).rstrip("/")
        if kind == "hdfs":
            return "/" + rest.partition("/")[2].rstrip("/")
        return "/" + rest.lstrip("/").rstrip("/") if rest else "/"    # file:///abs

    def _url(self, fs_path: str) -> str:
        kind = _SCHEMES.get(self.scheme)
        if kind in ("s3", "gs"):
            return f"{self.scheme}://{fs_path}"
        if kind == "abfs":
            container, _, path = fs_path.partition("/")
            at = self.authority.partition("@")[2]
            return f"{self.scheme}://{container}{'@' + at if at else ''}/{path}"
        if kind == "hdfs":
            return f"{self.scheme}://{self.authority}{fs_path}"
        return f"{self.scheme}://{fs_path}"

    def _call(self, what: str, url: str, fn):
        try:
            return fn()
        except (OSError, ValueError) as e:
            raise ConfigurationError(f"{what} {url}: {e}") from None

    def kind(self, path: str) -> str | None:
        import pyarrow.fs as pafs
        info = self._call("cannot look at", path, lambda: self.fs.get_file_info(self._fs_path(path)))
        if info.type == pafs.FileType.Directory:
            return "dir"
        if info.type == pafs.FileType.File:
            return "file"
        return None

    def list_files(self, directory: str) -> list[str]:
        import pyarrow.fs as pafs
        sel = pafs.FileSelector(self._fs_path(directory), recursive=False)
        infos = self._call("cannot list", directory, lambda: self.fs.get_file_info(sel))
        return [self._url(i.path) for i in infos if i.type == pafs.FileType.File]

    def size(self, path: str) -> int:
        return self._call("cannot look at", path,
                          lambda: self.fs.get_file_info(self._fs_path(path)).size)

    def open(self, path: str, offset: int = 0) -> BinaryIO:
        if offset:
            f = self._call("cannot open", path, lambda: self.fs.open_input_file(self._fs_path(path)))
            f.seek(offset)
            return f
        return self._call("cannot open", path,
                          lambda: self.fs.open_input_stream(self._fs_path(path)))


def storage_for(paths, settings: Mapping[str, Mapping[str, str]]) -> Storage:
    """The storage of *paths* (all on one filesystem): :data:`LOCAL` for plain paths."""
    schemes = {url_scheme(p) for p in paths}
    if schemes == {None} or not schemes:
        return LOCAL
    if len(schemes) > 1 or None in schemes:
        raise ConfigurationError(f"the paths of one read must be on one filesystem, not "
                                 f"{', '.join(sorted(str(s) for s in schemes))}")
    scheme = schemes.pop()
    authorities = {str(p).split("://", 1)[1].split("/", 1)[0] for p in paths}
    authority = sorted(authorities)[0] if _SCHEMES.get(scheme) in ("hdfs", "abfs") else ""
    if _SCHEMES.get(scheme) in ("hdfs", "abfs") and len(authorities) > 1:
        raise ConfigurationError(f"the {scheme}:// paths of one read must be on one cluster or "
                                 f"account, not {', '.join(sorted(authorities))}")
    return ArrowStorage(scheme, authority, settings)


def list_files(paths, settings: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The binlog files of *paths*, in order: local ones absolute (resolved where this runs, the
    driver: an executor's working directory is not the driver's), or URLs."""
    st = storage_for(paths, settings)
    if st is LOCAL:
        return [str(p.absolute()) for p in binlog_paths(paths)]
    return binlog_paths(paths, st)
