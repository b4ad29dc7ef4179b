"""A deterministic corpus of broken (and a few still valid) inventories.

Every mutant starts from one of the shipped inventories and makes one mistake a person really
makes: a lost required key, a typo in a key, a wrong type, a port out of range, a malformed
hostlist, a name used twice, a reference to nothing, two default partitions, a bad cluster name,
broken YAML, an empty file, a list instead of a mapping, bytes that are not UTF-8, a hostlist of
billions of names... The same seed always gives the same corpus, byte for byte.

Structural mutations edit the parsed document and dump it again; the YAML-level ones (syntax,
duplicate keys, encodings, control characters, truncation, line edits) edit the original text,
comments and all. ``KINDS`` says, per kind, whether every mutant of it must be rejected; a mutant
may also name the field (``expect_field``) or the lines (``expect_lines``) some problem must be
reported at, known from the edit itself rather than from the loader.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from unit_helpers import all_paths

from cluster_cli import hostlist
from cluster_cli.errors import format_location
from cluster_cli.model import Inventory

REPO = Path(__file__).resolve().parents[2]
BASES = {
    "local": REPO / "inventories" / "local" / "inventory.yaml",
    "minimal": REPO / "inventories" / "examples" / "minimal.yaml",
    "gpu-cluster": REPO / "inventories" / "examples" / "gpu-cluster.yaml",
}
SEED = 20_240_611
PER_KIND_AND_BASE = 24  # at most this many mutants of one kind from one base

# kind -> True when every mutant of the kind is an invalid inventory (so each must be rejected)
KINDS: dict[str, bool] = {
    "missing_required": True,
    "typo_key": True,
    "unknown_key": True,
    "wrong_type": True,
    "null_value": False,
    "out_of_range": True,
    "malformed_hostlist": True,
    "huge_hostlist": True,
    "duplicate_names": True,
    "unknown_partition_group": True,
    "two_default_partitions": True,
    "undefined_host": True,
    "bad_cluster_name": True,
    "config_injection": True,
    "cross_field": True,
    "yaml_syntax": True,
    "duplicate_keys": True,
    "empty_file": True,
    "top_level_not_mapping": True,
    "not_utf8": True,
    "control_characters": True,
    "merge_keys": True,
    "key_newline": True,
    "bad_paths": True,
    "template_expression": True,
    "truncated": False,
    "line_edits": False,
    "random_value": False,
    "equivalent": False,  # same inventory, other spelling: every one must be accepted
}
ALWAYS_VALID = {"equivalent"}

DocPath = tuple[str | int, ...]


# Lists whose items may be a bare name instead of a mapping: a string there is valid.
NAME_SHORTHAND_ITEMS = frozenset({("accounting", "users")})


@dataclass(frozen=True)
class Mutant:
    kind: str
    base: str
    label: str  # what was changed, for failure messages
    data: bytes
    expect_field: str | None = None  # a problem must be reported at this field (or one under it)
    expect_lines: tuple[int, int] | None = None  # ... at a line in this range (first, last)

    @property
    def must_fail(self) -> bool:
        return KINDS[self.kind]

    @property
    def ident(self) -> str:
        return f"{self.kind}/{self.base}: {self.label}"


# -- the model, as far as the generator needs it ----------------------------------------------------


def _models_inside(annotation: Any) -> tuple[str, type[BaseModel] | None]:
    """('model'|'list'|'dict'|'scalar', the model class inside, if any)."""
    shape = "scalar"
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return shape, None
            annotation = members[0]
        elif origin is list:
            shape = "list" if shape == "scalar" else shape
            annotation = typing.get_args(annotation)[0]
        elif origin is dict:
            shape = "dict" if shape == "scalar" else shape
            annotation = typing.get_args(annotation)[1]
        else:
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                return ("model" if shape == "scalar" else shape), annotation
            return shape, None


def model_at(path: DocPath) -> type[BaseModel] | None:
    """The model class of the mapping at ``path`` of a document, or None for free-form maps and scalars."""
    model: type[BaseModel] | None = Inventory
    pending: str | None = None  # 'list' or 'dict': the next part is an index or a free key
    for part in path:
        if model is None:
            return None
        if pending is not None:
            pending = None
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        shape, inner = _models_inside(field.annotation)
        if inner is None:
            return None
        model = inner
        pending = shape if shape in ("list", "dict") else None
    return None if pending else model




def get(document: Any, path: DocPath) -> Any:
    for part in path:
        document = document[part]
    return document


def put(document: Any, path: DocPath, value: Any) -> None:
    get(document, path[:-1])[path[-1]] = value


def dump(document: Any) -> str:
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1_000_000)


def loc(path: DocPath) -> str:
    return format_location(path)


# -- the generator ------------------------------------------------------------------------------------


class _Generator:
    """Mutants of one base inventory."""

    def __init__(self, base: str, rng: random.Random):
        self.base = base
        self.rng = rng
        self.text = BASES[base].read_text(encoding="utf-8")
        self.document = yaml.safe_load(self.text)
        self.paths = [path for path in all_paths(self.document) if path]

    def copy(self) -> Any:
        return copy.deepcopy(self.document)

    def structural(self, kind: str, label: str, document: Any, expect: DocPath | str | None = None) -> _Candidate:
        field = loc(expect) if isinstance(expect, tuple) else expect
        return _Candidate(Mutant(kind, self.base, label, b"", field), document)

    def textual(
        self, kind: str, label: str, text: str | bytes, expect: str | None = None, lines: tuple[int, int] | None = None
    ) -> _Candidate:
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        return _Candidate(Mutant(kind, self.base, label, data, expect, lines), None)

    def set_value(self, kind: str, path: DocPath, value: Any, label: str | None = None) -> _Candidate:
        """The document with ``value`` at ``path`` (mappings made along it); the problem is expected there."""
        document = self.copy()
        ensure_mapping(document, path[:-1])
        put(document, path, value)
        return self.structural(kind, label or f"{loc(path)}: {value!r}", document, path)

    def model_mappings(self) -> list[tuple[DocPath, type[BaseModel]]]:
        found = []
        for path in [(), *self.paths]:
            model = model_at(path)
            if model is not None and isinstance(get(self.document, path), dict):
                found.append((path, model))
        return found

    def leaves(self) -> list[tuple[DocPath, Any, bool]]:
        """(path, value, free_form) of every scalar of the document."""
        found = []
        for path in self.paths:
            value = get(self.document, path)
            if isinstance(value, (dict, list)):
                continue
            parent = path[:-1]
            free_form = isinstance(get(self.document, parent), dict) and model_at(parent) is None
            found.append((path, value, free_form))
        return found

    def groups(self) -> list[dict[str, Any]]:
        return self.document["node_groups"]

    # -- structural kinds -----------------------------------------------------------------------------

    def missing_required(self) -> Iterator[_Candidate]:
        for path, model in self.model_mappings():
            for name, field in model.model_fields.items():
                if field.is_required() and name in get(self.document, path):
                    document = self.copy()
                    del get(document, path)[name]
                    yield self.structural("missing_required", f"delete {loc(path + (name,))}", document, path + (name,))

    def typo_key(self) -> Iterator[_Candidate]:
        for path, model in self.model_mappings():
            mapping = get(self.document, path)
            for key in mapping:
                for typo in self._typos(str(key)):
                    if typo in model.model_fields or typo in mapping:
                        continue
                    document = self.copy()
                    put_renamed(document, path, key, typo)
                    yield self.structural("typo_key", f"{loc(path + (key,))} -> {typo!r}", document, path + (typo,))

    def _typos(self, key: str) -> list[str]:
        typos = {
            key[:-1],  # a letter lost
            key + "s",  # plural
            key.replace("_", "-"),
            key.replace("_", ""),
            key.capitalize(),
            key.upper(),
            key + " ",  # trailing space inside quotes
        }
        if len(key) > 3:
            position = self.rng.randrange(len(key) - 1)
            typos.add(key[:position] + key[position + 1] + key[position] + key[position + 2 :])  # swapped
        typos.discard(key)
        typos.discard("")
        return sorted(typos)

    def unknown_key(self) -> Iterator[_Candidate]:
        invented = ["colour", "gpu_count", "hostname", "memory", "ip", "enable", "partition", "comment", "Port"]
        for path, model in self.model_mappings():
            for key in self.rng.sample(invented, 3):
                if key in model.model_fields or key in get(self.document, path):
                    continue
                document = self.copy()
                get(document, path)[key] = self.rng.choice(["yes", 4, None, ["a"], {"x": 1}])
                yield self.structural("unknown_key", f"add {loc(path + (key,))}", document, path + (key,))

    def wrong_type(self) -> Iterator[_Candidate]:
        for path, value, free_form in self.leaves():
            for wrong in self._wrong_values(value, free_form):
                document = self.copy()
                put(document, path, wrong)
                yield self.structural("wrong_type", f"{loc(path)}: {value!r} -> {wrong!r}", document, path)
        for path in self.paths:  # sections and lists of the wrong shape
            value = get(self.document, path)
            if isinstance(value, dict) and model_at(path) is not None:
                # a bare name stands for the mapping there (`users: [alice]`, model._user_entry)
                shorthand = tuple(path[:-1]) in NAME_SHORTHAND_ITEMS
                replacements: list[Any] = [list(value)[:2], *([] if shorthand else ["yes"]), 8]
            elif isinstance(value, list):
                replacements = [{"items": value[:1]}, 3]
            else:
                continue
            for wrong in replacements:
                document = self.copy()
                put(document, path, wrong)
                yield self.structural("wrong_type", f"{loc(path)}: {type(value).__name__} -> {wrong!r}", document, path)

    @staticmethod
    def _wrong_values(value: Any, free_form: bool) -> list[Any]:
        if free_form:
            return [[value], {"value": value}]
        if isinstance(value, bool):
            return ["maybe", [value]]
        if isinstance(value, int):
            return ["many", 1.5, [value], {"value": value}]
        if isinstance(value, float):
            return ["fast", [value]]
        if isinstance(value, str):
            return [42, True, [value], {"value": value}]
        return []

    def null_value(self) -> Iterator[_Candidate]:
        for path in self.paths:
            if get(self.document, path) is None:
                continue
            document = self.copy()
            put(document, path, None)
            yield self.structural("null_value", f"{loc(path)}: null", document)

    OUT_OF_RANGE: typing.ClassVar[dict[str, list[Any]]] = {
        "port": [0, 65536, 70000, -22],
        "sockets": [0, 65, -1],
        "cores_per_socket": [0, 1025, -16],
        "threads_per_core": [0, 9],
        "real_memory_mb": [0, -1024],
        "cpus": [0, -4],
        "weight": [-1],
        "count": [0, 65, -8],
        "uid": [0, -1, 2**31],
        "gid": [0, 2**31 + 5],
        "link_speed": [0, -100],
        "allreduce_busbw_gbps": [0, -5.5],
        "matmul_bf16_tflops": [0],
        "ddp_scaling_efficiency": [1.5, 0, -0.1],
    }

    def out_of_range(self) -> Iterator[_Candidate]:
        targets: list[tuple[DocPath, str]] = [
            (("controllers", "port"), "port"),
            (("accounting", "port"), "port"),
            (("ssh", "port"), "port"),
            (("slurm", "slurmd_port"), "port"),
            (("slurm", "uid"), "uid"),
            (("munge", "gid"), "gid"),
        ]
        for index, group in enumerate(self.groups()):
            for name in ("sockets", "cores_per_socket", "threads_per_core", "real_memory_mb", "cpus", "weight"):
                targets.append((("node_groups", index, name), name))
            if "host" in group:
                targets.append((("node_groups", index, "base_port"), "port"))
            if "gpus" in group:
                targets.append((("node_groups", index, "gpus", "count"), "count"))
        topology = self.document.get("topology") or {}
        for index, _ in enumerate(topology.get("switches", [])):
            targets.append((("topology", "switches", index, "link_speed"), "link_speed"))
        for gpu_type in (self.document.get("training") or {}).get("thresholds", {}):
            for name in ("allreduce_busbw_gbps", "matmul_bf16_tflops", "ddp_scaling_efficiency"):
                targets.append((("training", "thresholds", gpu_type, name), name))
        for path, rule in targets:
            for bad in self.OUT_OF_RANGE[rule]:
                yield self.set_value("out_of_range", path, bad, f"{loc(path)}: {bad}")

    def hostlist_fields(self) -> list[tuple[DocPath, str]]:
        fields: list[tuple[DocPath, str]] = []
        for index, group in enumerate(self.groups()):
            fields.append((("node_groups", index, "nodes"), group["nodes"]))
            if "addresses" in group:
                fields.append((("node_groups", index, "addresses"), group["addresses"]))
            if (group.get("gpus") or {}).get("devices"):
                fields.append((("node_groups", index, "gpus", "devices"), group["gpus"]["devices"]))
        for index, partition in enumerate(self.document["partitions"]):
            for item, value in enumerate(partition["nodes"]):
                fields.append((("partitions", index, "nodes", item), value))
        topology = self.document.get("topology") or {}
        for index, switch in enumerate(topology.get("switches", [])):
            for name in ("nodes", "switches"):
                if name in switch:
                    fields.append((("topology", "switches", index, name), switch[name]))
        return fields

    @staticmethod
    def _prefix(expression: str) -> str:
        return expression.split("[")[0].rstrip("-0123456789") or "n"

    def malformed_hostlist(self) -> Iterator[_Candidate]:
        shapes = [
            "{p}[001-", "{p}[3-1]", "{p}[a-b]", "{p}]1[", "{p}[[1-2]]", "{p}[1-2", "{p}[]", "{p}[1-2],",
            ",{p}1", "{p}[1-2] {p}[3-4]", "{p}[1--2]", "{p}[-1]", "{p}[1-2]]", "{p}[1,,2]", "{p}[1-2]x[", "",
            "{p}[1-2],,{p}3", "{p}[ ]", "{p}[0x1-0x4]", "{p}[1-2-3]",
        ]
        for path, expression in self.hostlist_fields():
            prefix = self._prefix(expression)
            for shape in self.rng.sample(shapes, 8):
                bad = shape.format(p=prefix)
                document = self.copy()
                put(document, path, bad)
                yield self.structural("malformed_hostlist", f"{loc(path)}: {bad!r}", document, path)

    def huge_hostlist(self) -> Iterator[_Candidate]:
        shapes = [
            "{p}[1-1000001]",
            "{p}[0-99999999999999999999]",
            "{p}[1-1000]x[1-1001]",
            "{p}[1-100]x[1-100]y[1-101]",
            "{p}[1-999999,1-999999]",
            "{p}[000000000001-999999999999]",
        ]
        for path, expression in self.hostlist_fields():
            prefix = self._prefix(expression)
            for shape in shapes:
                bad = shape.format(p=prefix)
                document = self.copy()
                put(document, path, bad)
                yield self.structural("huge_hostlist", f"{loc(path)}: {bad!r}", document, path)
        path, expression = self.hostlist_fields()[0]
        document = self.copy()
        put(document, path, "{p}[1-600000],{p}x[1-600000]".format(p=self._prefix(expression)))
        yield self.structural("huge_hostlist", "1,200,000 names in two pieces", document, path)
        for length in (64, 300, 100_000):  # a node name longer than any host name can be
            document = self.copy()
            name = "n" * length
            document["node_groups"][0]["nodes"] = name
            document["node_groups"][0].pop("addresses", None)
            yield self.structural(
                "huge_hostlist", f"a node name of {length} characters", document, ("node_groups", 0, "nodes")
            )

    def duplicate_names(self) -> Iterator[_Candidate]:
        groups = self.groups()
        for index, group in enumerate(groups):
            # the same nodes in a second group
            document = self.copy()
            twin = copy.deepcopy(group)
            twin["name"] = f"{group['name']}-again"
            document["node_groups"].append(twin)
            document["partitions"][0]["nodes"].append(twin["name"])
            yield self.structural(
                "duplicate_names", f"nodes of {group['name']} in a second group", document, ("node_groups", len(groups), "nodes")
            )
            # a group name used twice
            document = self.copy()
            twin = copy.deepcopy(group)
            twin["nodes"] = "spare[1-2]"
            for key in ("addresses", "host", "base_port"):
                twin.pop(key, None)
            twin.pop("gpus", None)
            document["node_groups"].append(twin)
            yield self.structural(
                "duplicate_names", f"group name {group['name']} twice", document, ("node_groups", len(groups), "name")
            )
            # a node named like a group
            for other in groups:
                document = self.copy()
                document["node_groups"][index]["nodes"] = f"{group['nodes']},{other['name']}"
                document["node_groups"][index].pop("addresses", None)
                yield self.structural("duplicate_names", f"node named like group {other['name']}", document, "node_groups")
        for first, second in zip(range(len(groups)), range(1, len(groups)), strict=False):
            document = self.copy()
            document["node_groups"][second]["nodes"] = groups[first]["nodes"]
            document["node_groups"][second].pop("addresses", None)
            yield self.structural(
                "duplicate_names", f"group {second} takes the nodes of group {first}", document, ("node_groups", second, "nodes")
            )
        hosts = self.document.get("hosts", [])
        for index, host in enumerate(hosts):
            document = self.copy()
            document["hosts"].append(copy.deepcopy(host))
            yield self.structural("duplicate_names", f"host {host['name']} twice", document, ("hosts", len(hosts), "name"))
        for index, partition in enumerate(self.document["partitions"]):
            document = self.copy()
            twin = copy.deepcopy(partition)
            twin["default"] = False
            document["partitions"].append(twin)
            where = ("partitions", len(self.document["partitions"]), "name")
            yield self.structural("duplicate_names", f"partition {partition['name']} twice", document, where)
        if self.document.get("login"):
            document = self.copy()
            document["login"].append(document["login"][0])
            yield self.structural("duplicate_names", "login host twice", document, ("login", len(document["login"]) - 1))
        topology = self.document.get("topology") or {}
        for index, switch in enumerate(topology.get("switches", [])):
            if index:
                document = self.copy()
                document["topology"]["switches"][index]["name"] = topology["switches"][0]["name"]
                yield self.structural(
                    "duplicate_names", f"switch {index} named like switch 0", document, ("topology", "switches", index, "name")
                )

    def unknown_partition_group(self) -> Iterator[_Candidate]:
        group = self.groups()[0]["name"]
        unknown = ["nosuchgroup", group + "s", group.upper() + "x", "gpu-old", "zz[1-4]", f"{self._prefix(self.groups()[0]['nodes'])}9999"]
        for index, partition in enumerate(self.document["partitions"]):
            for item in range(len(partition["nodes"])):
                for name in self.rng.sample(unknown, 3):
                    document = self.copy()
                    document["partitions"][index]["nodes"][item] = name
                    path = ("partitions", index, "nodes", item)
                    yield self.structural("unknown_partition_group", f"{loc(path)}: {name!r}", document, path)
            document = self.copy()
            document["partitions"][index]["nodes"].append("ghosts")
            path = ("partitions", index, "nodes", len(partition["nodes"]))
            yield self.structural("unknown_partition_group", f"{loc(path)}: 'ghosts' added", document, path)
            document = self.copy()
            document["partitions"][index]["nodes"] = []
            path = ("partitions", index, "nodes")
            yield self.structural("unknown_partition_group", f"{loc(path)}: empty", document, path)

    def two_default_partitions(self) -> Iterator[_Candidate]:
        partitions = self.document["partitions"]
        for index, partition in enumerate(partitions):
            if partition.get("default"):
                continue
            document = self.copy()
            document["partitions"][index]["default"] = True
            yield self.structural("two_default_partitions", f"{partition['name']} also default", document, "partitions")
        for extra in ("second", "debug2", "all"):
            document = self.copy()
            twin = copy.deepcopy(next(p for p in partitions if p.get("default")))
            twin["name"] = extra
            document["partitions"].insert(self.rng.randrange(len(partitions) + 1), twin)
            yield self.structural("two_default_partitions", f"extra default partition {extra}", document, "partitions")

    def undefined_host(self) -> Iterator[_Candidate]:
        ghosts = ["ghost", "ctl3", "head2", "db-1", "localhost2"]
        references: list[DocPath] = [("controllers", "primary"), ("accounting", "host")]
        if "backup" in self.document["controllers"]:
            references.append(("controllers", "backup"))
        references += [("login", index) for index, _ in enumerate(self.document.get("login", []))]
        references += [("node_groups", index, "host") for index, group in enumerate(self.groups()) if "host" in group]
        for path in references:
            for ghost in self.rng.sample(ghosts, 3):
                yield self.set_value("undefined_host", path, ghost)
        document = self.copy()
        document["controllers"]["backup"] = "ghost"
        yield self.structural("undefined_host", "backup controller ghost", document, ("controllers", "backup"))
        document = self.copy()
        document["accounting"].pop("host")
        yield self.structural("undefined_host", "accounting enabled without a host", document, ("accounting", "host"))
        document = self.copy()
        document["hosts"] = []
        yield self.structural("undefined_host", "no hosts at all", document, None)
        document = self.copy()
        document.pop("hosts")
        yield self.structural("undefined_host", "hosts deleted", document, None)

    def bad_cluster_name(self) -> Iterator[_Candidate]:
        names: list[Any] = [
            "Atlas", "1cluster", "my cluster", "", "a" * 41, "name.with.dot", "ünï", "-x", "x!", "_under",
            123, None, True, ["atlas"], {"name": "atlas"}, "a\nb", "ClusterName=x",
        ]
        for name in names:
            document = self.copy()
            document["cluster_name"] = name
            yield self.structural("bad_cluster_name", f"cluster_name: {name!r}", document, ("cluster_name",))

    def config_injection(self) -> Iterator[_Candidate]:
        cases: list[tuple[DocPath, Any]] = [
            (("partitions", 0, "max_time"), "1 day"),
            (("partitions", 0, "max_time"), "INFINITE # forever"),
            (("partitions", 0, "default_time"), "1:00\nNodeName=evil"),
            (("slurm", "paths", "log_dir"), "/var/log/my logs"),
            (("slurm", "paths", "state_dir"), "/var/lib/slurm\tx"),
            (("slurm", "conf", "SlurmctldDebug"), "info # noisy"),
            (("slurm", "conf", "SlurmctldDebug"), "info\nSlurmUser=root"),
            (("slurm", "conf", "Kill Wait"), 30),
            (("slurm", "conf", "1KillWait"), 30),
            (("slurm", "conf", "KillWait"), [1, 2]),
            (("cgroup", "overrides", "Constrain-Cores"), "yes"),
            (("cgroup", "overrides", "ConstrainCores"), "yes please"),
            (("nccl", "env", "NCCL_SOCKET_IFNAME"), "eth0\nNCCL_DEBUG=INFO"),
            (("nccl", "env", "nccl_debug"), "INFO"),
            (("nccl", "env", "NCCL_DEBUG"), 3),
            (("hosts", 0, "address"), "10.0.0.1 10.0.0.2"),
            (("hosts", 0, "address"), "10.0.0.1,10.0.0.2"),
            (("hosts", 0, "address"), "host(1)"),
            (("hosts", 0, "address"), ""),
            (("partitions", 0, "options", "MaxNodes"), "4 # four"),
            (("partitions", 0, "options", "Max Nodes"), 4),
            (("node_groups", 0, "features"), ["ib hdr"]),
            (("training", "packages"), ["torch"]),
            (("training", "packages"), ["numpy>=2"]),
        ]
        for path, value in cases:
            yield self.set_value("config_injection", path, value)

    def cross_field(self) -> Iterator[_Candidate]:
        for index, group in enumerate(self.groups()):
            where: DocPath = ("node_groups", index)
            if "host" in group:
                document = self.copy()
                del document["node_groups"][index]["base_port"]
                yield self.structural("cross_field", "single-host group without base_port", document, where + ("base_port",))
                document = self.copy()
                document["node_groups"][index]["base_port"] = 65534
                yield self.structural("cross_field", "ports pass 65535", document, where + ("base_port",))
                document = self.copy()
                document["node_groups"][index]["addresses"] = "10.9.9.[1-3]"
                yield self.structural("cross_field", "single-host group with addresses", document, where + ("addresses",))
            else:
                document = self.copy()
                document["node_groups"][index]["base_port"] = 17001
                yield self.structural("cross_field", "base_port on a multi-host group", document, where + ("base_port",))
            if "addresses" in group:
                document = self.copy()
                document["node_groups"][index]["addresses"] = "10.99.0.[1-2]"
                yield self.structural("cross_field", "too few addresses", document, where + ("addresses",))
            document = self.copy()
            document["node_groups"][index]["cpus"] = 100_000
            yield self.structural("cross_field", "more cpus than sockets x cores x threads", document, where + ("cpus",))
            gpus = group.get("gpus")
            if gpus and gpus.get("devices"):
                document = self.copy()
                document["node_groups"][index]["gpus"]["count"] = gpus["count"] + 1
                yield self.structural("cross_field", "device count differs from count", document, where + ("gpus", "devices"))
                document = self.copy()
                document["node_groups"][index]["gpus"]["autodetect"] = "nvml"
                yield self.structural("cross_field", "nvml and devices", document, where + ("gpus",))
                document = self.copy()
                document["node_groups"][index]["gpus"]["devices"] = "nvidia[0-" + str(gpus["count"] * 99 - 1) + "]"
                yield self.structural("cross_field", "devices wrong length or relative", document, where + ("gpus", "devices"))
            if gpus and gpus.get("autodetect") == "nvml":
                document = self.copy()
                document["node_groups"][index]["gpus"]["autodetect"] = "off"
                yield self.structural("cross_field", "no devices and no autodetect", document, where + ("gpus", "devices"))
                document = self.copy()
                document["node_groups"][index]["gpus"]["fake"] = True
                yield self.structural("cross_field", "fake with nvml", document, where + ("gpus", "fake"))
        document = self.copy()
        document["controllers"]["backup"] = document["controllers"]["primary"]
        yield self.structural("cross_field", "backup is the primary", document, ("controllers", "backup"))
        for key in ("ClusterName", "slurmctldport", "SlurmUser", "StateSaveLocation"):
            document = self.copy()
            ensure_mapping(document, ("slurm", "conf"))
            document["slurm"]["conf"][key] = "x"
            yield self.structural("cross_field", f"managed key {key} in slurm.conf", document, ("slurm", "conf", key))
        document = self.copy()
        ensure_mapping(document, ("slurm", "conf"))
        document["slurm"]["conf"].update({"KillWait": 30, "killwait": 60})
        yield self.structural("cross_field", "same key in two cases", document, ("slurm", "conf", "killwait"))
        document = self.copy()
        document["partitions"][0].setdefault("options", {})["MaxTime"] = "1:00"
        yield self.structural("cross_field", "managed partition option", document, ("partitions", 0, "options", "MaxTime"))
        document = self.copy()
        ensure_mapping(document, ("cgroup", "overrides"))
        document["cgroup"]["overrides"]["CgroupPlugin"] = "cgroup/v1"
        yield self.structural("cross_field", "CgroupPlugin override", document, ("cgroup", "overrides", "CgroupPlugin"))
        document = self.copy()
        document["partitions"] = [{**document["partitions"][0], "nodes": [self.groups()[0]["name"]]}]
        if len(self.groups()) > 1:
            yield self.structural("cross_field", "nodes in no partition", document, "partitions")
        document = self.copy()
        document["topology"] = {"plugin": "tree", "switches": [{"name": "leaf1", "nodes": self._first_node()}]}
        if self._node_count() > 1:
            yield self.structural("cross_field", "nodes on no switch", document, "topology")
        document = self.copy()
        document["topology"] = {
            "plugin": "tree",
            "switches": [
                {"name": "leaf1", "nodes": self.groups()[0]["nodes"]},
                {"name": "a", "switches": "b"},
                {"name": "b", "switches": "a"},
            ],
        }
        if len(self.groups()) == 1:
            yield self.structural("cross_field", "switch loop", document, ("topology", "switches"))
        document = self.copy()
        document["topology"] = {"plugin": "block", "switches": [{"name": "s", "nodes": self._first_node()}]}
        yield self.structural("cross_field", "switches under plugin: block", document, "topology")
        document = self.copy()
        document["accounting"]["enabled"] = True
        document["accounting"].pop("host", None)
        yield self.structural("cross_field", "accounting without host", document, ("accounting", "host"))
        document = self.copy()
        document["hosts"].append({"name": "idle", "address": "10.255.0.1"})
        yield self.structural("cross_field", "host without a role", document, ("hosts", len(document["hosts"]) - 1, "name"))

    def _first_node(self) -> str:
        nodes = self.groups()[0]["nodes"]
        prefix, _, rest = nodes.partition("[")
        return prefix + rest.split("-")[0].split(",")[0] if rest else nodes

    def _node_count(self) -> int:
        return sum(len(hostlist.expand(group["nodes"])) for group in self.groups())

    def random_value(self) -> Iterator[_Candidate]:
        pool: list[Any] = [None, True, False, 0, -1, 1, 2**63, 3.25, "", " ", "x", "gpu[1-2]", "null", "~",
                           "yes", "no", "off", "0x1F", "1e3", [], {}, [None], {"a": None}, "ünïcödé", "é" * 200]
        for path in self.rng.sample(self.paths, min(len(self.paths), 40)):
            value = self.rng.choice(pool)
            document = self.copy()
            put(document, path, copy.deepcopy(value))
            yield self.structural("random_value", f"{loc(path)}: {value!r}", document)

    # -- textual kinds --------------------------------------------------------------------------------

    def lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)

    def key_lines(self) -> list[int]:
        """Indices of lines like ``  key: value`` (a scalar or flow value, no list item, no comment)."""
        return [
            index
            for index, line in enumerate(self.lines())
            if ": " in line
            and "#" not in line
            and not line.lstrip().startswith("-")
            and line.split(":")[1].strip()
        ]

    def yaml_syntax(self) -> Iterator[_Candidate]:
        lines = self.lines()
        key_lines = self.key_lines()
        indented = [i for i in key_lines if lines[i].startswith("  ")]
        flow = [i for i in key_lines if ": [" in lines[i] and lines[i].rstrip().endswith("]")]
        # (label, line index, new text of the line, where PyYAML may notice: "here", "next" for the
        # next line with content, where the next token shows the mistake, or "later" for an
        # unclosed quote, which runs on to the next quote character of the file)
        edits: list[tuple[str, int, str, str]] = []
        for index in self.rng.sample(indented, min(4, len(indented))):
            edits.append(("tab indentation", index, "\t" + lines[index].lstrip(" "), "here"))
        for index in flow[:4]:
            edits.append(("unclosed '['", index, lines[index].rstrip()[:-1] + "\n", "next"))
        for index in self.rng.sample(key_lines, min(4, len(key_lines))):
            line = lines[index]
            key, _, value = line.partition(": ")
            edits += [
                ("unclosed quote", index, f'{key}: "{value}', "later"),
                ("key: value: value", index, line.rstrip("\n") + ": x\n", "here"),
                ("unclosed '{'", index, f"{key}: {{a: {value}", "next"),
                ("stray ']'", index, f"{key}: ]{value}", "here"),
                ("undefined alias", index, f"{key}: *nowhere\n", "here"),
                ("reserved '@'", index, f"{key}: @{value}", "here"),
            ]
            # `version:auto` as the only key of its mapping is valid YAML (the mapping becomes
            # that string): only a key among others makes it a syntax error
            if not self._only_key_of_its_mapping(lines, index):
                edits.append(("no space after the colon", index, f"{key}:{value}", "next"))
        for label, index, changed_line, notice in edits:
            changed = list(lines)
            changed[index] = changed_line
            following = [i for i in range(index + 1, len(lines)) if lines[i].strip() and not lines[i].lstrip().startswith("#")]
            last = {"here": index, "next": following[0] if following else index, "later": len(lines) - 1}[notice]
            yield self.textual(
                "yaml_syntax", f"{label} on line {index + 1}", "".join(changed), "(yaml)", (index + 1, last + 1)
            )
        end = len(lines) + 1  # the first appended line
        for label, appended, line in [
            ("a second document", "---\ncluster_name: other\n", end),
            ("a list item in a mapping", "- stray\n", end),
            ("deep nesting", "deep: " + "[" * 70 + "]" * 70 + "\n", end),
            ("a bad block scalar indicator", "note: |x\n  text\n", end),
            ("a directive after content", "%YAML 1.1\n", end),
            ("words without a colon", "just some words\nmore: words\n", end + 1),
        ]:
            yield self.textual("yaml_syntax", label, self.text + appended, "(yaml)", (line, line))

    @staticmethod
    def _only_key_of_its_mapping(lines: list[str], index: int) -> bool:
        """No neighbouring content line has the key's indentation: its mapping holds it alone."""
        def indent(line: str) -> int:
            return len(line) - len(line.lstrip(" "))

        content = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
        position = content.index(index)
        neighbours = [lines[i] for i in content[max(0, position - 1):position] + content[position + 1:position + 2]]
        return all(indent(line) < indent(lines[index]) for line in neighbours)

    def duplicate_keys(self) -> Iterator[_Candidate]:
        lines = self.lines()
        for index in self.rng.sample(self.key_lines(), min(12, len(self.key_lines()))):
            changed = list(lines)
            changed.insert(index + 1, lines[index])
            yield self.textual("duplicate_keys", f"line {index + 1} twice", "".join(changed), None, (index + 2, index + 2))
        top_keys = [line.split(":")[0] for line in lines if line[:1].isalpha() and ":" in line]
        for key in top_keys:
            text = self.text + f"{key}: {{}}\n"
            line = len(lines) + 1
            yield self.textual("duplicate_keys", f"{key} again at the end", text, key, (line, line))

    def empty_file(self) -> Iterator[_Candidate]:
        comments = "".join(line for line in self.lines() if line.lstrip().startswith("#"))
        for label, text in [
            ("empty", ""), ("newline", "\n"), ("blank lines", "  \n\n   \n"), ("comments only", comments),
            ("document marker", "---\n"), ("null", "~\n"), ("null word", "null\n"),
            ("marker and comments", "---\n" + comments + "...\n"),
        ]:
            yield self.textual("empty_file", label, text, "(top level)")

    def top_level_not_mapping(self) -> Iterator[_Candidate]:
        indented = "".join("  " + line if line.strip() else line for line in self.lines())
        body = "".join("  " + line if line.strip() else line for line in self.lines() if not line.startswith(("#", "---")))
        yield self.textual("top_level_not_mapping", "the inventory as a list item", "- " + body[2:], "(top level)")
        yield self.textual(
            "top_level_not_mapping", "a list of inventories", dump([self.document, self.document]), "(top level)"
        )
        yield self.textual("top_level_not_mapping", "top-level keys as a list", dump(list(self.document)), "(top level)")
        yield self.textual(
            "top_level_not_mapping", "a list of one-key mappings",
            dump([{key: value} for key, value in self.document.items()]), "(top level)",
        )
        yield self.textual("top_level_not_mapping", "the name alone", f"{self.document['cluster_name']}\n", "(top level)")
        yield self.textual("top_level_not_mapping", "a number", "42\n", "(top level)")
        yield self.textual("top_level_not_mapping", "a boolean", "yes\n", "(top level)")
        yield self.textual("top_level_not_mapping", "a block scalar", "|\n" + indented, "(top level)")

    def not_utf8(self) -> Iterator[_Candidate]:
        data = self.text.encode("utf-8")
        line_starts = [0] + [index + 1 for index, byte in enumerate(data) if byte == ord("\n")]
        for bad in (b"\xff", b"\xfe", b"\xc3(", b"\xe9", b"\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"):
            for _ in range(2):
                offset = self.rng.choice(line_starts)  # characters stay whole: a line start, then a few bytes in
                offset = min(offset + self.rng.randrange(4), len(data))
                line = data[:offset].count(b"\n") + 1
                mutated = data[:offset] + bad + data[offset:]
                yield self.textual("not_utf8", f"{bad!r} at byte {offset}", mutated, "(file)", (line, line))
        yield self.textual("not_utf8", "UTF-16", self.text.encode("utf-16"), "(file)", (1, 1))
        latin = ("# café\n" + self.text).encode("latin-1")
        yield self.textual("not_utf8", "latin-1 comment", latin, "(file)", (1, 1))
        last = self.text.count("\n") + 1
        yield self.textual("not_utf8", "cut inside a character", data + "é".encode()[:1], "(file)", (last, last))

    def control_characters(self) -> Iterator[_Candidate]:
        for char in ("\x00", "\x01", "\x07", "\x1b", "\x7f", "\ufffe", "\x0b", "\x9b"):
            for _ in range(2):
                offset = self.rng.randrange(len(self.text))
                text = self.text[:offset] + char + self.text[offset:]
                line = self.text.count("\n", 0, offset) + 1
                yield self.textual("control_characters", f"{char!r} at {offset}", text, "(yaml)", (line, line))

    def merge_keys(self) -> Iterator[_Candidate]:
        end = len(self.lines()) + 1  # the first appended line
        for levels in (5, 6):
            bomb = "x0: &x0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8}\n" + "".join(
                f"x{level}: &x{level} {{<<: [" + ", ".join([f"*x{level - 1}"] * 9) + "]}\n"
                for level in range(1, levels + 1)
            )
            yield self.textual("merge_keys", f"a merge-key bomb of {levels} levels", self.text + bomb, "(yaml)", (end, end + levels))
        yield self.textual("merge_keys", "a merge of a number", self.text + "<<: 3\n", "(yaml)", (end, end))
        yield self.textual("merge_keys", "a merge of a list of numbers", self.text + "<<: [1, 2]\n", "(yaml)", (end, end))
        for key in ("colour", "gpu_count", "Port"):
            text = self.text + f"<<: {{{key}: red}}\n"
            yield self.textual("merge_keys", f"a merge that brings in {key}", text, key, (end, end))

    def key_newline(self) -> Iterator[_Candidate]:
        for path, _ in self.rng.sample(self.model_mappings(), min(8, len(self.model_mappings()))):
            key = self.rng.choice(list(get(self.document, path)))
            document = self.copy()
            put_renamed(document, path, key, f"{key}\n")
            yield self.structural("key_newline", f"{loc(path + (key,))} + newline", document, path + (f"{key}\n",))
        for path in [("slurm", "conf", "KillWait\n"), ("cgroup", "overrides", "ConstrainCores\n"),
                     ("nccl", "env", "NCCL_DEBUG\n"), ("partitions", 0, "options", "MaxTime\n")]:
            yield self.set_value("key_newline", path, "1", loc(path))

    def bad_paths(self) -> Iterator[_Candidate]:
        owned = [("slurm", "paths", name) for name in ("conf_dir", "state_dir", "spool_dir", "log_dir", "run_dir")]
        owned += [("training", "venv_path"), ("training", "work_dir"), ("secrets", "dir")]
        values = ["../../etc", "state", "/", "/etc", "/var/log/", "//usr", "/tmp", "/home", "/var/lib/x/../../..", "/srv/./x"]
        for path in owned:
            for value in self.rng.sample(values, 4):
                yield self.set_value("bad_paths", path, value)
        for path, value in [(("ssh", "private_key"), "keys/id"), (("training", "python"), "python3"), (("secrets", "dir"), "~")]:
            yield self.set_value("bad_paths", path, value)

    def template_expression(self) -> Iterator[_Candidate]:
        expressions = ['{{ lookup("pipe", "id") }}', "{{x}}", "{% if 1 %}x{% endif %}", "a{#b#}", "/p/{{ y }}"]
        strings = [(path, value) for path, value, _ in self.leaves() if isinstance(value, str)]
        for path, value in self.rng.sample(strings, min(12, len(strings))):
            document = self.copy()
            put(document, path, value + self.rng.choice(expressions))
            yield self.structural("template_expression", f"{loc(path)} + a template", document, path)
        for path in [("slurm", "conf", "{{ k }}"), ("nccl", "env", "NCCL_{% x %}")]:
            yield self.set_value("template_expression", path, "1", f"key {loc(path)}")

    def truncated(self) -> Iterator[_Candidate]:
        data = self.text.encode("utf-8")
        for offset in sorted(self.rng.sample(range(1, len(data)), 16)):
            yield self.textual("truncated", f"first {offset} bytes", data[:offset])

    def line_edits(self) -> Iterator[_Candidate]:
        lines = self.text.splitlines()
        for _ in range(24):
            changed = list(lines)
            labels = []
            for _ in range(self.rng.randint(1, 3)):
                index = self.rng.randrange(len(changed))
                operation = self.rng.choice(["drop", "double", "indent", "dedent", "swap", "insert"])
                labels.append(f"{operation} {index + 1}")
                if operation == "drop" and len(changed) > 1:
                    del changed[index]
                elif operation == "double":
                    changed.insert(index, changed[index])
                elif operation == "indent":
                    changed[index] = " " * self.rng.choice([1, 2, 4]) + changed[index]
                elif operation == "dedent":
                    changed[index] = changed[index].lstrip()
                elif operation == "swap":
                    other = self.rng.randrange(len(changed))
                    changed[index], changed[other] = changed[other], changed[index]
                else:
                    position = self.rng.randrange(len(changed[index]) + 1)
                    junk = "".join(self.rng.choice(":-[]{}#&*!|>'\" ,?%@`ax1") for _ in range(self.rng.randint(1, 3)))
                    changed[index] = changed[index][:position] + junk + changed[index][position:]
            yield self.textual("line_edits", ", ".join(labels), "\n".join(changed) + "\n")

    def equivalent(self) -> Iterator[_Candidate]:
        text = self.text
        yield self.textual("equivalent", "CRLF line ends", text.replace("\n", "\r\n"))
        yield self.textual("equivalent", "no final newline", text.rstrip("\n"))
        yield self.textual("equivalent", "byte order mark", "\ufeff" + text)
        marked = text if text.startswith("---") else "---\n" + text
        yield self.textual("equivalent", "document markers", marked + "...\n")
        yield self.textual("equivalent", "JSON", json.dumps(self.document, indent=2))
        yield self.textual("equivalent", "JSON on one line", json.dumps(self.document))
        yield self.textual("equivalent", "flow style", yaml.safe_dump(self.document, default_flow_style=True))
        yield self.textual("equivalent", "sorted keys", yaml.safe_dump(self.document, sort_keys=True))
        yield self.textual("equivalent", "trailing comments", "".join(
            line.rstrip("\n") + "  # note\n" if line.strip() and ": " in line and "#" not in line and '"' not in line else line
            for line in self.lines()
        ))


