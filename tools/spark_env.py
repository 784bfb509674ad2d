"""A virtual environment per PySpark minor version, for the compatibility matrix.

::

    python3 -m tools.spark_env 4.2          # makes (once) and prints the venv's python
    python3 -m tools.spark_env 4.0 --refresh   # takes the newest patch release again
    python3 -m tools.spark_env --list       # the versions and the Python each one uses

    py=$(python3 -m tools.spark_env 4.1)
    PYTHONPATH=$PWD "$py" -m pytest -m compat

Each environment lives in ``~/.cache/binlog-cdc/venvs/pyspark-<minor>`` (``$XDG_CACHE_HOME``
if set) and holds the newest patch release of that PySpark minor version, the project's
dependencies (its ``spark`` and ``test`` extras, read from ``pyproject.toml``) and
``delta-spark`` where a release of it supports that Spark.  The project itself is not installed
there: run it with ``PYTHONPATH`` set to a checkout.  A complete environment has a marker file
naming what it was made from; a later call with the same requirements only prints the path.

The interpreter of each version is the first of :attr:`Release.pythons` found on the machine
(``pythonX.Y`` on ``PATH`` or under pyenv), else the running Python when the version runs there.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = ".binlog-cdc-complete"


@dataclass(frozen=True)
class Release:
    """One PySpark minor version of the matrix."""

    minor: str
    #: the Pythons it runs on, the one the matrix prefers first (spread so that each
    #: Python the package declares is run by some Spark)
    pythons: tuple[str, ...]
    #: the pip requirement of the delta-spark release supporting it (None: none does)
    delta_spark: str | None

    @property
    def pyspark(self) -> str:
        """The pip requirement of its newest patch release."""
        return f"pyspark=={self.minor}.*"


# delta-spark 4.4.1 declares pyspark>=4.0.1,<=4.2.0 (its jars come per Spark minor version:
# io.delta:delta-spark_4.0_2.13, _4.1_2.13, _4.2_2.13); no release supports Spark 4.3 yet.
# It is installed without its declared pins so that the newest patch release (4.2.1) stays.
DELTA_SPARK = "delta-spark==4.4.1"
DELTA_SPARK_DEPS = ("importlib_metadata>=1.0.0,<=8.7.1",)

RELEASES = {r.minor: r for r in (
    Release("4.0", ("3.10", "3.11", "3.12", "3.13"), DELTA_SPARK),
    Release("4.1", ("3.12", "3.11", "3.13", "3.10"), DELTA_SPARK),
    Release("4.2", ("3.13", "3.12", "3.11", "3.10"), DELTA_SPARK),
    # pyspark 4.3 (and pyarrow 26) need Python >= 3.11
    Release("4.3", ("3.11", "3.12", "3.13"), None),
)}


class SparkEnvError(Exception):
    """A matrix environment cannot be made (one line: what to do)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "binlog-cdc" / "venvs"


def venv_dir(minor: str) -> Path:
    return cache_dir() / f"pyspark-{minor}"


def venv_python(minor: str) -> Path:
    return venv_dir(minor) / "bin" / "python"


def release(minor: str) -> Release:
    try:
        return RELEASES[minor]
    except KeyError:
        raise SparkEnvError(f"unknown PySpark version {minor!r}: one of "
                            f"{', '.join(RELEASES)}") from None


# ---------------------------------------------------------------------------------------------
# the interpreter
# ---------------------------------------------------------------------------------------------

def _candidates(version: str) -> list[str]:
    found = []
    exe = shutil.which(f"python{version}")
    if exe:
        found.append(exe)
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found += sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/python{version}"))
    if "%d.%d" % sys.version_info[:2] == version:
        found.append(sys.executable)
    return found


