"""Options declared once: a configuration dataclass's field carries, in its metadata, all the
command line and the documentation need to know of it (its flag, help, choices, environment
variable, the page that explains it), and the parser, the YAML keys and the option reference
(docs/reference/options.md, scripts/docs_options.py) are derived from the fields. Debezium's
`Field.create(...).withDescription()`, as dataclass field metadata:

    slot: str = field(default="pgcdc", metadata=option("replication slot name (default pgcdc)"))

A field's flag is its name with `-` for `_` (`--topic-prefix`) unless `flag=` says otherwise;
`flag=False` makes it a YAML key only. Its value type follows its annotation (`int`, `float`,
else a string; `bool`: a switch, `--x` / `--no-x` with `negatable=True`) unless `type=` says.

Two kinds of parser (`add_options`):

- layered (`pgcdc run`, connector/config.py): every flag defaults to None, "not given", so the
  YAML file and the environment under it still apply; the defaults are the dataclass's own.
- standalone (`pgcdc merge`, spark_jobs/runtime/config.py): the parser carries the defaults,
  an environment variable's value is the default of its field, and a field without a default
  is required unless its variable is set (read when the parser is built).

`parsed(args, cls)` reads the values back by field name. Pure: argparse and dataclasses only.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any

__all__ = ["Option", "add_options", "declared", "describe", "flag_of", "option", "option_of",
           "parsed"]

_KEY = "pgcdc.option"  # the field metadata key of its Option
_FIELD_DEFAULT: Any = object()  # Option.cli_default: the field's default


@dataclass(frozen=True)
class Option:
    """One option of a configuration dataclass, beside its field (which gives its name, type,
    default and YAML key)."""

    help: str  # its meaning: --help, the reference, and the YAML key's row alike
    flag: str | bool = True  # True: from the field name; False: no flag (a YAML key only)
    env: str | None = None  # the environment variable that gives it
    choices: Collection[str] | None = None  # a live registry (a dict) is read when parsing
    negatable: bool = False  # a bool field: --x / --no-x rather than only --x
    repeat: bool = False  # the flag may be given again, each value added (action append)
    type: Callable[[str], Any] | None = None  # the flag's value parser (default: by annotation)
    metavar: str | None = None
    group: str | None = None  # a mutually exclusive group of flags, by name
    group_required: bool = False  # ... of which one must be given
    cli_default: Any = _FIELD_DEFAULT  # a standalone parser's default, when not the field's
    more: str | None = None  # the docs page (docs/-relative) that explains it at length


def option(help: str, **settings: Any) -> dict[str, Option]:
    """The `metadata=` of a declared field: `field(default=..., metadata=option("..."))`."""
    return {_KEY: Option(help, **settings)}


def option_of(f: Field[Any]) -> Option | None:
    found: Option | None = f.metadata.get(_KEY)
    return found


def declared(cls: type) -> Iterator[tuple[Field[Any], Option]]:
    """(field, option) of each declared field of the dataclass `cls`, in field order."""
    for f in fields(cls):
        opt = option_of(f)
        if opt is not None:
            yield f, opt


def flag_of(f: Field[Any], opt: Option) -> str | None:
    if opt.flag is False:
        return None
    return opt.flag if isinstance(opt.flag, str) else "--" + f.name.replace("_", "-")


def describe(opt: Option) -> str:
    """The option's help as printed: its meaning, and the environment variable that gives it."""
    return f"{opt.help} (env {opt.env})" if opt.env else opt.help


def field_default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def add_options(parser: argparse.ArgumentParser, cls: type, *, layered: bool,
                names: Sequence[str] | None = None, helps: Mapping[str, str] | None = None,
                environ: Mapping[str, str] | None = None) -> None:
    """A flag for each declared field of `cls` that has one, in field order (see the module
    docstring for `layered`); or for the fields `names`, in that order, as a command that
    reads a few settings does (`pgcdc status`). `helps`: a field's help as this command says
    it, where its meaning there is narrower (printed as given)."""
    environ = os.environ if environ is None else environ
    helps = helps or {}
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for f, opt in _chosen(cls, names):
        flag = flag_of(f, opt)
        if flag is None:
            continue
        target: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup = parser
        if opt.group is not None:
            if opt.group not in groups:
                groups[opt.group] = parser.add_mutually_exclusive_group(
                    required=opt.group_required)
            target = groups[opt.group]
        kwargs: dict[str, Any] = {"dest": f.name, "help": helps.get(f.name, describe(opt))}
        annotation = str(f.type)
        if annotation.startswith("bool"):
            kwargs["action"] = (argparse.BooleanOptionalAction if opt.negatable
                                else "store_true")
        else:
            if opt.repeat:
                kwargs["action"] = "append"
            value_type = opt.type or {"int": int, "float": float}.get(annotation.split(" ")[0])
            if value_type is not None:
                kwargs["type"] = value_type
            if opt.choices is not None:
                kwargs["choices"] = opt.choices
            if opt.metavar is not None:
                kwargs["metavar"] = opt.metavar
        if layered:
            kwargs["default"] = None  # not given: the file, the environment, the default
        else:
            default = field_default(f) if opt.cli_default is _FIELD_DEFAULT else opt.cli_default
            if opt.env and environ.get(opt.env):
                default = environ[opt.env]
            if opt.repeat:
                default = []  # argparse appends to it: pairs, made a mapping by `parsed`
            if default is MISSING:
                kwargs["required"] = True
            else:
                kwargs["default"] = default
        target.add_argument(flag, **kwargs)


def _chosen(cls: type, names: Sequence[str] | None) -> list[tuple[Field[Any], Option]]:
    every = dict((f.name, (f, opt)) for f, opt in declared(cls))
    return list(every.values()) if names is None else [every[name] for name in names]


def parsed(args: argparse.Namespace, cls: type, names: Sequence[str] | None = None
           ) -> dict[str, Any]:
    """The value of each declared field with a flag (or of the fields `names`), by field name:
    as parsed (None: not given, from a layered parser), a repeated `KEY=VALUE` flag's pairs as
    a mapping and a sequence as a tuple where the field's default is one."""
    out: dict[str, Any] = {}
    for f, opt in _chosen(cls, names):
        if flag_of(f, opt) is None:
            continue
        value, default = getattr(args, f.name), field_default(f)
        if isinstance(default, dict) and value is not None:
            value = dict(value)
        elif isinstance(default, tuple):
            value = tuple(value or ())
        out[f.name] = value
    return out
