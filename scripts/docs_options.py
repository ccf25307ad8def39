"""Generate docs/reference/options.md: every option of every `pgcdc` command and every YAML key
of `pgcdc run`, with its default and meaning, read from the argparse parsers and from the
declarations they are derived from (connector/options.py): `connector.config.Config`'s fields,
their defaults and options (help, the page that explains more), and `MergeConfig`'s.

    .venv/bin/python scripts/docs_options.py           # rewrite the page (what `make docs` runs)
    .venv/bin/python scripts/docs_options.py --check   # exit 1 when the page is out of date

The page is generated whole: edit the options declared in `Config` or `MergeConfig` (or a
command's own parser), not the page. tests/unit/test_docs.py fails when the committed page
differs from what this prints.
A script importing product code; product code never imports it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference" / "options.md"
COMMAND = ".venv/bin/python scripts/docs_options.py (or: make docs)"

# Environment variables that become parser defaults (spark_jobs/runtime/config.py reads them when it
# builds its parser): cleared while the parsers are built, so the page does not depend on the
# shell that generated it.
_ENV = ("PGCDC_DSN", "KAFKA_BOOTSTRAP_SERVERS", "SCHEMA_REGISTRY_URL", "PGCDC_SPARK_JARS")

# Commands that read `Config` (connector.config.load): an option left unset takes the Config
# default. None: every option named like a Config field; a set: only those.
CONFIG_COMMANDS: dict[str, set[str] | None] = {
    "run": None, "status": None, "snapshot": None, "verify": {"dsn"},
}


def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """(command, parser) of every `pgcdc` command, `pgcdc merge`'s two option sets included."""
    saved = {name: os.environ.pop(name) for name in _ENV if name in os.environ}
    try:
        from connector.cli import build_parser
        from spark_jobs.runtime.config import parser as merge_parser
        from spark_jobs.runtime.submit import spark_options_parser

        out: list[tuple[str, argparse.ArgumentParser]] = []
        for name, sub in _subcommands(build_parser()):
            if name == "merge":
                out.append(("merge (Spark options)", spark_options_parser()))
                out.append(("merge", merge_parser("pgcdc merge")))
            else:
                out.append((name, sub))
        return out
    finally:
        os.environ.update(saved)


def _subcommands(parser: argparse.ArgumentParser, prefix: str = ""
                 ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
                if nested:
                    yield from _subcommands(sub, f"{prefix}{name} ")
                else:
                    yield f"{prefix}{name}", sub


def config_default(name: str) -> str:
    from connector.config import ENV_DEFAULTS, Config

    if name in ENV_DEFAULTS:
        return f"`${ENV_DEFAULTS[name]}`"
    f = next(f for f in fields(Config) if f.name == name)
    value = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[operator]
    if name.endswith("_bytes") and isinstance(value, int) and value >= 1 << 20:
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
            if value % size == 0:
                return f"{value // size} {unit}"
    return _value(value)


def _value(value: Any) -> str:
    if value is None or value == [] or value == () or value == {}:
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{v}`" for v in value)
    return f"`{value}`"


def option_name(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    names = " / ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    if action.metavar is not None:
        metavar = str(action.metavar)
    elif action.choices is not None:
        metavar = "|".join(str(c) for c in action.choices)
    else:
        metavar = action.dest.upper()
    return f"`{names} {metavar}`"


def default_of(command: str, action: argparse.Action,
               parser: argparse.ArgumentParser | None = None) -> str:
    config = CONFIG_COMMANDS.get(command, set())
    for group in parser._mutually_exclusive_groups if parser else ():
        if group.required and action in group._group_actions:
            others = [o.option_strings[0] for o in group._group_actions if o is not action]
            return "required, or " + " / ".join(f"`{o}`" for o in others)
    if action.default is None and (config is None or action.dest in config):
        from connector.config import Config

        if action.dest in {f.name for f in fields(Config)}:
            return config_default(action.dest)
    if action.required:
        return "required"
    if isinstance(action, argparse._StoreTrueAction) and action.default is False:
        return "off"
    return _value(action.default)


def cell(text: str) -> str:
    """Help text as one Markdown table cell."""
    text = " ".join(text.split())
    text = text.replace("|", "&#124;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"(?<![`\w])\*", r"\\*", text)


def meaning(name: str) -> str:
    """A YAML-only key's help, declared with its `Config` field."""
    from connector.config import Config
    from connector.options import declared, describe

    return next(describe(opt) for f, opt in declared(Config) if f.name == name)


def more(dest: str) -> str:
    """A link to the page that explains a `Config` setting at length (checked by `mkdocs build
    --strict`), declared with its field (`more=`)."""
    from connector.config import Config
    from connector.options import declared

    page = next((opt.more for f, opt in declared(Config) if f.name == dest), None)
    return f" [More](../{page})" if page else ""


def render() -> str:
    from connector.config import Config

    out = [
        "# Command options and YAML keys",
        "",
        "<!-- Generated by scripts/docs_options.py from the argparse parsers and",
        "     connector.config.Config: do not edit; run `make docs` to regenerate. -->",
        "",
        "Every option of every `pgcdc` command, with its default and meaning, generated from the",
        "commands' own parsers (the text `--help` prints) and, for `pgcdc run`, from its",
        "configuration (`connector/config.py`). Precedence, the YAML file and secrets:",
        "[Configuration](../configuration.md). `pgcdc COMMAND --help` prints the same.",
        "",
    ]
    commands = parsers()
    out.append("Commands: " + ", ".join(
        f"[`pgcdc {name}`](#{anchor(name)})" for name, _ in commands) + ".")
    config_fields = {f.name for f in fields(Config)}
    for name, parser in commands:
        actions = [a for a in parser._actions
                   if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
                   and a.dest != "help"]
        out += ["", f"## pgcdc {name}", ""]
        if parser.description and name != "run":
            out += [cell(parser.description.split("\n\n")[0]), ""]
        if name == "run":
            out += [
                "Flags override the YAML file (`--config FILE`: a key per setting, `-` or `_`",
                "alike), which overrides the environment. A YAML key without a flag is set in the",
                "file only.",
                "",
                "| flag | YAML key | default | meaning |",
                "|---|---|---|---|",
            ]
            seen = set()
            for a in actions:
                key = f"`{a.dest}`" if a.dest in config_fields else ""
                seen.add(a.dest)
                out.append(f"| {option_name(a)} | {key} | {default_of(name, a, parser)} | "
                           f"{cell(a.help or '')}{more(a.dest)} |")
            for f in fields(Config):
                if f.name in seen:
                    continue
                out.append(f"| | `{f.name}` | {config_default(f.name)} | "
                           f"{cell(meaning(f.name))}{more(f.name)} |")
        else:
            out += ["| option | default | meaning |", "|---|---|---|"]
            for a in actions:
                out.append(f"| {option_name(a)} | {default_of(name, a, parser)} | "
                           f"{cell(a.help or '')} |")
    return "\n".join(out) + "\n"


def anchor(command: str) -> str:
    """The id MkDocs' toc gives the heading `pgcdc <command>`."""
    return re.sub(r"[^\w\s-]", "", f"pgcdc {command}".lower()).strip().replace(" ", "-")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Generate docs/reference/options.md.")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when the page differs from what the parsers give")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
