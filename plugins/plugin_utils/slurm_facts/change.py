"""What a change of the Slurm configuration files needs: restarts, a reconfigure, or nothing.

Each changed key, node, partition or file is one cause, with the impact its series' data gives it
(data/slurm-<series>.json: the man pages; data/rules.json: the node, listening, startup and file
rules). The causes then become the deploy's actions, whose markers the roles act on:

- a slurmctld restart restarts every slurmd as well, because the deploy runs no ``scontrol
  reconfigure`` after restarting slurmctld and every slurmd must read the changed files;
- any other change of a file slurmctld reads is applied with ``scontrol reconfigure``, which also
  reaches the slurmds that are not restarted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .facts import file_data, rules, rules_series, series, spellings
from .parse import Conf, logical_lines, pairs, parse_conf

ACTIONS = {
    "none": frozenset(),
    "reconfigure": frozenset({"reconfigure"}),
    "restart_slurmd": frozenset({"slurmd"}),
    "restart_slurmctld": frozenset({"slurmctld"}),
    "restart_slurmctld_slurmd": frozenset({"slurmctld", "slurmd"}),
    "restart_all": frozenset({"slurmctld", "slurmd", "slurmdbd"}),
    "restart_slurmdbd": frozenset({"slurmdbd"}),
}
WORDS = {
    "reconfigure": "scontrol reconfigure",
    "restart_slurmd": "restart slurmd",
    "restart_slurmctld": "restart slurmctld",
    "restart_slurmctld_slurmd": "restart slurmctld and slurmd",
    "restart_all": "restart all Slurm daemons (running jobs and commands too, says the man page)",
    "restart_slurmdbd": "restart slurmdbd",
}
# Read by slurmctld and slurmd: a change reaches them by restart or scontrol reconfigure.
SLURM_FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf")
FILES = (*SLURM_FILES, "slurmdbd.conf")
# An unknown key or file: restart both daemons, the choice that cannot leave one on the old value.
CONSERVATIVE = "restart_slurmctld_slurmd"
Values = tuple[str, ...]
# The rules.json blocks of a series that give slurm.conf keys an impact of their own.
CURATED_KEY_RULES = ("listening", "startup")
# slurm.conf lines that name nodes one by one (hostlists expanded).
HOSTLIST_RECORDS = ("NodeName", "DownNodes", "FrontendName")


@dataclass(frozen=True)
class Cause:
    file: str
    impact: str
    reason: str


@dataclass(frozen=True)
class ConfChange:
    """What a configuration change needs, and why (one line per cause in ``reasons``).

    ``impact``: "none", "reconfigure" (``scontrol reconfigure`` only) or "restart" (at least one
    daemon restarts). ``restart_slurmdbd``: slurmdbd.conf changed, or a slurm.conf key whose man
    page wants every daemon restarted (AuthType); the deploy restarts slurmdbd for the former only
    (the slurmdbd role, on any slurmdbd.conf change)."""

    restart_slurmctld: bool
    restart_slurmd: bool
    restart_slurmdbd: bool
    reconfigure: bool
    reasons: tuple[str, ...]
    nodes_added: tuple[str, ...] = ()
    nodes_removed: tuple[str, ...] = ()

    @property
    def impact(self) -> str:
        if self.restart_slurmctld or self.restart_slurmd or self.restart_slurmdbd:
            return "restart"
        return "reconfigure" if self.reconfigure else "none"


def conf_change(version: str, old: dict[str, str | None], new: dict[str, str | None]) -> ConfChange:
    """What changing the files ``old`` into ``new`` needs on Slurm ``version``.

    ``old``/``new`` map a file name (slurm.conf, gres.conf, cgroup.conf, topology.conf,
    slurmdbd.conf) to its text; None or absent is a file that is not there. Raises
    UnknownSlurmVersion for a version without rules."""
    name = series(version)
    causes: list[Cause] = []
    added: list[str] = []
    removed: list[str] = []
    for file_name in sorted(set(old) | set(new), key=file_order):
        before, after = old.get(file_name), new.get(file_name)
        if before == after:
            continue
        if file_name == "slurm.conf":
            causes += SlurmConfDiff(name, before, after, added, removed).causes()
        else:
            causes += other_file_causes(name, file_name, before, after)
    return summarise(causes, added, removed)


def host_conf_change(
    version: str, old: dict[str, str | None], new: dict[str, str | None]
) -> tuple[ConfChange, str]:
    """``conf_change`` for a host that reports ``version`` (the roles' filter and ``plan`` both ask
    this): a version without rules ("" before Slurm is installed, or another release) gets the
    rules of ``rules_series``, said in the first reason. Returns the change and the series applied."""
    applied, why = rules_series(version)
    change = conf_change(applied, old, new)
    if why and change.reasons:
        change = replace(change, reasons=(why, *change.reasons))
    return change, applied


def file_order(file_name: str) -> tuple[int, str]:
    return (FILES.index(file_name) if file_name in FILES else len(FILES), file_name)


def summarise(causes: list[Cause], added: list[str], removed: list[str]) -> ConfChange:
    actions = frozenset().union(*(ACTIONS[cause.impact] for cause in causes))
    slurm_files = sorted({cause.file for cause in causes if cause.file != "slurmdbd.conf"})
    restart_slurmctld = "slurmctld" in actions
    reasons = [cause.reason for cause in causes]
    restart_slurmd = "slurmd" in actions
    if restart_slurmctld and slurm_files and not restart_slurmd:
        restart_slurmd = True
        reasons.append(
            f"{', '.join(slurm_files)}: restart slurmd as well: every slurmd must read the change,"
            " and after restarting slurmctld the deploy runs no scontrol reconfigure"
        )
    reconfigure = bool(slurm_files) and not restart_slurmctld
    if reconfigure and "reconfigure" not in actions:
        reasons.append(f"{', '.join(slurm_files)}: scontrol reconfigure as well, so that slurmctld reads"
                       " the change")
    return ConfChange(restart_slurmctld, restart_slurmd, "slurmdbd" in actions, reconfigure, tuple(reasons),
                      tuple(added), tuple(removed))


# ---- slurm.conf --------------------------------------------------------------------------------


class SlurmConfDiff:
    """The causes of one slurm.conf change; node names added and removed go to ``added``/``removed``."""

    def __init__(self, name: str, before: str | None, after: str | None, added: list[str], removed: list[str]):
        self.series, self.before, self.after = name, before, after
        self.added, self.removed = added, removed
        self.facts = file_data(name, "slurm.conf")
        self.curated = rules()["series"][name]
        self.written: dict[str, str] = {}

    def causes(self) -> list[Cause]:
        if self.before is None or self.after is None:
            state = "is new here" if self.before is None else "is removed"
            return [Cause("slurm.conf", CONSERVATIVE, f"slurm.conf {state}: {WORDS[CONSERVATIVE]}")]
        records = list(self.facts["records"])
        expand = [key for key in HOSTLIST_RECORDS if key in records]
        old, new = parse_conf(self.before, records, expand), parse_conf(self.after, records, expand)
        self.written = {**old.spelled, **new.spelled}
        found = []
        for key in sorted(set(old.settings) | set(new.settings)):
            if old.settings.get(key, ()) != new.settings.get(key, ()):
                found += self.setting_causes(key, old, new)
        for kind in sorted(set(old.records) | set(new.records)):
            found += self.record_causes(kind, old, new)
        return found

    def source(self, where: str = "") -> str:
        return f"slurm.conf(5){' ' + where if where else ''}, Slurm {self.series}"

    def cause(self, impact: str, what: str, source: str) -> Cause:
        return Cause("slurm.conf", impact, f"slurm.conf: {what}: {WORDS[impact]} ({source})")

    def unknown(self, what: str, key: str) -> Cause:
        return Cause("slurm.conf", CONSERVATIVE, f"slurm.conf: {what}: {WORDS[CONSERVATIVE]}"
                     f" ({undocumented(key, 'slurm.conf', self.series)})")

    def setting_causes(self, key: str, old: Conf, new: Conf) -> list[Cause]:
        documented = spellings(self.series, "slurm.conf").get(key)
        written = new.spelled.get(key) or old.spelled[key]
        if documented is None:
            return [self.unknown(f"{written} changed", written)]
        if documented == "Include":
            return [self.cause(CONSERVATIVE, "Include lines changed", "the included files are not read here:"
                               " the conservative choice")]
        facts = self.facts["keys"][documented]
        before, after = old.settings.get(key, ()), new.settings.get(key, ())
        found = self.option_causes(documented, facts, before, after) if facts.get("options") else []
        if not found:
            found = [self.cause(self.key_impact(facts), f"{documented} changed", self.source())]
        return found + self.curated_key_causes(documented)

    def key_impact(self, facts: dict) -> str:
        return facts.get("impact") or self.facts["default"]["impact"]

    def option_causes(self, key: str, facts: dict, before: Values, after: Values) -> list[Cause]:
        """One cause per option the man page notes a restart for, one for the other changed options."""
        if len(before) > 1 or len(after) > 1:
            return []
        old, new = options_of(before[0] if before else ""), options_of(after[0] if after else "")
        changed = sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))
        noted = {name.lower(): (name, option) for name, option in facts["options"].items()}
        found = [self.cause(noted[name][1]["impact"], f"{key} changed ({noted[name][0]})", self.source())
                 for name in changed if name in noted]
        plain = [name for name in changed if name not in noted]
        if plain or not found:
            listed = f" ({', '.join(plain)})" if plain else ""
            found.append(self.cause(self.key_impact(facts), f"{key} changed{listed}", self.source()))
        return found

    def curated_key_causes(self, key: str) -> list[Cause]:
        """The causes rules.json gives a key beyond its man-page note: a listening port or
        authentication plugin, or what slurmctld reads only when it starts (CURATED_KEY_RULES)."""
        found = []
        for name in CURATED_KEY_RULES:
            rule = self.curated.get(name, {})
            impact = rule.get("keys", {}).get(key)
            if impact is not None:
                found.append(self.cause(impact, f"{key} changed", curated_source(rule["sources"], self.series)))
        return found

    def record_causes(self, kind: str, old: Conf, new: Conf) -> list[Cause]:
        before, after = old.records.get(kind, {}), new.records.get(kind, {})
        record = spellings(self.series, "slurm.conf").get(kind) or new.spelled.get(kind) or old.spelled[kind]
        if record == "NodeName":
            return self.node_causes(before, after)
        found = []
        for name in [*before, *(each for each in after if each not in before)]:
            if before.get(name) != after.get(name):
                found += self.one_record_causes(record, name, before.get(name), after.get(name))
        return found

    def one_record_causes(self, record: str, name: str, before: dict | None, after: dict | None) -> list[Cause]:
        facts = self.facts["records"][record]
        note = facts.get("note", {})
        if before is None or after is None:
            state = "added" if before is None else "removed"
            tail = f"; {note['quote']}" if note and state == "removed" else ""
            impact = note.get("impact") or self.facts["default"]["impact"]
            return [self.cause(impact, f"{record} {name} {state}", self.source(facts["section"]) + tail)]
        keys, unknown = self.changed_keys(record, before, after)
        found = [self.unknown(f"{record} {name}: {key} changed", key) for key in unknown]
        impacts = [facts["keys"][key].get("impact") for key in keys] + [note.get("impact")]
        impact = strongest([each for each in impacts if each] or [self.facts["default"]["impact"]])
        what = f"{record} {name} changed ({', '.join(keys)})"
        return [*found, self.cause(impact, what, self.source(facts["section"]))]

    def changed_keys(self, record: str, before: dict, after: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The changed keys of a record: (documented ones as spelled, undocumented ones)."""
        spelled = {key.lower(): key for key in self.facts["records"][record]["keys"]}
        changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
        return (tuple(spelled[key] for key in changed if key in spelled),
                tuple(self.written.get(key, key) for key in changed if key not in spelled))

    def node_causes(self, before: dict[str, dict], after: dict[str, dict]) -> list[Cause]:
        rule = self.curated["nodes"]
        source = curated_source(rule["sources"], self.series)
        added = [name for name in after if name not in before]
        removed = [name for name in before if name not in after]
        self.added += added
        self.removed += removed
        found = []
        if added:
            found.append(self.cause(rule["added"], f"nodes added: {shown(added)}", source))
        if removed:
            drain = curated_source([rule["before_removal"]], self.series)
            what = f"nodes removed: {shown(removed)} (drain them first: {drain})"
            found.append(self.cause(rule["removed"], what, source))
        return found + self.changed_node_causes(before, after)

    def changed_node_causes(self, before: dict[str, dict], after: dict[str, dict]) -> list[Cause]:
        groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
        for name, old in before.items():
            if name in after and old != after[name]:
                groups.setdefault(self.changed_keys("NodeName", old, after[name]), []).append(name)
        rule = self.curated["nodes"]
        found = []
        for (keys, unknown), names in groups.items():
            what = f"node {shown(names)} changed ({', '.join([*keys, *unknown])})"
            found += [self.unknown(f"node {shown(names)}: {key} changed", key) for key in unknown]
            found.append(self.cause(rule["changed"], what, curated_source(rule["sources"], self.series)))
            listening = [key for key in keys if key in self.curated["listening"]["node_keys"]]
            for key in listening:
                impact = self.curated["listening"]["node_keys"][key]
                found.append(self.cause(impact, f"node {shown(names)}: {key} changed",
                                        curated_source(self.curated["listening"]["sources"], self.series)))
        return found


