"""Derive plugins/plugin_utils/slurm_facts/data/slurm-<series>.json (the collection's; cluster_cli/slurm_facts/
links to it) from a Slurm release's own man pages.

For each supported Slurm series this reads slurm.conf(5), gres.conf(5), cgroup.conf(5),
topology.conf(5), slurmdbd.conf(5) and scontrol(1) as Debian ships them and writes every documented
key of each file (exact spelling) with the restart the man page states for it, quoted. A key the
man page says nothing about takes effect on ``scontrol reconfigure``, as each page's introduction
says ("... unless otherwise noted"); that sentence is quoted too. Beside them, the plugins each
series ships (``TYPE_NAME.so`` in slurm-wlm-basic-plugins and slurm-wlm-mysql-plugin, the plugin
packages cluster-cli installs) of the types a configuration key loads (cluster_cli.slurm_facts.plugins).

    python devtools/slurm_docs.py                  # every series, then docs/slurm-rules.md
    python devtools/slurm_docs.py --series 22.05   # one series
    python devtools/slurm_docs.py --check          # derive and compare with the checked-in data
    python devtools/slurm_docs.py --docs           # only rewrite docs/slurm-rules.md from the data

22.05 is read from the installed packages when they are that series (Debian 12), otherwise, like
24.11 (Debian 13, trixie) and 26.05 (Debian forky/sid), from the .deb files of deb.debian.org:
the suite's Packages index names the file and its SHA256, ``dpkg-deb -x`` unpacks it into a
temporary directory. The curated facts (plugins/plugin_utils/slurm_facts/data/rules.json) are checked at
the same time: every man-page quote there must be in that series' man page.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import io
import json
import lzma
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO / "plugins" / "plugin_utils" / "slurm_facts" / "data"
RULES = DATA_DIR / "rules.json"
DOC = REPO / "docs" / "slurm-rules.md"
MIRROR = "http://deb.debian.org/debian"

# The Debian suite that ships each series.
SUITES = {"22.05": "bookworm", "24.11": "trixie", "26.05": "sid"}
# Which binary package holds each man page (dpkg -S on Debian 12 agrees for 22.05).
MAN_PAGES = {
    "slurm.conf": ("slurm-client", "usr/share/man/man5/slurm.conf.5.gz"),
    "gres.conf": ("slurm-client", "usr/share/man/man5/gres.conf.5.gz"),
    "cgroup.conf": ("slurm-client", "usr/share/man/man5/cgroup.conf.5.gz"),
    "topology.conf": ("slurm-client", "usr/share/man/man5/topology.conf.5.gz"),
    "slurmdbd.conf": ("slurmdbd", "usr/share/man/man5/slurmdbd.conf.5.gz"),
    "scontrol": ("slurm-client", "usr/share/man/man1/scontrol.1.gz"),
}
# The packages of Slurm's plugin files that cluster-cli installs: slurm_common's slurm-wlm-basic-plugins
# and the slurm-wlm-mysql-plugin slurmdbd depends on. Their files are listed, not unpacked.
PLUGIN_PACKAGES = ("slurm-wlm-basic-plugins", "slurm-wlm-mysql-plugin")
PLUGIN_DIR = "usr/lib/x86_64-linux-gnu/slurm-wlm"
PACKAGES = sorted({package for package, _ in MAN_PAGES.values()} | set(PLUGIN_PACKAGES))
SECTION_NUMBER = {"scontrol": "1"}
# slurm.conf: the sections that document keys, and the key that opens each kind of line they describe.
SLURM_CONF_KEY_SECTIONS = ("PARAMETERS",)
RECORD_SECTIONS = {
    "NODE CONFIGURATION": "NodeName",
    "DOWN NODE CONFIGURATION": "DownNodes",
    "FRONTEND NODE CONFIGURATION": "FrontendName",
    "NODESET CONFIGURATION": "NodeSet",
    "PARTITION CONFIGURATION": "PartitionName",
    "POWERACTION CONFIGURATION": "PowerAction",
}
# Sections of the other pages that are examples, not key lists.
NOT_KEY_SECTIONS = ("NAME", "EXAMPLE", "EXAMPLES", "COPYING", "SEE ALSO", "FILES")

# ---- troff to text -----------------------------------------------------------------------------

_FONT = re.compile(r"\\f(\[[^\]]*\]|\(..|.)")
_ESCAPES = {"\\-": "-", "\\(em": "-", "\\(en": "-", "\\(aq": "'", "\\(dq": '"', "\\&": "", "\\ ": " ", "\\e": "\\"}
_KEY_TAG = re.compile(r"^\\fB([A-Za-z][A-Za-z0-9_]*)\\f[RP](?:$|[=\s\\])")
_OPTION_TAG = re.compile(r"^\\fB([A-Za-z][A-Za-z0-9_]*)")


def plain(line: str) -> str:
    """One troff text line as plain text: fonts dropped, escapes resolved."""
    line = _FONT.sub("", line)
    for escape, text in _ESCAPES.items():
        line = line.replace(escape, text)
    return line.replace("\\", "")


def one_line(text: str) -> str:
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences; "e.g." and "i.e." do not end one."""
    protected = re.sub(r"\b(e\.g|i\.e|etc)\.", lambda m: m.group(1).replace(".", "\0") + "\0", one_line(text))
    return [part.replace("\0", ".") for part in re.split(r"(?<=[.!?])\s+(?=[A-Z\"(])", protected) if part]


