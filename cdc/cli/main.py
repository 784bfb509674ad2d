"""``binlog-cdc`` / ``python -m cdc``: the command line (decode files, tail a server, measure
lag). User mistakes and server problems (every :class:`~cdc.errors.CdcError`) exit with code 2
and one line on stderr, never a traceback."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from cdc.cli.check import add_check_arguments, run_check
from cdc.cli.decode import add_decode_arguments, cmd_decode
from cdc.cli.entry import add_entry_arguments, configure_logging
from cdc.cli.lag import add_lag_arguments, run_lag
from cdc.cli.tail import add_tail_arguments, run_tail
from cdc.errors import CdcError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="binlog-cdc",
                                description="binlog-cdc: decode binlog files, tail a server, "
                                            "check it, measure lag")
    add_entry_arguments(p, "binlog-cdc")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("decode", help="decode binlog files (like mysqlbinlog -v, or JSON lines)")
    add_decode_arguments(d)
    d.set_defaults(func=cmd_decode)
    t = sub.add_parser("tail", help="stream live changes from a server")
    add_tail_arguments(t)
    t.set_defaults(func=run_tail)
    c = sub.add_parser("check", help="check a server before a first stream: reachable, "
                                     "privileges, binlog settings, tables, keys, retention")
    add_check_arguments(c)
    c.set_defaults(func=run_check)
    lg = sub.add_parser("lag", help="measure how far a replica of a server is behind it "
                                    "(seconds, bytes, tx/s, rows/s; optional PNG plot)")
    add_lag_arguments(lg)
    lg.set_defaults(func=run_lag)
    for command in (d, t, c, lg):
        add_entry_arguments(command, None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args)
    try:
        return args.func(args) or 0
    except CdcError as e:
        sys.stderr.write(f"binlog-cdc: error: {e}\n")
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
