"""devtools/slurm_docs.py: how it reads man pages, and that the checked-in data is what the man
pages give (22.05 against the installed ones; 24.11 and 26.05 need a download, so
`python devtools/slurm_docs.py --check` covers them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster_cli.slurm_facts.facts import supported_series
from devtools import slurm_docs
from devtools.slurm_rules_doc import render

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "plugins" / "plugin_utils" / "slurm_facts" / "data"
RULES = json.loads((DATA / "rules.json").read_text())

PAGE = r""".TH "x.conf" "5"
.SH "DESCRIPTION"
Changes to the configuration file take effect upon restart of
Slurm daemons, daemon receipt of the SIGHUP signal, or execution
of the command "scontrol reconfigure" unless otherwise noted.
.SH "PARAMETERS"
.TP
\fBPlainKey\fR
Nothing about restarts (e.g. none at all).
.IP
.TP
\fBBothKey\fR=<\fIvalue\fR>
A restart of slurmctld and the slurmd daemons is required for this to take
effect.
.IP
.TP
\fBOptionsKey\fR
Options:
.RS
.TP
\fBquiet_option\fR
Harmless.
.TP
\fBloud_option=#\fR
A restart of slurmctld is required for changes to this parameter to take effect.
.RE
.IP
"""


def test_read_man_page_finds_keys_their_options_and_notes() -> None:
    page = slurm_docs.read_man_page(PAGE)
    assert sorted(name for _, name in page.entries) == ["BothKey", "OptionsKey", "PlainKey"]
    facts = {name: slurm_docs.key_facts(entry) for (_, name), entry in page.entries.items()}
    assert facts["PlainKey"] == {}
    assert facts["BothKey"]["impact"] == "restart_slurmctld_slurmd"
    assert facts["OptionsKey"] == {"options": {"loud_option": {
        "impact": "restart_slurmctld",
        "quote": "A restart of slurmctld is required for changes to this parameter to take effect.",
    }}}
    assert slurm_docs.default_note(page, "x.conf")["impact"] == "reconfigure"


@pytest.mark.parametrize(
    ("sentence", "impact"),
    [
        ("A restart of slurmctld is required for changes to this parameter to take effect.", "restart_slurmctld"),
        ("The slurmctld daemon must be restarted for changes to this parameter to take effect.", "restart_slurmctld"),
        ("A restart of the slurmd daemons is required for changes to this parameter to take effect.",
         "restart_slurmd"),
        ("A restart of slurmctld and slurmd is required for changes to this parameter to take effect.",
         "restart_slurmctld_slurmd"),
        ("All Slurm daemons, commands and running jobs must be restarted for a change in SwitchType to take effect.",
         "restart_all"),
        ("All Slurm daemons, commands and running jobs must be restarted or reconfigured for a change in SwitchType"
         " to take effect.", "reconfigure"),
        ("Changes in node configuration (e.g. adding nodes, changing their processor count, etc.) require"
         " restarting or reconfiguring all slurmctld and slurmd daemons.", "reconfigure"),
        ("SlurmDBD must be terminated prior to changing the value of AuthType and later restarted.",
         "restart_slurmdbd"),
        ("Restarted jobs will have the environment variable SLURM_RESTART_COUNT set.", None),
    ],
)
def test_impact_of_a_sentence(sentence: str, impact: str | None) -> None:
    assert slurm_docs.impact_of(sentence) == impact


def installed_2205() -> slurm_docs.Sources:
    found = slurm_docs.installed_sources("22.05")
    if found is None or "slurm.conf" not in found.pages:
        pytest.skip("the Slurm 22.05 man pages are not installed here (Debian 12's slurm-client and slurmdbd)")
    return found


def test_the_checked_in_22_05_data_is_what_the_installed_man_pages_say() -> None:
    found = installed_2205()
    derived = slurm_docs.series_facts("22.05", found.pages, found.packages, found.plugins)
    checked_in = json.loads((DATA / "slurm-22.05.json").read_text())
    if derived["packages"] != checked_in["packages"]:
        derived["packages"] = checked_in["packages"]  # another 22.05 build: its text must still agree
    assert derived == checked_in, "run `python devtools/slurm_docs.py --series 22.05` and review the diff"


def test_the_22_05_quotes_of_rules_json_are_in_the_installed_man_pages() -> None:
    found = installed_2205()
    without_docs = slurm_docs.Sources(found.pages, {}, found.packages)
    assert slurm_docs.quote_problems("22.05", without_docs, RULES) == []
    quoted = [quote for series, quote in slurm_docs.cited_quotes(RULES, "") if series == "22.05" and "man_page" in quote]
    assert len(quoted) >= 3


def test_a_quote_the_man_page_does_not_have_is_a_problem() -> None:
    found = installed_2205()
    rules = {"series": {"22.05": {"nodes": {"sources": [{"man_page": "scontrol(1)", "quote": "Nodes need no restart."}]}}}}
    problems = slurm_docs.quote_problems("22.05", slurm_docs.Sources(found.pages, {}, found.packages), rules)
    assert problems == ["rules.json: 22.05 scontrol(1) does not say: Nodes need no restart."]


@pytest.mark.parametrize("name", supported_series())
def test_the_data_files_are_stable(name: str) -> None:
    path = DATA / f"slurm-{name}.json"
    assert slurm_docs.dump(json.loads(path.read_text())) == path.read_text(), "not as the generator writes it"


@pytest.mark.parametrize("name", supported_series())
def test_the_node_rule_for_changed_nodes_agrees_with_the_man_page(name: str) -> None:
    """rules.json's "changed" node rule and slurm.conf(5)'s NODE CONFIGURATION note must not disagree."""
    note = json.loads((DATA / f"slurm-{name}.json").read_text())["files"]["slurm.conf"]["records"]["NodeName"]["note"]
    assert RULES["series"][name]["nodes"]["changed"] == note["impact"]


def test_docs_slurm_rules_md_is_in_step_with_the_data() -> None:
    assert (REPO / "docs" / "slurm-rules.md").read_text() == render(), (
        "docs/slurm-rules.md is out of step with plugins/plugin_utils/slurm_facts/data: run `python devtools/slurm_docs.py --docs`"
    )
