"""The README's compatibility table from the compatibility suite's JUnit XML files.

::

    python -m tools.compat_table DIR                  # print the table (Markdown)
    python -m tools.compat_table DIR --readme README.md   # and put it into the README

Each ``DIR/pyspark-<version>-py<python>.xml`` is one run of pytest (``.ci/run`` writes them:
one per PySpark environment made by :mod:`tools.spark_env`, and the main run).  The tests of the
suite carry a ``compat`` property naming their feature (``@pytest.mark.compat("feature")``,
see ``tests/conftest.py``); the others only count in the closing line (every test case of every
run: ``total: N passed, N failed, N skipped, N expected failures``).  A cell says how many of
the feature's tests passed, and how many failed, were skipped, or failed as expected (a test
marked ``xfail`` for a known defect).  The README's table lies between the lines :data:`BEGIN`
and :data:`END`.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

BEGIN = "<!-- compat-table: python -m tools.compat_table -->"
END = "<!-- /compat-table -->"
_NAME = re.compile(r"^pyspark-(?P<spark>[0-9][^-]*)-py(?P<python>[0-9.]+)\.xml$")
#: the server of the table: test cases run on another one (``[mysql-9.7]``) count in the
#: closing line only
SERVER = "mariadb-10.11"
_SERVER_ID = re.compile(r"(?:mysql|mariadb)-\d+\.\d+")


def _key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", version))


#: the key of the test cases outside the suite (counted in :func:`totals` only)
OTHER = ""


#: the outcomes counted, in the order a cell names them
RESULTS = ("passed", "failed", "skipped", "xfailed")
#: how a cell names a count of each (singular, plural)
_NAMES = {"failed": ("failed", "failed"), "skipped": ("skipped", "skipped"),
          "xfailed": ("expected failure", "expected failures")}


def _result(case) -> str:
    skipped = case.find("skipped")
    if skipped is not None:     # pytest writes an xfail as <skipped type="pytest.xfail" ...>
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "passed"


def _count(n: int, result: str) -> str:
    one, many = _NAMES[result]
    return f"{n} {one if n == 1 else many}"


def outcomes(path: Path) -> dict[str, dict[str, int]]:
    """feature -> {result: n} (:data:`RESULTS`) of one JUnit XML file (the test cases outside
    the suite under :data:`OTHER`)."""
    out: dict[str, dict[str, int]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        feature = next((p.get("value") for p in case.iter("property")
                        if p.get("name") == "compat"), OTHER)
        if any(s != SERVER for s in _SERVER_ID.findall(case.get("name", ""))):
            feature = OTHER
        counts = out.setdefault(feature, dict.fromkeys(RESULTS, 0))
        counts[_result(case)] += 1
    return out


def runs(directory: Path) -> list[tuple[str, str, dict]]:
    """(PySpark version, Python version, outcomes) of each file, by PySpark version."""
    found = []
    for path in directory.glob("pyspark-*.xml"):
        m = _NAME.match(path.name)
        if m:
            found.append((m["spark"], m["python"], outcomes(path)))
    return sorted(found, key=lambda r: _key(r[0]))


def _cell(counts: dict | None) -> str:
    if not counts:
        return "–"
    total = sum(counts.values())
    text = f"{counts['passed']}/{total} passed"
    extra = [_count(counts[k], k) for k in RESULTS[1:] if counts[k]]
    return text + (f" ({', '.join(extra)})" if extra else "")


def table(found: list[tuple[str, str, dict]]) -> str:
    features = sorted({f for _, _, o in found for f in o} - {OTHER})
    head = ["feature"] + [f"PySpark {s} (Python {p})" for s, p, _ in found]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for feature in features:
        lines.append("| " + " | ".join([feature] + [_cell(o.get(feature)) for _, _, o in found])
                     + " |")
    return "\n".join(lines)


def totals(found: list[tuple[str, str, dict]]) -> dict[str, int]:
    """The outcomes of every test case of every run."""
    out = dict.fromkeys(RESULTS, 0)
    for _, _, o in found:
        for counts in o.values():
            for k, n in counts.items():
                out[k] += n
    return out


def into_readme(readme: Path, text: str) -> None:
    content = readme.read_text(encoding="utf-8")
    if BEGIN not in content or END not in content:
        raise SystemExit(f"compat_table: {readme} has no lines {BEGIN!r} .. {END!r}")
    before, rest = content.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    readme.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.compat_table", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("directory", type=Path, help="the JUnit XML files (pyspark-*-py*.xml)")
    ap.add_argument("--readme", type=Path, help="put the table into this README")
    args = ap.parse_args(argv)
    found = runs(args.directory)
    if not found:
        print(f"compat_table: no pyspark-*-py*.xml in {args.directory}", file=sys.stderr)
        return 2
    text = table(found)
    print(text)
    if args.readme:
        into_readme(args.readme, text)
    t = totals(found)
    print(f"all runs: {len(found)}")
    print(f"total: {t['passed']} passed, " + ", ".join(_count(t[k], k) for k in RESULTS[1:]))
    return 1 if t["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