@dataclass
class Entry:
    """A documented key: its section, its own text and the text of each of its options."""

    section: str
    text: list[str] = field(default_factory=list)
    options: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class ManPage:
    sections: dict[str, list[str]]  # all the text of each section
    intros: dict[str, list[str]]  # each section's text before its first key
    entries: dict[tuple[str, str], Entry]

    def text(self) -> str:
        return one_line(" ".join(" ".join(lines) for lines in self.sections.values()))


def read_man_page(raw: str) -> ManPage:
    """The sections (plain text) and the documented keys of a man page's troff source.

    A key is a ``.TP`` tag ``\\fBName\\fR`` outside any ``.RS`` indent; a tag one indent in belongs
    to the key above it as one of its options (SchedulerParameters' ``no_backup_scheduling``)."""
    sections: dict[str, list[str]] = {}
    intros: dict[str, list[str]] = {}
    entries: dict[tuple[str, str], Entry] = {}
    section, entry, option = "", None, None
    depth, tagged = 0, False
    for line in raw.splitlines():
        if line.startswith(".SH"):
            section, entry, option, depth = line[3:].strip().strip('"'), None, None, 0
            sections.setdefault(section, [])
        elif line.startswith(".RS"):
            depth += 1
        elif line.startswith(".RE"):
            depth = max(0, depth - 1)
            option = option if depth else None
        elif not line.startswith("."):
            key = _KEY_TAG.match(line) if tagged and depth == 0 and section else None
            sub = _OPTION_TAG.match(line) if tagged and depth == 1 and entry is not None else None
            if key:
                entry, option = entries.setdefault((section, key.group(1)), Entry(section)), None
            elif sub:
                option = sub.group(1)
                entry.options.setdefault(option, [])
            else:
                text = plain(line)
                sections.setdefault(section, []).append(text)
                if entry is None:
                    intros.setdefault(section, []).append(text)
                else:
                    (entry.options[option] if option else entry.text).append(text)
        tagged = line.startswith(".TP")
    return ManPage(sections, intros, entries)


# ---- what a sentence says about restarts --------------------------------------------------------

