"""What every command line of binlog-cdc has (``binlog-cdc``, ``python3 -m streaming.job``,
``python3 -m streaming.demo``): ``--version``, ``--log-level``/``-q``, and the one format of its
log on stderr: ``LEVEL time message`` (warnings such as a lost connection being retried)."""

from __future__ import annotations

import argparse
import logging
import sys

LEVELS = ("debug", "info", "warning", "error")
FORMAT = "%(levelname)s %(asctime)s %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


def _level(text: str) -> str:
    if text.lower() not in LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LEVELS)}")
    return text.lower()


def add_entry_arguments(p: argparse.ArgumentParser, prog: str | None) -> None:
    """``--version`` (printed as *prog* and the release; none when *prog* is None: a
    subcommand's parser, whose ``--log-level``/``-q`` then only override the command's)
    ``--log-level`` and ``-q``."""
    from cdc import __version__
    if prog is not None:
        p.add_argument("--version", action="version", version=f"{prog} {__version__}",
                       help="print the version and exit")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--log-level", type=_level, metavar="LEVEL",
                   default="warning" if prog is not None else argparse.SUPPRESS,
                   help=f"the least severe log messages shown on stderr: {', '.join(LEVELS)} "
                        f"(default: warning)")
    g.add_argument("-q", "--quiet", dest="log_level", action="store_const", const="error",
                   default=argparse.SUPPRESS,
                   help="show errors only (the same as --log-level error)")


def configure_logging(args) -> None:
    """Log to stderr at the level of ``--log-level``/``-q``, one ``LEVEL time message`` line per
    record (once per process: a handler already on the root logger stays)."""
    level = getattr(logging, getattr(args, "log_level", "warning").upper())
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
        root.addHandler(handler)
    root.setLevel(level)
    # Py4J (Spark's bridge) logs every call at DEBUG and INFO: only its problems are news
    logging.getLogger("py4j").setLevel(max(level, logging.WARNING))
