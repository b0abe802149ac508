"""Benchmark tables from docs/results/benchmarks.json, rendered into the guides' ``bench-<name>`` blocks.

    uv run python scripts/benchmark_results.py render            # rewrite every bench-<name> block in the docs
    uv run python scripts/benchmark_results.py render --check    # exit 1 if a block disagrees with the results file

Each table of the results file is one measurement: its rows, the command that printed them, the date, the commit
measured and the machine (described under ``machines``). A table without them is refused. ``command`` is a command
or a list of them (shown each in code); what is not a command goes in ``note``. A guide shows the rows, the
command and the machine; the date and the commit stay in the results file.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_text import ROOT, load_records, replace_block, stale_exit, table

RESULTS = ROOT / "docs" / "results" / "benchmarks.json"
REQUIRED = ("name", "title", "command", "date", "commit", "machine", "columns", "rows")
"""What every table must say: what it shows, and where, when and how it was measured."""
PREFIX = "bench-"
BLOCK = re.compile(r"<!-- BEGIN GENERATED (" + PREFIX + r"[\w-]+):")


def load(path: Path = RESULTS) -> dict[str, Any]:
    results = load_records(path, "tables", REQUIRED)
    names: set[str] = set()
    for record in results["tables"]:
        if record["name"] in names:
            raise SystemExit(f"{path}: two tables are named {record['name']!r}")
        names.add(record["name"])
        width = len(record["columns"])
        if any(len(row) != width for row in record["rows"]):
            raise SystemExit(f"{path}: table {record['name']!r} has a row without {width} cells")
        if not all(isinstance(cell, str) for row in [record["columns"], *record["rows"]] for cell in row):
            raise SystemExit(f"{path}: table {record['name']!r} has a cell that is not text (write figures as shown)")
    return results


def render(results: dict[str, Any], name: str) -> str:
    """The block of table ``name``: its title, rows, command and machine."""
    by_name = {record["name"]: record for record in results["tables"]}
    if name not in by_name:
        raise SystemExit(f"no table {name!r} in {RESULTS}")
    record = by_name[name]
    lines = [f"{record['title']}:", "", table(record["columns"], record["rows"], record.get("align", "")), ""]
    command = record["command"]
    shown = "; ".join(f"`{c}`" for c in ([command] if isinstance(command, str) else command))
    source = f"Measured with {shown} on {results['machines'][record['machine']]}."
    if record.get("note"):
        source += f" {record['note']}"
    lines.append(source)
    return "\n".join(lines)


def guides() -> list[Path]:
    """The checked-in Markdown files that hold a ``bench-`` block."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("examples/*/README.md"))]
    return [p for p in paths if BLOCK.search(p.read_text())]


def rendered(path: Path, results: dict[str, Any]) -> str:
    text = path.read_text()
    for block in BLOCK.findall(text):
        text = replace_block(text, block, render(results, block.removeprefix(PREFIX)))
    return text


def stale(results: dict[str, Any]) -> list[Path]:
    """The files whose ``bench-`` blocks differ from what the results file renders to."""
    return [path for path in guides() if rendered(path, results) != path.read_text()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    show = sub.add_parser("render")
    show.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    results = load()
    if args.check:
        stale_exit(stale(results), RESULTS, "benchmark_results.py")
        return
    for path in guides():
        path.write_text(rendered(path, results))


if __name__ == "__main__":
    main()