# Checked in this order; the first pattern a sentence matches decides. "restart or reconfigure"
# comes before the restart patterns so that it is not read as a restart.
IMPACT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (impact, re.compile(pattern, re.IGNORECASE))
    for impact, pattern in (
        ("reconfigure", r"restarted or reconfigured|restarting or reconfiguring"),
        ("restart_all", r"all slurm daemons,? (and )?commands(,? and running jobs)? must be"
                        r" (terminated prior to changing .* and later restarted|restarted)"),
        ("restart_slurmctld_slurmd", r"restart of (the )?slurmctld and (the )?slurmd( daemons)? is (required|needed)"
                                     r"|restarting both the slurmctld daemon and the slurmd daemons"
                                     r"|slurmctld daemon and all slurmd daemons must (also )?be restarted"),
        ("restart_slurmctld", r"restart of (the )?slurmctld is (required|needed)|slurmctld daemon must be restarted"),
        ("restart_slurmd", r"restart of the slurmd daemons is required|and restart slurmd\b"),
        ("restart_slurmdbd", r"slurmdbd must be terminated prior to changing .* and later restarted"
                             r"|take effect upon restart of slurmdbd"),
        ("reconfigure", r"take effect when the slurm daemons are reconfigured|need to be reconfigured"
                        r"|only take effect after reconfiguring|execution of the command \"scontrol reconfigure\""),
    )
)
# What each impact restarts; a key's impact is the union of what its sentences say.
ACTIONS = {
    "reconfigure": frozenset({"reconfigure"}),
    "restart_slurmd": frozenset({"slurmd"}),
    "restart_slurmctld": frozenset({"slurmctld"}),
    "restart_slurmctld_slurmd": frozenset({"slurmctld", "slurmd"}),
    "restart_all": frozenset({"slurmctld", "slurmd", "slurmdbd", "all"}),
    "restart_slurmdbd": frozenset({"slurmdbd"}),
}
STRENGTH = ("reconfigure", "restart_slurmdbd", "restart_slurmd", "restart_slurmctld", "restart_slurmctld_slurmd",
            "restart_all")


def impact_of(sentence: str) -> str | None:
    return next((impact for impact, pattern in IMPACT_PATTERNS if pattern.search(sentence)), None)


def note(lines: list[str]) -> dict[str, str]:
    """{impact, quote} for the strongest statement about restarts in ``lines``; {} when none."""
    found = [(impact, sentence) for sentence in sentences(" ".join(lines)) if (impact := impact_of(sentence))]
    if not found:
        return {}
    impact, quote = max(found, key=lambda pair: STRENGTH.index(pair[0]))
    return {"impact": impact, "quote": quote}


def key_facts(entry: Entry) -> dict[str, object]:
    facts: dict[str, object] = dict(note(entry.text))
    options = {name: found for name, lines in sorted(entry.options.items()) if (found := note(lines))}
    if options:
        facts["options"] = options
    return facts


def default_note(page: ManPage, file_name: str) -> dict[str, str]:
    """The introduction's sentence on when changes take effect; the file's impact for unnoted keys."""
    found = note(page.intros.get("DESCRIPTION", []))
    if not found:
        raise SystemExit(f"{file_name}: no sentence in DESCRIPTION says when changes take effect")
    return found


# ---- one file's facts ---------------------------------------------------------------------------


def slurm_conf_facts(page: ManPage) -> dict[str, object]:
    keys = {name: key_facts(entry) for (section, name), entry in page.entries.items()
            if section in SLURM_CONF_KEY_SECTIONS}
    if re.search(r'begins with the word "Include"', " ".join(page.intros.get("DESCRIPTION", []))):
        keys["Include"] = {}
    records = {}
    for section, record_key in RECORD_SECTIONS.items():
        attributes = {name: key_facts(entry) for (where, name), entry in page.entries.items() if where == section}
        if record_key not in attributes:
            continue
        records[record_key] = {"section": section, "keys": dict(sorted(attributes.items())),
                               **({"note": found} if (found := note(page.intros.get(section, []))) else {})}
    return {"keys": dict(sorted(keys.items())), "records": records}


def other_conf_facts(page: ManPage) -> dict[str, object]:
    keys = {name: key_facts(entry) for (section, name), entry in page.entries.items()
            if not section.startswith(NOT_KEY_SECTIONS)}
    return {"keys": dict(sorted(keys.items()))}


def reconfigure_paragraph(page: ManPage) -> str:
    """scontrol(1)'s description of ``reconfigure``, up to the next command."""
    for (_, name), entry in page.entries.items():
        if name == "reconfigure":
            return one_line(" ".join(entry.text))
    raise SystemExit("scontrol(1) documents no reconfigure command")


def plugin_names(paths: list[str]) -> dict[str, list[str]]:
    """The plugins of each type the keys of cluster_cli.slurm_facts.plugins load, from the paths of the
    plugin packages' files: ``.../slurm-wlm/topology_tree.so`` is topology/tree. Other files
    (libslurmfull.so, openapi_*.so ...) are no value of a key."""
    from cluster_cli.slurm_facts.plugins import PLUGIN_TYPES  # run as a script: REPO on sys.path first

    by_longest = sorted(PLUGIN_TYPES, key=len, reverse=True)
    names: dict[str, set[str]] = {}
    for path in paths:
        directory, _, file_name = path.lstrip("./").rpartition("/")
        if directory != PLUGIN_DIR or not file_name.endswith(".so"):
            continue
        stem = file_name.removesuffix(".so")
        plugin_type = next((one for one in by_longest if stem.startswith(one + "_")), None)
        if plugin_type is not None:
            names.setdefault(plugin_type, set()).add(stem[len(plugin_type) + 1:])
    return {plugin_type: sorted(found) for plugin_type, found in sorted(names.items())}


