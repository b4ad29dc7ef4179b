"""Generate docs/inventory.md, the inventory reference, from the pydantic model.

    python -m cluster_cli.docs              # write docs/inventory.md (relative to the current directory)
    python -m cluster_cli.docs -o -         # print it
    python -m cluster_cli.docs --check      # exit 1 if docs/inventory.md is out of step with the model

Every section, field, type, default and description comes from cluster_cli/model.py: change the
model, then run this again. A unit test fails while the two disagree.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from cluster_cli import model
from cluster_cli.model import SYSTEM_DIRS, Inventory, models_in

DEFAULT_OUTPUT = Path("docs") / "inventory.md"

EXAMPLE = """\
cluster_name: mini
ssh:
  user: root
  private_key: ~/.ssh/id_ed25519
hosts:
  - name: head
    address: 10.0.0.10
controllers:
  primary: head
accounting:
  host: head
login: [head]
node_groups:
  - name: gpu
    nodes: gpu[01-04]            # gpu01 .. gpu04, one machine each
    addresses: 10.0.0.[21-24]
    sockets: 2
    cores_per_socket: 16
    threads_per_core: 2
    real_memory_mb: 240000       # a little under physical memory
    gpus:
      count: 4
      type: a100
      devices: /dev/nvidia[0-3]
partitions:
  - name: gpu
    nodes: [gpu]
    default: true
slurm:
  conf:
    SchedulerParameters: bf_continue   # any slurm.conf key; null deletes a default
