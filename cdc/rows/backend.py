"""Which row decoder runs: the compiled one (``cdc.rows._rowdecode``) or the pure-Python one.

Both give identical values (:mod:`cdc.rows.decode`).  The choice travels with the parser:
``BinlogParser(row_decoder=...)`` keeps it in its :class:`~cdc.binlog.events.Context`, each
rows event carries it, and :func:`cdc.rows.decode.decode_images` takes it.  A choice of
``None`` there means the process default: ``BINLOG_CDC_DECODER`` = ``auto`` (the compiled
decoder when it is built; the default), ``c`` or ``python``, read when this module is
imported; :func:`set_default_decoder` changes it at run time (tests force a decoder this way)
and :func:`active_decoder` says which one it is.
"""

from __future__ import annotations

import os

from cdc.errors import ConfigurationError

try:
    from cdc.rows import _rowdecode as rowdecode
except ImportError as _e:     # not built (no C compiler at install time): pure Python
    rowdecode = None
    C_MISSING: str | None = f"{type(_e).__name__}: {_e}"
    """Why the compiled decoder is not available (None when it is)."""
else:
    C_MISSING = None

__all__ = ["DECODER_ENV", "C_MISSING", "rowdecode", "c_decoder_available", "resolve_decoder",
           "set_default_decoder", "active_decoder", "uses_c"]

DECODER_ENV = "BINLOG_CDC_DECODER"
_CHOICES = ("auto", "c", "python")


def c_decoder_available() -> bool:
    """True when the compiled row decoder is built."""
    return rowdecode is not None


def resolve_decoder(name: str | None) -> str | None:
    """``"auto"`` (the compiled decoder when built), ``"c"`` or ``"python"`` (any case) as the
    decoder it means, ``"c"`` or ``"python"``; None stays None (the process default).

    Raises :class:`~cdc.errors.ConfigurationError` for another name, or for ``"c"`` when the
    compiled decoder is not built.
    """
    if name is None:
        return None
    choice = (name or "auto").strip().lower()
    if choice not in _CHOICES:
        raise ConfigurationError(f"{DECODER_ENV}={name!r}: expected auto, c or python")
    if choice == "c" and rowdecode is None:
        raise ConfigurationError(
            f"{DECODER_ENV}=c but the compiled row decoder cdc.rows._rowdecode is not built "
            f"({C_MISSING}); reinstall binlog-cdc with a C compiler and the Python headers "
            f"(pip install -e .), or use {DECODER_ENV}=auto")
    if choice == "auto":
        return "c" if rowdecode is not None else "python"
    return choice


# decoder choice -> use the compiled decoder; None: the process default (set_default_decoder)
_USES_C: dict[str | None, bool] = {"python": False, "auto": rowdecode is not None}
if rowdecode is not None:
    _USES_C["c"] = True


def uses_c(decoder: str | None) -> bool:
    """Whether the choice *decoder* (``"c"``, ``"python"``, ``"auto"`` or None: the process
    default) decodes with the compiled decoder."""
    try:
        return _USES_C[decoder]
    except KeyError:
        return resolve_decoder(decoder) == "c"


def set_default_decoder(name: str) -> str:
    """Set the process default (what a ``row_decoder`` of None means): ``"auto"``, ``"c"`` or
    ``"python"``, as ``BINLOG_CDC_DECODER`` does at import; returns the decoder it means."""
    chosen = resolve_decoder(name or "auto")
    _USES_C[None] = chosen == "c"
    return chosen


def active_decoder() -> str:
    """``"c"`` (cdc.rows._rowdecode) or ``"python"``: the process default decoder, which rows
    events of a parser made without ``row_decoder`` use."""
    return "c" if _USES_C[None] else "python"


set_default_decoder(os.environ.get(DECODER_ENV, "auto"))
