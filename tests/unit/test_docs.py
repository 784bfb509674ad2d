"""The user docs (README.md, docs/) and CONTRIBUTING.md say what the code does: the generated
tables match their owners, every option of the source and every flag of the commands is
documented, every job key too, the grants agree with cdc.replica.server, relative links resolve,
every ``bash runnable`` block runs (offline), and CI runs the README's test command. The
``sql runnable`` blocks run against real servers in tests/live/test_docs_live.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools import docs as docs_tool
from tools.docs import fenced_blocks, runnable

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
USER_DOCS = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
ALL_DOCS = [*USER_DOCS, ROOT / "CONTRIBUTING.md"]
#: pages written on other branches; the link check skips them until they are merged

def test_generated_tables_match_the_code():
    assert docs_tool.stale() == []


def test_every_source_option_is_in_the_options_table():
    from streaming.source.options import OPTIONS
    text = (DOCS / "source.md").read_text()
    table = text[text.index("<!-- generated: options"):text.index("<!-- end generated -->",
                                                                    text.index("<!-- generated: options"))]
    missing = [name for name in OPTIONS if f"| `{name}` |" not in table]
    assert not missing, missing
    for name, o in OPTIONS.items():         # every column filled
        assert o.type and o.meaning and o.applies, name
        assert set(o.applies) <= {"stream", "batch", "snapshot"}, name


def _flags(parser) -> dict[str, list[str]]:
    """{command: [option strings]} of an argparse parser and its subcommands."""
    import argparse
    out: dict[str, list[str]] = {"": []}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = [s for a in sub._actions for s in a.option_strings]
        else:
            out[""] += action.option_strings
    return out


def _documented(flag: str, text: str) -> bool:
    return re.search(rf"`{re.escape(flag)}[` =\[]", text) is not None or f"`{flag}," in text


@pytest.mark.parametrize("module, doc", [("cdc.cli.main", "cli.md"),
                                         ("streaming.apps.job", "job.md"),
                                         ("streaming.apps.demo", "job.md")])
def test_every_flag_is_documented(module, doc):
    import importlib
    parser = importlib.import_module(module).build_parser()
    text = (DOCS / doc).read_text()
    missing = sorted({f"{cmd} {flag}".strip() for cmd, flags in _flags(parser).items()
                      for flag in flags if not _documented(flag, text)})
    assert not missing, f"flags missing from docs/{doc}: {missing}"
    for cmd in _flags(parser):
        if cmd:
            assert f"## {cmd}" in text, f"docs/{doc} has no section for {cmd}"


def test_every_command_takes_the_common_flags():
    """docs/cli.md: every command takes --log-level and -q."""
    from cdc.cli.main import build_parser
    for cmd, flags in _flags(build_parser()).items():
        assert "--log-level" in flags and "-q" in flags, cmd


def test_every_job_key_is_documented():
    from streaming.apps import job
    text = (DOCS / "job.md").read_text()
    for section in job.SECTIONS:
        assert f"`[{section}]`" in text, section
    for key in (*job.DELTA_KEYS, *job.STREAM_KEYS, *job.METRICS_KEYS, *job.PASSWORD_KEYS,
                "master"):
        assert f"`{key}`" in text, key


def _grant_statements(sql: str) -> list[str]:
    lines = [ln for ln in sql.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() + ";" for s in "\n".join(lines).split(";") if s.strip()]


@pytest.mark.parametrize("flavor, version", [("mariadb", "10.11.19-MariaDB"),
                                             ("mariadb", "11.8.9-MariaDB"), ("mysql", "9.7.4")])
def test_grants_agree_with_the_server_knowledge(flavor, version):
    from cdc.replica.server import grant_statement, parse_server_version
    grant = grant_statement(parse_server_version(version), "'cdc'@'%'")
    conf = _grant_statements((ROOT / "conf" / f"grants-{flavor}.sql").read_text())
    assert grant in conf
    blocks = [body for info, body in fenced_blocks(DOCS / "server-setup.md")
              if runnable(info, "sql") == [flavor]]
    assert len(blocks) == 1 and _grant_statements(blocks[0]) == conf


_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_relative_links_resolve():
    broken = []
    for path in ALL_DOCS:
        for m in _LINK.finditer(path.read_text()):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            dest = path.parent / target
            if not dest.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif m.group(2) and dest.suffix == ".md" and m.group(2)[1:] not in _anchors(dest):
                broken.append(f"{path.relative_to(ROOT)}: {target}{m.group(2)}")
    assert not broken, broken


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a markdown file's headings."""
    out = set()
    for m in re.finditer(r"^#+ (.*)$", path.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


_HISTORY = re.compile(r"\b(Previously|previous stop|the issue's|issue \d+|as before|no longer|"
                      r"not any more)\b", re.I)


def test_reference_text_has_no_history():
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in ALL_DOCS
             for m in _HISTORY.finditer(p.read_text())]
    assert not found, found


def test_the_readme_is_short_and_has_the_compatibility_section():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "## Compatibility" in text and "MariaDB 10.11" in text and "MySQL 9.7" in text


RUNNABLE = [(p, body) for p in ALL_DOCS for info, body in fenced_blocks(p)
            if runnable(info, "bash") is not None]


@pytest.mark.parametrize("path, body", RUNNABLE,
                         ids=[f"{p.name}:{b.splitlines()[0][:40]}" for p, b in RUNNABLE])
def test_runnable_bash_blocks_run(path, body, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    bindir = Path(sys.executable).parent      # binlog-cdc and python3 of this interpreter
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    r = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, f"{path.name}: {body!r}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert "Traceback" not in r.stderr


def test_ci_runs_the_test_command_of_the_readme():
    """.ci/run takes the line after README.md's marker and its fence, as this does."""
    ci = (ROOT / ".ci" / "run").read_text()
    line = next(ln for ln in ci.splitlines() if ln.startswith("TEST_COMMAND="))
    extract = line.split("=", 1)[1].strip().removeprefix('"$(').removesuffix(')"')
    r = subprocess.run(["bash", "-c", extract], cwd=ROOT, capture_output=True, text=True)
    assert r.stdout.strip() == "python3 -m pytest -q", (extract, r.stdout, r.stderr)