"""

GLOSSARY = [
    (
        "name",
        "letters, digits, `.`, `_` and `-`, starting and ending with a letter or digit, "
        f"at most {model.MAX_NAME_LENGTH} characters",
    ),
    (
        "hostlist",
        (
            "a Slurm hostlist expression: `gpu[001-128]`, `rack[1-2]-n[1-4]`, `a1,b[2-3]`; a range is "
            "zero-padded to the width of its lower bound, at most 1,000,000 names"
        ),
    ),
    ("address", "a host name or IP address, without white space, `#`, `,`, `(`, `)`, `[`, `]` or `=`"),
    ("port", "an integer from 1 to 65535"),
    (
        "config value",
        "a string written unquoted into a Slurm config file: no white space, `#` or control characters",
    ),
    ("Slurm key", "a configuration key of letters and digits, e.g. `KillWait`; Slurm ignores case in keys"),
    ("scalar", "a string, number or yes/no; `null` deletes the key from the defaults"),
    ("apt URI", "`file:/PATH`, `copy:/PATH`, `http://HOST/PATH` or `https://HOST/PATH`, without white space"),
    ("apt suite", "a suite name such as `bookworm`, or a path ending in `/` (`./`) for a flat repository"),
    ("apt component", "a component such as `main` or `non-free-firmware`"),
    ("URL", "`http://...`, `https://...` or `file:/...`, without white space"),
    ("absolute path", "a path on the hosts starting with `/`, without white space"),
    ("path or URL", "an absolute path on the hosts or a URL"),
]

# What the model's validators mean, by function name (model.py stays the only source of rules).
VALIDATOR_TYPES = {
    "_check_hostlist": "hostlist",
    "_check_address": "address",
    "_check_config_text": "config value",
    "_check_override_key": "Slurm key",
    "_check_override_value": "scalar",
    "_check_nccl_name": "`NCCL_*` name",
    "_check_nccl_value": "string",
    "_check_apt_uri": "apt URI",
    "_check_url": "URL",
    "_check_host_path": "absolute path",
    "_check_path_or_url": "path or URL",
}
PATTERN_TYPES = {
    model.NAME_PATTERN: "name",
    model.CLUSTER_NAME_PATTERN: "1-40 of `a-z`, `0-9`, `-`, `_`, starting with a letter",
    model.APT_SUITE_PATTERN: "apt suite",
    model.APT_COMPONENT_PATTERN: "apt component",
}
BASE_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", typing.Any: "any"}


def _anchor(cls: type[BaseModel]) -> str:
    return cls.__name__.lower()


def _flatten(metadata: typing.Iterable[Any]) -> list[Any]:
    """Constraint objects, with those of nested Field(...) infos pulled up."""
    flat: list[Any] = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            flat += _flatten(item.metadata)
        else:
            flat.append(item)
    return flat


def _constraints(base: Any, metadata: list[Any]) -> str:
    values: dict[str, Any] = {}
    for item in metadata:
        for attribute in ("ge", "gt", "le", "lt", "min_length", "max_length", "pattern"):
            value = getattr(item, attribute, None)
            if value is not None:
                values[attribute] = value
        function = getattr(item, "func", None)
        if function is not None and function.__name__ in VALIDATOR_TYPES:
            return VALIDATOR_TYPES[function.__name__]
    if values.get("pattern") in PATTERN_TYPES:
        return PATTERN_TYPES[values["pattern"]]
    if base is int and values.get("ge") == 1 and values.get("le") == 65535:
        return "port"
    text = BASE_TYPES.get(base, getattr(base, "__name__", str(base)))
    if "pattern" in values:
        return f"{text} matching `{values['pattern']}`"
    low = (
        (f"{values['ge']}", "")
        if "ge" in values
        else (f"{values['gt']}", "exclusive")
        if "gt" in values
        else None
    )
    high = f"{values['le']}" if "le" in values else None
    if low and high and not low[1]:
        return f"{text}, {low[0]}-{high}"
    parts = []
    if "ge" in values:
        parts.append(f">= {values['ge']}")
    if "gt" in values:
        parts.append(f"> {values['gt']}")
    if "le" in values:
        parts.append(f"<= {values['le']}")
    if "lt" in values:
        parts.append(f"< {values['lt']}")
    if values.get("min_length", 0) > 1 or (values.get("min_length") == 1 and base is not str):
        parts.append(f"at least {values['min_length']}")
    return f"{text}, {' and '.join(parts)}" if parts else text


def type_text(annotation: Any, metadata: typing.Iterable[Any] = ()) -> str:
    """A reader's name for a field's type: ``list of hostlist``, ``integer, 1-64``, a link to a section."""
    metadata = _flatten(metadata)
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(arguments[0], [*arguments[1:], *metadata])
    if origin in (typing.Union, types.UnionType):
        members = [argument for argument in arguments if argument is not type(None)]
        text = " or ".join(type_text(member, metadata) for member in members)
        return f"{text} or null" if len(members) < len(arguments) else text
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{_scalar(value)}`" for value in arguments)
    if origin is list:
        text = f"list of {type_text(arguments[0])}"
        lengths = [getattr(item, "min_length", None) for item in metadata]
        minimum = next((length for length in lengths if length), None)
        return f"{text} (at least {minimum})" if minimum else text
    if origin is dict:
        return f"map of {type_text(arguments[0])} to {type_text(arguments[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{_anchor(annotation)})"
    return _constraints(annotation, metadata)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    return str(value)


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return f"see [{type(value).__name__}](#{_anchor(type(value))})"
        return f"`{yaml.safe_dump(value, default_flow_style=True).strip()}`"
    if field.default is PydanticUndefined:
        return ""
    return f"`{_scalar(field.default)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def walk(root: type[BaseModel] = Inventory) -> list[tuple[type[BaseModel], list[str]]]:
    """Every model reachable from ``root``, depth first in field order, with the paths it is used at."""
    order: list[type[BaseModel]] = []
    paths: dict[type[BaseModel], list[str]] = {}

    def visit(cls: type[BaseModel], path: str) -> None:
        if cls in paths:
            paths[cls].append(path)
            return
        paths[cls] = [path]
        order.append(cls)
        for name, field in cls.model_fields.items():
            annotation = field.annotation
            suffix = ""
            if typing.get_origin(annotation) is list or any(
                typing.get_origin(argument) is list for argument in typing.get_args(annotation)
            ):
                suffix = "[]"
            elif typing.get_origin(annotation) is dict:
                suffix = ".KEY"
            for nested in models_in(annotation):
                visit(nested, f"{path}.{name}{suffix}" if path else f"{name}{suffix}")

    visit(root, "")
    return [(cls, paths[cls]) for cls in order]


def _section(cls: type[BaseModel], paths: list[str], top: bool) -> list[str]:
    title = "Top level" if top else cls.__name__
    lines = [f'<a id="{_anchor(cls)}"></a>', "", f"## {title}", ""]
    if cls.__doc__:
        lines += [" ".join(cls.__doc__.split()), ""]
    if not top:
        lines += ["Used at: " + ", ".join(f"`{path}`" for path in paths), ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in cls.model_fields.items():
        row = [
            f"`{name}`",
            type_text(field.annotation, field.metadata),
            default_text(field),
            field.description or "",
        ]
        lines.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
    return lines + [""]


# the whole-file limits of cluster_cli/loader.py and the message cap of cluster_cli/errors.py
REFUSED = [
    "- A file over 10 MiB, text that is not UTF-8, YAML nested more than 64 levels deep, and a key",
    "  written twice in one mapping (a key written beside a merge key `<<` overrides the merged one).",
    "- Aliases (`*name`) and merge keys (`<<`) that repeat more than 100,000 values in all: a few",
    "  hundred bytes of nested `<<: [*a, *a, ...]` would otherwise expand to gigabytes. The problem",
    "  names the line where the limit is passed.",
    "- Names, keys and patterns are matched as whole strings: `\"KillWait\\n\": 30` is not a key.",
    "- Paths are absolute, without `.` or `..` parts; `ssh.private_key` and `secrets.dir` on the",
    "  control node may also start with `~/`. The directories the deploy creates and chowns, or",
    "  `teardown --purge` deletes (`slurm.paths.*`, `training.venv_path`, `training.work_dir`), and",
    "  `secrets.dir` may not be a system directory (a directory below one is fine):",
    *textwrap.wrap(
        ", ".join(f"`{path}`" for path in sorted(SYSTEM_DIRS)) + ".",
        width=98, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False,
    ),
    "- `{{`, `{%` or `{#` in any key or value: Ansible templates the values it is given, and",
    "  `{{ lookup('pipe', 'id') }}` in a path would run a command on the control node.",
    "",
    "`validate` prints the first 50 problems, then how many more there are.",
]


def generate() -> str:
    """The whole reference as Markdown."""
    lines = [
        "# Inventory reference",
        "",
        "<!-- Generated from cluster_cli/model.py by `python -m cluster_cli.docs`: do not edit by hand. -->",
        "",
        "One YAML file describes the whole cluster. Every section below is a mapping; a key that is not",
        "listed is an error (with a did-you-mean hint), never silently ignored. `cluster-cli validate FILE`",
        "checks a file and reports every problem as `file:line: field: message`; `cluster-cli schema`",
        "prints the same model as JSON Schema for editors.",
        "",
        "## What is refused before anything else",
        "",
        *REFUSED,
        "",
        "## Example",
        "",
        "```yaml",
        EXAMPLE.rstrip("\n"),
        "```",
        "",
        "More: `inventories/local/inventory.yaml` (everything on one machine) and",
        "`inventories/examples/*.yaml`.",
        "",
        "## Value types",
        "",
        "| type | meaning |",
        "|---|---|",
    ]
    lines += [f"| {kind} | {_cell(meaning)} |" for kind, meaning in GLOSSARY]
    lines.append("")
    for index, (cls, paths) in enumerate(walk()):
        lines += _section(cls, paths, top=index == 0)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster_cli.docs", description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(DEFAULT_OUTPUT), help="file to write, or - for stdout")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs from the model")
    options = parser.parse_args(argv)
    text = generate()
    if options.output == "-":
        sys.stdout.write(text)
        return 0
    path = Path(options.output)
    if options.check:
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            print(
                f"{path} is out of step with cluster_cli/model.py: run python -m cluster_cli.docs",
                file=sys.stderr,
            )
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
