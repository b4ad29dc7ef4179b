"""The problems a resolution finds, each at the file line of its field, reported all together."""

from __future__ import annotations

from collections import Counter

from cluster_cli import hostlist
from cluster_cli.errors import InventoryError, Location, Problem, format_location
from cluster_cli.source_map import SourceMap

MAX_PROBLEMS_PER_FIELD = 5  # a hostlist of 100,000 bad names is one mistake, not 100,000 lines


class Problems:
    """The problems found so far; on one field, those after the first few are only counted."""

    def __init__(self, source: SourceMap, file: str):
        self.source = source
        self.file = file
        self.found: list[Problem] = []
        self.per_field: Counter[Location] = Counter()

    def add(self, location: Location, message: str) -> None:
        self.per_field[location] += 1
        if self.per_field[location] <= MAX_PROBLEMS_PER_FIELD:
            self.found.append(self._at(location, message))

    def raise_if_any(self) -> None:
        """Raise InventoryError with every problem, and one line for the rest where a field had many."""
        if not self.found:
            return
        more = [
            self._at(location, f"and {count - MAX_PROBLEMS_PER_FIELD} more problems here")
            for location, count in self.per_field.items()
            if count > MAX_PROBLEMS_PER_FIELD
        ]
        raise InventoryError(self.found + more)

    def _at(self, location: Location, message: str) -> Problem:
        return Problem(self.file, self.source.line_of(location), format_location(location), message)


def expand(problems: Problems, location: Location, expression: str) -> list[str]:
    """The names of a hostlist; none, and a problem at ``location``, where it is not valid."""
    try:
        return hostlist.expand(expression)
    except hostlist.HostlistError as error:
        problems.add(location, str(error))
        return []
