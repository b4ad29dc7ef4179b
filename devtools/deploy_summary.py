"""Read back cluster-cli's closing line, "Deploy: <seconds> s, <n> changed" (cluster_cli.progress.summary_line
writes it; tests/unit/test_cli.py holds the two to the same format)."""

from __future__ import annotations

import re


def parse_summary_line(output: str, verb: str = "Deploy") -> tuple[float, int] | None:
    """(seconds, changed) from cluster-cli's output, None when it has no summary line."""
    found = re.search(rf"{re.escape(verb)}: ([0-9.]+) s, ([0-9]+) changed", output)
    return (float(found.group(1)), int(found.group(2))) if found else None