def series_facts(
    series: str, pages: dict[str, str], packages: dict[str, str], plugins: dict[str, list[str]]
) -> dict[str, object]:
    """The data file of ``series`` from the man pages' troff sources ({file: source}) and the plugin
    names of its packages."""
    files: dict[str, object] = {}
    for file_name in ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf", "slurmdbd.conf"):
        if file_name not in pages:
            continue
        page = read_man_page(pages[file_name])
        facts = slurm_conf_facts(page) if file_name == "slurm.conf" else other_conf_facts(page)
        files[file_name] = {"man_page": f"{file_name}(5)", "default": default_note(page, file_name), **facts}
    scontrol = read_man_page(pages["scontrol"])
    return {
        "series": series,
        "packages": dict(sorted(packages.items())),
        "scontrol_reconfigure": reconfigure_paragraph(scontrol),
        "files": files,
        "plugins": {"packages": list(PLUGIN_PACKAGES), "directory": "/" + PLUGIN_DIR, "types": plugins},
    }


# ---- where the man pages come from -------------------------------------------------------------

DOC_PACKAGE = "slurm-wlm-doc"
DOC_HTML = "usr/share/doc/slurm-wlm/html"


@dataclass
class Sources:
    """One series' man pages (troff, by file name), HTML documentation (text, by page name; empty
    when slurm-wlm-doc is not at hand), the versions of the packages they came from and the
    plugins of each type in PLUGIN_PACKAGES."""

    pages: dict[str, str]
    docs: dict[str, str]
    packages: dict[str, str]
    plugins: dict[str, list[str]] = field(default_factory=dict)


def html_text(raw: str) -> str:
    """An HTML page as one line of text; a tag counts as a space, except before punctuation."""
    text = one_line(html.unescape(re.sub(r"<[^>]+>", " ", raw)))
    return re.sub(r" ([.,;:!?)])", r"\1", text)


def read_tree(root: Path, packages: dict[str, str], plugin_paths: list[str]) -> Sources:
    pages = {name: gzip.decompress((root / path).read_bytes()).decode("utf-8", errors="replace")
             for name, (_, path) in MAN_PAGES.items() if (root / path).is_file()}
    docs = {page.name: html_text(page.read_text(encoding="utf-8", errors="replace"))
            for page in sorted((root / DOC_HTML).glob("*.html"))}
    return Sources(pages, docs, packages, plugin_names(plugin_paths))


def installed_version(package: str) -> str:
    done = subprocess.run(["dpkg-query", "--show", "--showformat=${Version}", package],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def installed_sources(series: str) -> Sources | None:
    """The installed Slurm's man pages, when it is ``series``."""
    packages = {package: installed_version(package) for package in PACKAGES}
    if not all(version.startswith(series + ".") for version in packages.values()):
        return None
    listed = subprocess.run(["dpkg-query", "--listfiles", *PLUGIN_PACKAGES], capture_output=True, text=True, check=True)
    return read_tree(Path("/"), packages, listed.stdout.splitlines())


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:  # the fixed Debian mirror
        return response.read()


def package_index(suite: str) -> Iterator[dict[str, str]]:
    """The stanzas (field: value) of the suite's main/binary-amd64 Packages index."""
    text = lzma.decompress(fetch(f"{MIRROR}/dists/{suite}/main/binary-amd64/Packages.xz")).decode()
    for stanza in text.split("\n\n"):
        yield dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))