def _probe(exe: str) -> tuple[str, str] | None:
    """(real executable, X.Y.Z) of an interpreter that can make a venv, or None."""
    try:
        out = subprocess.run([exe, "-c", "import sys, venv, ensurepip; print(sys.executable); "
                              "print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    return (lines[0], lines[1]) if out.returncode == 0 and len(lines) == 2 else None


def find_python(rel: Release) -> tuple[str, str]:
    """(interpreter, its X.Y.Z) for *rel*: the first of its Pythons that is here."""
    for version in rel.pythons:
        for exe in _candidates(version):
            probed = _probe(exe)
            if probed and probed[1].rpartition(".")[0] == version:
                return probed
    raise SparkEnvError(f"PySpark {rel.minor} needs one of Python {', '.join(rel.pythons)} "
                        f"with the venv module (Debian: apt-get install python3-venv)")


# ---------------------------------------------------------------------------------------------
# the requirements
# ---------------------------------------------------------------------------------------------

def _load_toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:          # Python 3.10
        import tomli as tomllib
    return tomllib.loads(path.read_text(encoding="utf-8"))


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _name(requirement: str) -> str:
    m = _NAME.match(requirement)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def requirements(rel: Release, root: Path = ROOT) -> list[str]:
    """The pip requirements of *rel*'s environment: the project's dependencies and its
    ``spark`` and ``test`` extras, PySpark pinned to the minor version, and the build
    requirements (the optional C row decoder is built with that interpreter)."""
    project = _load_toml(root / "pyproject.toml")
    extras = project["project"].get("optional-dependencies", {})
    reqs = list(project["build-system"]["requires"])
    for req in (project["project"]["dependencies"] + extras.get("spark", [])
                + extras.get("test", [])):
        if _name(req) == "pyspark":
            req = rel.pyspark
        if req not in reqs:
            reqs.append(req)
    if rel.pyspark not in reqs:
        reqs.append(rel.pyspark)
    return reqs


# ---------------------------------------------------------------------------------------------
# the environment
# ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)    # another process making the same venv: wait for it
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd: list[str]) -> None:
    print("[spark_env] " + " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=sys.stderr, stdin=subprocess.DEVNULL)
    if done.returncode:
        raise SparkEnvError(f"{' '.join(cmd[:4])} ... failed (exit {done.returncode})")


def _marker(minor: str) -> dict | None:
    try:
        return json.loads((venv_dir(minor) / MARKER).read_text())
    except (OSError, ValueError):
        return None


def installed_pyspark(minor: str) -> str | None:
    """The PySpark version of a complete environment (None: not made yet)."""
    marker = _marker(minor)
    return marker.get("pyspark") if marker else None


def ensure(minor: str, refresh: bool = False, root: Path = ROOT) -> Path:
    """Make *minor*'s environment unless a complete one with the same requirements exists;
    *refresh* takes the newest patch releases again.  Returns its python executable."""
    rel = release(minor)
    reqs = requirements(rel, root)
    with _locked(cache_dir() / f"pyspark-{minor}.lock"):
        marker = _marker(minor)
        if marker and not refresh and set(reqs) <= set(marker.get("requirements", ())) \
                and marker.get("delta_spark") == rel.delta_spark:
            return venv_python(minor)
        exe, version = find_python(rel)
        target = venv_dir(minor)
        if marker is None or marker.get("python") != version or not venv_python(minor).exists():
            shutil.rmtree(target, ignore_errors=True)
            _run([exe, "-m", "venv", str(target)])
        (target / MARKER).unlink(missing_ok=True)
        py = str(venv_python(minor))
        pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run(pip + ["--upgrade", "pip"])
        _run(pip + (["--upgrade", "--upgrade-strategy", "eager"] if refresh else []) + reqs)
        if rel.delta_spark:
            _run(pip + ["--no-deps", rel.delta_spark, *DELTA_SPARK_DEPS])
        got = subprocess.run([py, "-c", "import pyspark; print(pyspark.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
        if not got.startswith(minor + "."):
            raise SparkEnvError(f"{target} has PySpark {got}, not {minor}")
        (target / MARKER).write_text(json.dumps(
            {"requirements": reqs, "delta_spark": rel.delta_spark, "python": version,
             "pyspark": got}, indent=1) + "\n")
    return venv_python(minor)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.spark_env",
                                 description="make a virtual environment per PySpark minor "
                                             "version and print its python executable")
    ap.add_argument("minor", nargs="?", help=f"one of {', '.join(RELEASES)}")
    ap.add_argument("--refresh", action="store_true",
                    help="install the newest patch releases again")
    ap.add_argument("--list", action="store_true", help="the versions of the matrix")
    args = ap.parse_args(argv)
    try:
        if args.list:
            for rel in RELEASES.values():
                print(f"{rel.minor}\tpython {'/'.join(rel.pythons)}\t"
                      f"pyspark {installed_pyspark(rel.minor) or '(not made)'}\t"
                      f"{rel.delta_spark or 'no delta-spark'}")
            return 0
        if not args.minor:
            ap.error("give a PySpark version (or --list)")
        print(ensure(args.minor, refresh=args.refresh))
        return 0
    except SparkEnvError as e:
        print(f"spark_env: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
