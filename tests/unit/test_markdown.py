"""cluster_cli.markdown.replace_section: how the benchmark and mutation scripts rewrite docs/."""

from __future__ import annotations

import pytest

from devtools.markdown import replace_section

DOC = "# Title\n\nintro\n\n## A\n\nold a\n\n### A1\n\nold a1\n\n## B\n\nb\n"


def test_a_section_is_replaced_up_to_the_next_heading_of_its_level():
    assert replace_section(DOC, "## A\n\nnew a\n") == "# Title\n\nintro\n\n## A\n\nnew a\n\n## B\n\nb\n"


def test_a_subsection_is_replaced_and_the_rest_of_its_parent_kept():
    updated = replace_section(DOC, "### A1\n\nnew a1\n", parent="## A")
    assert updated == "# Title\n\nintro\n\n## A\n\nold a\n\n### A1\n\nnew a1\n\n## B\n\nb\n"


def test_a_missing_subsection_goes_at_the_end_of_its_parent():
    updated = replace_section(DOC, "### A2\n\na2\n", parent="## A")
    assert updated == "# Title\n\nintro\n\n## A\n\nold a\n\n### A1\n\nold a1\n\n### A2\n\na2\n\n## B\n\nb\n"


def test_a_missing_parent_and_section_go_at_the_end():
    updated = replace_section(DOC, "### C1\n\nc1\n", parent="## C")
    assert updated == DOC + "\n## C\n\n### C1\n\nc1\n"


def test_a_missing_section_without_parent_goes_at_the_end():
    assert replace_section(DOC, "## C\n\nc\n") == DOC + "\n## C\n\nc\n"


def test_replacing_twice_gives_the_same_document():
    once = replace_section(DOC, "### A2\n\na2\n", parent="## A")
    assert replace_section(once, "### A2\n\na2\n", parent="## A") == once


def test_text_without_a_heading_is_refused():
    with pytest.raises(ValueError, match="must start with a Markdown heading"):
        replace_section(DOC, "no heading\n")