def options_of(value: str) -> dict[str, str]:
    """A comma-separated option list ("bf_interval=60,no_backup_scheduling") as lower name -> value."""
    found = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, _equals, setting = item.partition("=")
        found[name.lower()] = setting
    return found


def undocumented(key: str, file_name: str, name: str) -> str:
    return f"{key} is not a key {file_name}(5) of Slurm {name} documents: the conservative choice"


def shown(names: list[str]) -> str:
    return ",".join(names) if len(names) <= 6 else f"{','.join(names[:3])} and {len(names) - 3} more"


def strongest(impacts: list[str]) -> str:
    return max(impacts, key=lambda impact: (len(ACTIONS[impact]), impact != "reconfigure"))


def curated_source(sources: list[dict], name: str) -> str:
    """How a reason names the first source of a rule of rules.json."""
    first = sources[0]
    label = first.get("man_page") or first.get("doc_page") or first.get("url", "")
    where = f" {first['where']}" if first.get("where") else ""
    return f"{label}{where}, Slurm {name}"


# ---- the other files ---------------------------------------------------------------------------


def other_file_causes(name: str, file_name: str, before: str | None, after: str | None) -> list[Cause]:
    if file_name not in FILES:
        return [Cause(file_name, CONSERVATIVE, f"{file_name} changed: {WORDS[CONSERVATIVE]} (not a file these"
                      " rules cover: the conservative choice)")]
    found = key_causes(name, file_name, before or "", after or "")
    found += floor_causes(file_name, found)
    if found and (before is None or after is None):
        state = "is new here" if before is None else "is removed"
        impact = strongest([cause.impact for cause in found])
        return [Cause(file_name, impact, f"{file_name} {state}: {WORDS[impact]} (its keys and the file rule)")]
    return found


