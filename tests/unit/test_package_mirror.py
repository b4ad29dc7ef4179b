"""package_mirror (air-gapped clusters): the inventory section, its checks and the role variables it becomes."""

from __future__ import annotations

from pathlib import Path

import pytest
from unit_helpers import BASE, FILE, line_of, load, problem, problems

from cluster_cli.ansible.variables import cluster_variables
from cluster_cli.secrets_store import ensure_secrets

NO_MIRROR = {
    "common_package_mirror_apt_uri": "",
    "common_package_mirror_apt_suites": ["./"],
    "common_package_mirror_apt_components": [],
    "common_package_mirror_apt_trusted": False,
    "common_package_mirror_apt_signed_by": "",
    "common_package_mirror_apt_exclusive": True,
    "common_package_mirror_pip_index_url": "",
    "common_package_mirror_pip_find_links": [],
    "common_package_mirror_pip_no_index": False,
}


def variables(text: str, tmp_path: Path) -> dict:
    return cluster_variables(load(text), tmp_path / "build", ensure_secrets(tmp_path / "secrets"))


def mirror_variables(text: str, tmp_path: Path) -> dict:
    return {key: value for key, value in variables(text, tmp_path).items() if key.startswith("common_package_mirror_")}


def test_without_a_mirror_the_variables_change_nothing_on_the_hosts(tmp_path: Path) -> None:
    assert load(BASE).inventory.package_mirror is None
    assert mirror_variables(BASE, tmp_path) == NO_MIRROR


def test_a_flat_local_mirror_for_apt_and_pip(tmp_path: Path) -> None:
    text = BASE + (
        "package_mirror:\n"
        "  apt:\n"
        "    uri: file:/mirror\n"
        "    trusted: true\n"
        "  pip:\n"
        "    find_links: [/mirror/wheels]\n"
        "    no_index: true\n"
    )
    assert problems(text) == []
    assert mirror_variables(text, tmp_path) == NO_MIRROR | {
        "common_package_mirror_apt_uri": "file:/mirror",
        "common_package_mirror_apt_trusted": True,
        "common_package_mirror_pip_find_links": ["/mirror/wheels"],
        "common_package_mirror_pip_no_index": True,
    }


def test_a_debian_style_signed_mirror_beside_the_hosts_sources(tmp_path: Path) -> None:
    text = BASE + (
        "package_mirror:\n"
        "  apt:\n"
        "    uri: http://mirror.internal/debian\n"
        "    suites: [bookworm, bookworm-updates]\n"
        "    components: [main, non-free-firmware]\n"
        "    signed_by: /usr/share/keyrings/mirror.gpg\n"
        "    exclusive: false\n"
        "  pip:\n"
        "    index_url: http://mirror.internal/pypi/simple\n"
    )
    assert problems(text) == []
    assert mirror_variables(text, tmp_path) == NO_MIRROR | {
        "common_package_mirror_apt_uri": "http://mirror.internal/debian",
        "common_package_mirror_apt_suites": ["bookworm", "bookworm-updates"],
        "common_package_mirror_apt_components": ["main", "non-free-firmware"],
        "common_package_mirror_apt_signed_by": "/usr/share/keyrings/mirror.gpg",
        "common_package_mirror_apt_exclusive": False,
        "common_package_mirror_pip_index_url": "http://mirror.internal/pypi/simple",
    }


def test_only_pip_keeps_the_apt_sources(tmp_path: Path) -> None:
    text = BASE + "package_mirror:\n  pip:\n    index_url: https://pypi.internal/simple\n"
    assert mirror_variables(text, tmp_path) == NO_MIRROR | {
        "common_package_mirror_pip_index_url": "https://pypi.internal/simple"
    }


@pytest.mark.parametrize(
    ("section", "snippet", "field", "message"),
    [
        (
            "  apt:\n    uri: file:/mirror\n    components: [main]\n",
            "components: [main]",
            "package_mirror.apt.components",
            "must be empty for a flat repository (suites ending in '/', such as './')",
        ),
        (
            "  apt:\n    uri: http://m/debian\n    suites: [bookworm]\n",
            # the components line is not written: the problem points at the section
            "  apt:",
            "package_mirror.apt.components",
            "at least one component (e.g. [main]) is needed with suite names; a flat repository has the suite './'",
        ),
        (
            "  apt:\n    uri: http://m/debian\n    suites: [bookworm, ./]\n    components: [main]\n",
            "suites: [bookworm, ./]",
            "package_mirror.apt.suites",
            "flat paths (ending in '/') and suite names cannot be mixed in one repository",
        ),
        (
            "  apt:\n    uri: ftp://m/debian\n",
            "uri: ftp://m/debian",
            "package_mirror.apt.uri",
            "'ftp://m/debian' is not an apt repository URI (file:/PATH, http://HOST/PATH or https://HOST/PATH)",
        ),
        (
            "  apt:\n    uri: 'file:/mirror ./'\n",
            "uri: 'file:/mirror ./'",
            "package_mirror.apt.uri",
            "'file:/mirror ./': cannot hold white space or control characters",
        ),
        (
            "  apt:\n    uri: file:/mirror\n    signed_by: mirror.gpg\n",
            "signed_by: mirror.gpg",
            "package_mirror.apt.signed_by",
            "'mirror.gpg' is not an absolute path",
        ),
        (
            "  apt:\n    uri: file:/mirror\n    suites: []\n",
            "suites: []",
            "package_mirror.apt.suites",
            "List should have at least 1 item after validation, not 0",
        ),
        (
            "  apt:\n    trusted: true\n",
            "  apt:",
            "package_mirror.apt.uri",
            "required field is missing",
        ),
        (
            "  pip:\n    no_index: true\n",
            "no_index: true",
            "package_mirror.pip.no_index",
            "needs find_links: pip would have nowhere to look",
        ),
        (
            "  pip:\n    index_url: http://m/simple\n    find_links: [/w]\n    no_index: true\n",
            "index_url: http://m/simple",
            "package_mirror.pip.index_url",
            "is not used with no_index: true; remove one",
        ),
        (
            "  pip:\n    find_links: [wheels]\n",
            "find_links: [wheels]",
            "package_mirror.pip.find_links[0]",
            "'wheels' is neither an absolute path nor a URL (http://, https:// or file:/)",
        ),
        (
            "  pip: {}\n",
            "pip: {}",
            "package_mirror.pip",
            "set index_url or find_links (or remove the pip section)",
        ),
    ],
)
def test_bad_mirror_settings_name_the_field_and_line(section: str, snippet: str, field: str, message: str) -> None:
    text = BASE + "package_mirror:\n" + section
    assert problems(text) == [problem(text, snippet, field, message)]


def test_unknown_mirror_keys_are_errors_with_a_hint() -> None:
    text = BASE + "package_mirror:\n  apt:\n    uri: file:/mirror\n    exclusve: false\n"
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'exclusve')}: package_mirror.apt.exclusve: unknown field (did you mean "
        "'exclusive'?); known fields: components, exclusive, signed_by, suites, trusted, uri"
    ]