@dataclass(frozen=True)
class _Candidate:
    """A mutant whose structural document is dumped only if it is chosen (dumping is the slow part)."""

    mutant: Mutant
    document: Any

    @property
    def key(self) -> bytes:
        if self.document is None:
            return self.mutant.data
        return json.dumps(self.document, default=repr).encode("utf-8")

    def materialize(self) -> Mutant:
        if self.document is None:
            return self.mutant
        return dataclasses.replace(self.mutant, data=dump(self.document).encode("utf-8"))


def put_renamed(document: Any, path: DocPath, key: Any, new: str) -> None:
    """Rename ``key`` of the mapping at ``path`` in place, keeping the order of the keys."""
    mapping = get(document, path)
    items = [(new if name == key else name, value) for name, value in mapping.items()]
    mapping.clear()
    mapping.update(items)


def ensure_mapping(document: Any, path: DocPath) -> None:
    """Create the mappings along ``path`` that the document lacks."""
    node = document
    for part in path:
        if isinstance(node, dict) and node.get(part) is None:
            node[part] = {}
        node = node[part]


def generate(seed: int = SEED, per_kind_and_base: int = PER_KIND_AND_BASE) -> list[Mutant]:
    """The corpus: distinct mutants, the same for the same seed."""
    corpus: list[Mutant] = []
    seen = {path.read_bytes() for path in BASES.values()}  # an unchanged inventory is no mutant
    for base in BASES:
        for kind in KINDS:
            rng = random.Random(f"{seed}/{base}/{kind}")
            unique: dict[bytes, _Candidate] = {}
            for candidate in getattr(_Generator(base, rng), kind)():
                unique.setdefault(candidate.key, candidate)
            chosen = list(unique.values())
            if len(chosen) > per_kind_and_base:
                chosen = rng.sample(chosen, per_kind_and_base)
            for candidate in chosen:
                mutant = candidate.materialize()
                if mutant.data not in seen:
                    seen.add(mutant.data)
                    corpus.append(mutant)
    return corpus