def key_causes(name: str, file_name: str, before: str, after: str) -> list[Cause]:
    """One cause per changed key of a file other than slurm.conf."""
    facts = file_data(name, file_name)
    source = f"{facts.get('man_page', file_name)}, Slurm {name}"
    default = facts["default"]["impact"] if facts else CONSERVATIVE
    found = []
    for key in changed_item_keys(file_name, before, after):
        documented = spellings(name, file_name).get(key.lower())
        if documented is None:
            impact = "restart_slurmdbd" if file_name == "slurmdbd.conf" else CONSERVATIVE
            found.append(Cause(file_name, impact, f"{file_name}: {key} changed: {WORDS[impact]}"
                               f" ({undocumented(key, file_name, name)})"))
            continue
        impact = facts["keys"][documented].get("impact") or default
        found.append(Cause(file_name, impact, f"{file_name}: {documented} changed: {WORDS[impact]} ({source})"))
    return found


def floor_causes(file_name: str, found: list[Cause]) -> list[Cause]:
    """The file's own rule (rules.json "files"), where the keys' causes do not already do as much."""
    floor = rules()["files"][file_name]["floor"]
    covered = frozenset().union(*(ACTIONS[cause.impact] for cause in found))
    if not found or ACTIONS[floor] <= covered:
        return []
    why = rules()["files"][file_name]["why"]
    return [Cause(file_name, floor, f"{file_name} changed: {WORDS[floor]} ({why})")]