def downloaded_sources(suite: str, work: Path) -> Sources:
    """The suite's Slurm man pages and documentation, from its .deb files unpacked under ``work``."""
    wanted = [*PACKAGES, DOC_PACKAGE]
    stanzas = {stanza["Package"]: stanza for stanza in package_index(suite) if stanza.get("Package") in wanted}
    plugin_paths: list[str] = []
    for package in wanted:
        stanza = stanzas[package]
        deb = fetch(f"{MIRROR}/{stanza['Filename']}")
        if hashlib.sha256(deb).hexdigest() != stanza["SHA256"]:
            raise SystemExit(f"{stanza['Filename']}: SHA256 differs from the {suite} Packages index")
        (work / f"{package}.deb").write_bytes(deb)
        if package in PLUGIN_PACKAGES:
            listed = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(work / f"{package}.deb")], capture_output=True,
                                    check=True)
            with tarfile.open(fileobj=io.BytesIO(listed.stdout)) as archive:
                plugin_paths += archive.getnames()
        else:
            subprocess.run(["dpkg-deb", "-x", str(work / f"{package}.deb"), str(work / "root")], check=True)
    return read_tree(work / "root", {package: stanzas[package]["Version"] for package in PACKAGES}, plugin_paths)


def sources(series: str, download: bool) -> Sources:
    found = None if download else installed_sources(series)
    if found is not None:
        return found
    with tempfile.TemporaryDirectory(prefix="slurm-docs-") as work:
        return downloaded_sources(SUITES[series], Path(work))


# ---- curated facts: their quotes must be in the page they cite ---------------------------------


def quote_problems(series: str, found: Sources, rules: dict[str, object]) -> list[str]:
    """The quotes of rules.json citing one of ``series``' man pages or HTML pages that is not in it.
    A doc_page quote is skipped when the documentation is not at hand (said in a problem-free note)."""
    man_texts = {name: read_man_page(raw).text() for name, raw in found.pages.items()}
    problems = []
    for where, quoted in cited_quotes(rules, ""):
        if where != series:
            continue
        if "man_page" in quoted:
            text = man_texts.get(quoted["man_page"].split("(")[0], "")
        else:
            text = found.docs.get(quoted.get("doc_page", ""), "")
            if not found.docs:
                continue
        if one_line(quoted["quote"]) not in text:
            cited = quoted.get("man_page") or quoted.get("doc_page")
            problems.append(f"rules.json: {series} {cited} does not say: {quoted['quote']}")
    return problems


def cited_quotes(node: object, series: str) -> Iterator[tuple[str, dict[str, str]]]:
    """(series, quote) for every quote in rules.json that cites a man page or an HTML page."""
    if isinstance(node, dict):
        if "quote" in node and ("man_page" in node or "doc_page" in node):
            yield node.get("series", series), node
        for name, value in node.items():
            yield from cited_quotes(value, name if name in SUITES else series)
    elif isinstance(node, list):
        for value in node:
            yield from cited_quotes(value, series)


# ---- files -------------------------------------------------------------------------------------


def data_path(series: str) -> Path:
    return DATA_DIR / f"slurm-{series}.json"


def dump(data: object) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def generate(series: str, download: bool, check: bool) -> list[str]:
    """Derive ``series``' data; write it (or, with ``check``, compare it). The problems found."""
    found = sources(series, download)
    if not found.docs:
        print(f"{series}: slurm-wlm-doc is not installed: its quotes in rules.json are not checked (use --download)")
    problems = quote_problems(series, found, json.loads(RULES.read_text(encoding="utf-8")))
    text = dump(series_facts(series, found.pages, found.packages, found.plugins))
    if check:
        if not data_path(series).is_file() or data_path(series).read_text(encoding="utf-8") != text:
            problems.append(f"{data_path(series).relative_to(REPO)} differs from what the man pages say")
    else:
        data_path(series).write_text(text, encoding="utf-8")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", action="append", choices=sorted(SUITES), help="only these series")
    parser.add_argument("--download", action="store_true", help="download 22.05 too, even when installed")
    parser.add_argument("--check", action="store_true", help="compare with the checked-in data, write nothing")
    parser.add_argument("--docs", action="store_true", help="only rewrite docs/slurm-rules.md from the data")
    args = parser.parse_args(argv)
    problems: list[str] = []
    if not args.docs:
        for series in args.series or sorted(SUITES):
            problems += generate(series, args.download, args.check)
    from devtools.slurm_rules_doc import render  # needs the data written above

    if args.check:
        if DOC.read_text(encoding="utf-8") != render():
            problems.append("docs/slurm-rules.md differs from the data: run devtools/slurm_docs.py --docs")
    else:
        DOC.write_text(render(), encoding="utf-8")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
