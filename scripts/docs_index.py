"""Generate docs/index.md, the site's home page, from README.md: its opening (what pgcdc is,
the diagram) and its documentation table, with the links rewritten for the site. One source:
edit README.md, not the page.

    .venv/bin/python scripts/docs_index.py           # rewrite the page (what `make docs` runs)
    .venv/bin/python scripts/docs_index.py --check   # exit 1 when the page is out of date

tests/unit/test_docs.py fails when the committed page differs from what this prints.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "index.md"
COMMAND = ".venv/bin/python scripts/docs_index.py (or: make docs)"

_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
# Files outside docs/ that the site has a page for.
_SITE_PAGES = {"schemas/README.md": "events.md"}


def _site_link(match: re.Match[str]) -> str:
    """A README link as the site needs it: `docs/x.md` -> `x.md`; a file outside docs/ without
    a page of its own is named as text (the strict build refuses links out of docs/)."""
    text, target = match.group(1), match.group(2)
    path, sep, anchor = target.partition("#")
    if re.match(r"[a-z]+:", target):
        return match.group(0)
    if path.startswith("docs/"):
        return f"[{text}]({path[len('docs/'):]}{sep}{anchor})"
    if path in _SITE_PAGES:
        return f"[{text}]({_SITE_PAGES[path]}{sep}{anchor})"
    return f"{text} (`{path}`)"


def _section(readme: str, heading: str) -> str:
    """The body of README's `## heading` section, up to the next `## `."""
    start = readme.index(f"\n## {heading}\n") + len(f"\n## {heading}\n")
    end = readme.find("\n## ", start)
    return readme[start:end if end >= 0 else len(readme)].strip("\n")


def render(readme: str) -> str:
    opening = readme.split("\n", 1)[1].split("\n## ", 1)[0].strip("\n")
    table = "\n".join(line for line in _section(readme, "Documentation").splitlines()
                      if line.startswith("|"))
    return (f"<!-- Generated from README.md by {COMMAND}: edit README.md, not this page. -->\n"
            "# pgcdc documentation\n\n"
            f"{_LINK.sub(_site_link, opening)}\n\n"
            "The repository's `README.md` is the front door: the two commands (`make demo`, "
            "`make test`)\nand a quick start of each program. These pages hold the rest, by task. "
            "Names in `code`\nsuch as `connector/config.py` are files of the repository.\n\n"
            f"{_LINK.sub(_site_link, table)}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/index.md is stale")
    args = parser.parse_args(argv)
    page = render((ROOT / "README.md").read_text())
    if args.check:
        if OUT.read_text() != page:
            print(f"docs/index.md is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