def changed_item_keys(file_name: str, before: str, after: str) -> list[str]:
    """The keys (as first written) whose values differ between the two texts, item by item."""
    (old, old_spelled), (new, new_spelled) = items_of(file_name, before), items_of(file_name, after)
    spelled = {**new_spelled, **old_spelled}
    changed: dict[str, None] = {}
    for item in dict.fromkeys([*old, *new]):
        was, now = old.get(item, {}), new.get(item, {})
        keys = dict.fromkeys([*was, *now])
        changed.update(dict.fromkeys(key for key in keys if was.get(key) != now.get(key)))
    return [spelled[key] for key in changed]


def items_of(file_name: str, text: str) -> tuple[dict[str, dict[str, tuple[str, ...]]], dict[str, str]]:
    """A file as items (what one line or key describes) -> lower key -> values, and lower key -> key
    as written.

    gres.conf: the lines of one NodeName and Name together; topology.conf: one line per switch,
    block or ring (its first pair); cgroup.conf, slurmdbd.conf: one item per key."""
    items: dict[str, dict[str, tuple[str, ...]]] = {}
    spelled: dict[str, str] = {}
    for line in logical_lines(text):
        for identity, key, value in item_pairs(file_name, pairs(line)):
            item = items.setdefault(identity, {})
            item[key.lower()] = (*item.get(key.lower(), ()), value)
            spelled.setdefault(key.lower(), key)
    return items, spelled


def item_pairs(file_name: str, found: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    if file_name == "gres.conf":
        lower = {key.lower(): value for key, value in found}
        identity = f"NodeName={lower.get('nodename', '')} Name={lower.get('name', '')}"
        return [(identity, key, value) for key, value in found]
    if file_name == "topology.conf":
        identity = f"{found[0][0].lower()}={found[0][1]}"
        return [(identity, key, value) for key, value in found]
    return [(key.lower(), key, value) for key, value in found]
