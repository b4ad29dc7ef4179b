"""Errors that name the file, the line and the field."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

Location = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"[^\s.\[\]:'\"]+")


def format_location(location: Location) -> str:
    """``('node_groups', 0, 'gpus')`` -> ``node_groups[0].gpus``."""
    text = ""
    for part in location:
        if part == "[key]":  # pydantic's marker for an error in a mapping's key, named just before
            continue
        if isinstance(part, int):
            text += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(str(part)) or not str(part).isprintable():
            # a key like "\n" would break the one-line file:line: field: message format, and one
            # with a space, ':', '.' or a bracket would make the field ambiguous: quote them
            text += f"[{str(part)!r}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class ExitCode(IntEnum):
    """What `cluster-cli` returns, for scripts: 0 ok (nothing to change), 1 the operation failed
    (or a host could not be probed), 2 bad input, 3 `plan`: changes are pending."""

    OK = 0
    FAILURE = 1
    INVALID = 2
    CHANGES = 3


class ClusterCliError(Exception):
    """The root of the errors the CLI reports as a clear message; each kind has its exit code."""

    exit_code = ExitCode.FAILURE

    def report(self) -> str:
        """What the user is told (stderr)."""
        return f"error: {self}"


class RefusedError(ClusterCliError):
    """A request refused before anything was touched: an unknown node, a drain that is not ours."""

    exit_code = ExitCode.INVALID


MAX_PROBLEMS_SHOWN = 50


class InventoryError(ClusterCliError):
    """An inventory that cannot be used; carries every problem found, in file order, and shows
    the first MAX_PROBLEMS_SHOWN of them."""

    exit_code = ExitCode.INVALID

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems, key=lambda problem: (problem.file, problem.line, problem.field))
        shown = [str(problem) for problem in self.problems[:MAX_PROBLEMS_SHOWN]]
        hidden = len(self.problems) - len(shown)
        if hidden:
            shown.append(f"... and {hidden} more problem{'s' if hidden != 1 else ''}")
        super().__init__("\n".join(shown))

    def report(self) -> str:
        count = len(self.problems)
        source = self.problems[0].file if self.problems else "inventory"
        return f"{self}\n{source}: {count} problem{'s' if count != 1 else ''}; nothing was changed."
