"""Replace one section of a Markdown document, for the scripts that write measured figures into docs/."""

from __future__ import annotations


def _level(line: str) -> int:
    """The heading level of ``line`` (``## x`` is 2), 0 when it is not a heading."""
    marks = len(line) - len(line.lstrip("#"))
    return marks if 0 < marks <= 6 and line[marks:marks + 1] == " " else 0


def _span(lines: list[str], heading: str) -> tuple[int, int] | None:
    """Line range of the section that ``heading`` opens: up to the next heading of its level or higher."""
    if heading not in lines:
        return None
    start = lines.index(heading)
    level = _level(heading)
    end = next((index for index in range(start + 1, len(lines)) if 0 < _level(lines[index]) <= level), len(lines))
    return start, end


def replace_section(document: str, text: str, parent: str | None = None) -> str:
    """``document`` with the section whose heading is ``text``'s first line replaced by ``text``.

    A missing section goes at the end of the ``parent`` section (itself added at the end of the
    document when missing), or at the end of the document without a parent."""
    heading = text.splitlines()[0]
    if _level(heading) == 0:
        raise ValueError(f"section text must start with a Markdown heading, not {heading!r}")
    block = text.rstrip("\n").splitlines() + [""]
    lines = document.rstrip("\n").splitlines()
    found = _span(lines, heading)
    if found is None and parent is not None:
        if _span(lines, parent) is None:
            lines += ["", parent, ""]
        _, end = _span(lines, parent) or (0, len(lines))
        content_end = end
        while lines[content_end - 1] == "":  # the parent's heading line stops this
            content_end -= 1
        found = (content_end, end)
        block = [""] + block
    elif found is None:
        found = (len(lines), len(lines))
        block = [""] + block
    start, end = found
    return "\n".join(lines[:start] + block + lines[end:]).rstrip("\n") + "\n"
