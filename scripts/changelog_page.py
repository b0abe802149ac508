"""docs/changelog.md: the repository's CHANGELOG.md on the documentation site, its links made relative to docs/.

    uv run python scripts/changelog_page.py     # rewrite docs/changelog.md after editing CHANGELOG.md

``tests/test_docs_generated.py`` fails when the page differs from what this renders. Standard library only.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "CHANGELOG.md"
OUT = ROOT / "docs" / "changelog.md"
HEADER = "<!-- Generated from CHANGELOG.md by scripts/changelog_page.py: edit CHANGELOG.md, then run it. -->\n"


def render(text: str | None = None) -> str:
    """The page: CHANGELOG.md with its ``docs/...`` links relative to the docs folder."""
    text = SOURCE.read_text() if text is None else text
    return HEADER + re.sub(r"\]\(docs/", "](", text)


def main() -> None:
    OUT.write_text(render())


if __name__ == "__main__":
    main()
