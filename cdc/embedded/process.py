"""What starting a private server process needs: a free port, its programs, its log's tail, and a
child that dies with us (Linux)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Iterable

__all__ = ["free_port", "find_executable", "running_as_root", "log_tail", "option_key",
           "die_with_parent_fn", "INSTALL_HINT"]

_SEARCH_DIRS = ("/usr/sbin", "/usr/libexec", "/usr/local/sbin", "/usr/local/bin", "/usr/bin",
                "/usr/local/mysql/bin")
_MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to 107 bytes on Linux
INSTALL_HINT = ("install it with `apt-get install mariadb-server` (Debian/Ubuntu) "
                 "or point the MARIADBD environment variable at the binary")


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def find_executable(names: Iterable[str], env_var: str | None = None,
                    extra_dirs: Iterable[str] = ()) -> str | None:
    """Find the first of ``names`` in ``$env_var``, ``PATH``, then the usual system dirs."""
    if env_var and os.environ.get(env_var):
        candidate = os.environ[env_var]
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    names = list(names)
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    for d in (*extra_dirs, *_SEARCH_DIRS):
        for name in names:
            candidate = os.path.join(d, name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None



def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no error log)"
    return "\n".join(text.splitlines()[-lines:])


def option_key(key: str) -> str:
    return key.strip().replace("-", "_")


# --- tie the server's life to ours (Linux) -----------------------------------------------------

def die_with_parent_fn():
    """A ``preexec_fn`` that makes the child get SIGTERM when we die, or ``None``.

    PR_SET_PDEATHSIG fires when the *thread* that forked dies, so it is only used from the
    main thread, whose end is the end of the process.  libc is loaded here, in the parent:
    the child (between fork and exec) must not import anything.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None
    sig = int(signal.SIGTERM)

    def preexec() -> None:
        prctl(1, sig)  # PR_SET_PDEATHSIG

    return preexec
