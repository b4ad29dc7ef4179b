"""Where each field of a YAML document is: the line its error messages point at."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml


class SourceMap:
    """Lines of the keys and values of a composed YAML document."""

    def __init__(self, root: yaml.Node | None):
        self.root = root

    @classmethod
    def of_file(cls, path: str) -> SourceMap:
        """The map of the inventory file at ``path``, read again to point at a field after loading; a
        file that is gone maps every field to line 1."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError:
            return cls(None)
        return cls(yaml.compose(text, Loader=yaml.SafeLoader))

    def line_of(self, location: Iterable[str | int]) -> int:
        """Line of the deepest node on the path; the key's line for a mapping entry."""
        node = self.root
        if node is None:
            return 1
        line = node.start_mark.line + 1
        for part in location:
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                        line = key_node.start_mark.line + 1
                        node = value_node
                        break
                else:
                    return line
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                return line
        return line
