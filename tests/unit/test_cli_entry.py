"""What every command line of binlog-cdc has (``binlog-cdc``, ``python -m streaming.job``,
``python -m streaming.demo``): ``--version``, ``--log-level`` (its log format on stderr:
tests/live/test_cli_logging.py), help text for every option, the table options' spellings, the job's plain ``--help`` and its
``--example`` config."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _project_version() -> str:
    try:
        import tomllib
    except ImportError:         # Python 3.10: the same parser as a package (the job's too)
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("version") or \
        re.search(r'__version__ = "([^"]+)"', (ROOT / "cdc" / "__init__.py").read_text())[1]


@pytest.mark.parametrize("argv,prog", [(["-m", "cdc"], "binlog-cdc"),
                                       (["-m", "streaming.job"], "binlog-cdc job"),
                                       (["-m", "streaming.demo"], "binlog-cdc demo")])
def test_version(argv, prog):
    r = _run(*argv, "--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{prog} {_project_version()}"


def test_a_wrong_log_level():
    r = _run("-m", "cdc", "--log-level", "loud", "decode", "x")
    assert r.returncode == 2 and "--log-level" in r.stderr and "loud" in r.stderr


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    from cdc.cli.main import build_parser
    from streaming.apps.demo import build_parser as demo_parser
    from streaming.apps.job import build_parser as job_parser
    main = build_parser()
    out = [("binlog-cdc", main), ("job", job_parser()), ("demo", demo_parser())]
    for action in main._actions:
        if isinstance(action, argparse._SubParsersAction):
            out += [(f"binlog-cdc {name}", p) for name, p in action.choices.items()]
    return out


def test_every_option_has_help():
    missing = [f"{prog} {'/'.join(a.option_strings) or a.dest}"
               for prog, p in _parsers() for a in p._actions
               if not isinstance(a, argparse._SubParsersAction)
               and (a.help is None or not a.help.strip())]
    assert missing == []


@pytest.mark.parametrize("command,value,expected", [
    (["decode", "--tables", "shop.*", "f.000001"], "shop.*", [["shop.*"]]),
    (["decode", "--include-tables", "a.x,b.*", "f.000001"], None, [["a.x", "b.*"]]),
    (["tail", "--host", "h", "--include-tables", "a.*", "b.y"], None, [["a.*"], ["b.y"]]),
    (["tail", "--host", "h", "--tables", "shop.*"], None, [["shop.*"]]),
])
def test_both_table_spellings_in_both_commands(command, value, expected):
    from cdc.cli.main import build_parser
    args = build_parser().parse_args(command)
    assert args.include_tables == expected


@pytest.mark.parametrize("command", ["decode", "tail"])
def test_one_table_spelling_documented(command):
    r = _run("-m", "cdc", command, "--help")
    assert r.returncode == 0
    assert "--include-tables" in r.stdout and "--exclude-tables" in r.stdout
    assert "--tables" not in r.stdout.replace("-tables", "")


def test_job_help_is_plain_text():
    r = _run("-m", "streaming.job", "--help")
    assert r.returncode == 0
    for markup in ("``", ":class:", ":func:", "::"):
        assert markup not in r.stdout, r.stdout
    assert "--example" in r.stdout and "--version" in r.stdout


def test_job_example_is_a_valid_config(tmp_path, monkeypatch):
    from streaming.apps.job import load_config
    r = _run("-m", "streaming.job", "--example")
    assert r.returncode == 0 and r.stderr == ""
    path = tmp_path / "job.toml"
    path.write_text(r.stdout)
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", "x")
    cfg = load_config(path)
    assert cfg.source["host"] and cfg.checkpoint and cfg.delta_path


def test_missing_job_config_says_how_to_get_the_example(tmp_path):
    r = _run("-m", "streaming.job", str(tmp_path / "nope.toml"))
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "does not exist" in line and "python3 -m streaming.job --example" in line, line
    assert "\n" not in line


def test_the_package_ships_the_example(tmp_path):
    # setuptools' build_py: what a wheel or an install copies of the packages
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "-d", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    shipped = tmp_path / "streaming" / "apps" / "job.example.toml"
    assert shipped.read_text().startswith("# An example binlog-cdc job")
