"""The Ansible inventory the roles run against: groups, connection settings, slurmd instances.

It carries no secrets and no Slurm configuration text: roles copy the files rendered in the
build directory, so nothing is templated over the hostvars of every node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from cluster_cli.cluster import Cluster, ManagedHost, SlurmNode
from cluster_cli.render.common import JsonMembers, json_lines, json_string, json_text
from cluster_cli.render.monitoring import nvml_gpu_hosts
from cluster_cli.shared_storage import mount_group, selected_hosts
from cluster_cli.shared_venv import sharing_hosts

GROUP_OF_ROLE = {
    "controller": "slurm_controller",
    "database": "slurm_database",
    "compute": "slurm_compute",
    "login": "slurm_login",
    "monitoring": "monitoring",
}
# all > children > cluster > hosts (or children) > a host's variables (or a group's members): one line each
INVENTORY_FLAT_DEPTH = 5


def _connection_vars(host: ManagedHost) -> dict[str, Any]:
    variables: dict[str, Any] = {"ansible_python_interpreter": host.python}
    if host.connection == "local":
        variables["ansible_connection"] = "local"
        return variables
    variables["ansible_host"] = host.address
    variables["ansible_user"] = host.ssh.user
    variables["ansible_port"] = host.ssh.port
    if host.ssh.user != "root":
        # Every task needs root: an unprivileged SSH user gets it through passwordless sudo.
        variables["ansible_become"] = True
    if host.ssh.private_key:
        variables["ansible_ssh_private_key_file"] = str(Path(host.ssh.private_key).expanduser())
    if host.ssh.common_args:
        variables["ansible_ssh_common_args"] = host.ssh.common_args
    return variables


def _fake_minors(paths: list[str]) -> dict[str, int]:
    """Each fake device's minor number: the number its name ends with (nvidia3 -> 3, as the NVIDIA
    driver numbers /dev/nvidiaN), so a device keeps its minor when the list around it changes (a
    node removed); the position in the list where names do not end in distinct numbers."""
    numbers = [re.search(r"(\d+)$", path) for path in paths]
    if all(numbers) and len({int(match.group(1)) for match in numbers if match}) == len(paths):
        return {path: int(match.group(1)) for path, match in zip(paths, numbers) if match}
    return {path: index for index, path in enumerate(paths)}


def _slurmd_nodes(host: ManagedHost, default_port: int) -> list[dict[str, Any]]:
    """slurmd instances of a host; fake GPU minors are unique per host, since the device
    cgroup tells devices apart by major:minor, not by path."""
    fake_devices = [
        path
        for node in host.slurmd_nodes
        if node.group.gpus and node.group.gpus.fake
        for path in node.gpu_devices
    ]
    if not fake_devices:
        return [
            {"name": node.name, "port": node.port or default_port, "fake_gpus": []}
            for node in host.slurmd_nodes
        ]
    minors = _fake_minors(fake_devices)
    return [
        {
            "name": node.name,
            "port": node.port or default_port,
            "fake_gpus": [
                {"path": path, "minor": minors[path]}
                for path in node.gpu_devices
                if path in fake_devices
            ],
        }
        for node in host.slurmd_nodes
    ]


def gpu_variables(host: ManagedHost) -> dict[str, Any]:
    """The nvidia role's view of a GPU host (its nodes' GPUs together); {} for a host without GPUs."""
    groups = [node.group.gpus for node in host.slurmd_nodes if node.group.gpus is not None]
    if not groups:
        return {}
    return {
        "nvidia_gpu_count": sum(gpus.count for gpus in groups),
        "nvidia_gpu_fake": any(gpus.fake for gpus in groups),
        "nvidia_nvml_autodetect": any(gpus.autodetect == "nvml" for gpus in groups),
    }


def pam_adopt_node(cluster: Cluster, host: ManagedHost) -> str:
    """The node pam_slurm_adopt adopts SSH logins into on ``host``: only a compute host that runs
    one node and nothing else (users must still log in to login hosts, admins to the others; with
    several nodes a login could not tell which job's node it is on). Empty for every other host."""
    wanted = cluster.inventory.node_access.pam_slurm_adopt
    if not wanted or host.roles != {"compute"} or host.connection == "local" or len(host.slurmd_nodes) != 1:
        return ""
    return host.slurmd_nodes[0].name


def host_variables(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """Every host's variables as the roles see them, hosts in inventory order."""
    slurmd_port = cluster.inventory.slurm.slurmd_port
    return {name: _variables(cluster, host, slurmd_port) for name, host in cluster.hosts.items()}


def _variables(cluster: Cluster, host: ManagedHost, slurmd_port: int) -> dict[str, Any]:
    variables = _connection_vars(host)
    variables["slurmd_nodes"] = _slurmd_nodes(host, slurmd_port)
    variables.update(gpu_variables(host))
    adopt_node = pam_adopt_node(cluster, host)
    if adopt_node:
        variables["slurmd_pam_adopt_node"] = adopt_node
    return variables


def shared_variables(host_vars: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The string, number and boolean variables every host has, of one value and type."""
    entries = iter(host_vars)
    first = next(entries, {})
    shared = {key: value for key, value in first.items() if value.__class__ in (str, int, bool)}
    for variables in entries:
        for key, value in list(shared.items()):
            other = variables.get(key)
            if other != value or other.__class__ is not value.__class__:
                del shared[key]
        if not shared:
            break
    return shared


def _groups(cluster: Cluster, host_vars: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The cluster group's children: each role's hosts, training_env, slurm_nvml, node_exporter,
    slurm_exporter, gpu_exporter, sssd and the storage groups (one pass over the hosts, and one over the GPU hosts)."""
    members: dict[str, dict[str, None]] = {group: {} for group in GROUP_OF_ROLE.values()}
    training: dict[str, None] = {}
    for name, host in cluster.hosts.items():
        for role in host.roles:
            members[GROUP_OF_ROLE[role]][name] = None
        if "compute" in host.roles or "login" in host.roles:
            training[name] = None
    primary = cluster.inventory.controllers.primary
    controllers = members[GROUP_OF_ROLE["controller"]]
    members[GROUP_OF_ROLE["controller"]] = dict(sorted(controllers.items(), key=lambda item: item[0] != primary))
    children: dict[str, Any] = {group: {"hosts": hosts} for group, hosts in members.items()}
    children["training_env"] = {"hosts": training}
    children["training_env_shared"] = {"hosts": dict.fromkeys(sharing_hosts(cluster))}
    # the hosts that get Slurm's NVML plugin (playbooks/site.yml's slurm_build play)
    children["slurm_nvml"] = {"hosts": {name: None for name, variables in host_vars.items()
                                        if variables.get("nvidia_nvml_autodetect")}}
    # monitoring: node_exporter on every host, the Slurm exporter on the primary controller
    monitored = cluster.inventory.monitoring.host is not None
    children["node_exporter"] = {"hosts": {name: None for name in cluster.hosts} if monitored else {}}
    children["slurm_exporter"] = {"hosts": {primary: None} if monitored else {}}
    children["gpu_exporter"] = {"hosts": {host.name: None for host in nvml_gpu_hosts(cluster)} if monitored else {}}
    # the directory's SSSD client on every host (people.directory)
    directory = cluster.inventory.people.directory is not None
    children["sssd"] = {"hosts": {name: None for name in cluster.hosts} if directory else {}}
    children.update(_storage_groups(cluster))
    return children


def _storage_groups(cluster: Cluster) -> dict[str, Any]:
    """storage_client: every host where the inventory has storage (a host whose last mount left the
    inventory still runs the role, which unmounts it); one group per mount of the hosts that mount
    it; nfs_server: the host of storage.nfs_server, or none. Without storage only the empty storage_client
    and nfs_server groups (site.yml's plays name them)."""
    if cluster.inventory.storage is None:
        return {"storage_client": {"hosts": {}}, "nfs_server": {"hosts": {}}}
    server = cluster.inventory.storage.nfs_server
    groups: dict[str, Any] = {"storage_client": {"hosts": {name: None for name in cluster.hosts}},
                              "nfs_server": {"hosts": {server.host: None} if server is not None else {}}}
    for index, mount in enumerate(cluster.inventory.storage.mounts):
        groups[mount_group(index)] = {"hosts": {name: None for name in selected_hosts(cluster.hosts, mount)}}
    return groups


def inventory_document(cluster: Cluster) -> dict[str, Any]:
    """The inventory as a YAML-ready mapping, hosts and groups in inventory order; what every host
    shares is the cluster group's vars (the same hostvars, 10,000 hosts' entries shorter)."""
    host_vars = host_variables(cluster)
    shared = shared_variables(host_vars.values())
    children = _groups(cluster, host_vars)
    for variables in host_vars.values():
        for key in shared:
            del variables[key]
    return {"all": {"children": {"cluster": {"vars": shared, "hosts": host_vars, "children": children}}}}


def render_ansible_inventory(cluster: Cluster) -> str:
    """json_lines(inventory_document(cluster)), the very text: each host's line from its kind's."""
    header = f"# Ansible inventory for cluster '{cluster.name}', generated by cluster-cli: do not edit.\n"
    kinds = _HostKinds(cluster)
    children = _groups(cluster, kinds.examples())
    group = {"vars": kinds.shared, "hosts": kinds.members(), "children": children}
    # JSON is YAML that Ansible's YAML inventory plugin reads; unlike PyYAML's emitter it takes
    # ~0.03 s, not ~8 s, for the inventory of 10,000 hosts (one line per host and group: the C encoder).
    return json_lines({"all": {"children": {"cluster": group}}}, INVENTORY_FLAT_DEPTH, before=header, after="\n")


# Stand-ins for a host's name and address in the variables of a kind of hosts (_HostKinds)
_NAME, _ADDRESS = "\0the host's name\0", "\0the host's address\0"
_STAND_INS = re.compile(f"({re.escape(json_string(_NAME))}|{re.escape(json_string(_ADDRESS))})")


def _kind(host: ManagedHost, gpus_of: dict[int, int]) -> tuple[Any, ...]:
    """What a host's variables depend on besides its name and address (nodes named after the host
    stand for its name); ``gpus_of``: each group's GPUs (by id), all a node's variables take from
    its group."""
    if len(host.slurmd_nodes) == 1:  # most hosts: without the loop's list
        nodes: tuple[Any, ...] = (_node_kind(host.slurmd_nodes[0], host.name, gpus_of),)
    else:
        nodes = tuple([_node_kind(node, host.name, gpus_of) for node in host.slurmd_nodes])
    return host.connection, id(host.ssh), host.python, host.roles, nodes


def _node_kind(node: SlurmNode, host_name: str, gpus_of: dict[int, int]) -> tuple[Any, ...]:
    return None if node.name == host_name else node.name, gpus_of[id(node.group)], node.port, node.gpu_devices


def _gpus_of_groups(cluster: Cluster) -> dict[int, int]:
    """Each group (by id) to a number for its GPUs, equal GPUs one number: hosts of groups that
    differ in anything else are of one kind (304 groups, 4 kinds of GPUs: 4 templates, not 304)."""
    numbers: dict[Any, int] = {}
    return {id(group): numbers.setdefault(group.gpus, len(numbers)) for group in cluster.inventory.node_groups}


def _stand_in(host: ManagedHost) -> ManagedHost:
    nodes = [node._replace(name=_NAME) if node.name == host.name else node for node in host.slurmd_nodes]
    return replace(host, name=_NAME, address=_ADDRESS, slurmd_nodes=nodes)


class _HostKinds:
    """Hosts by kind (_kind), each kind a number: the variables of a kind's first host, found once,
    are those of the others but for their names and addresses; each host's line is its kind's
    template filled in."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.port = cluster.inventory.slurm.slurmd_port
        gpus_of = _gpus_of_groups(cluster)
        numbers: dict[tuple[Any, ...], int] = {}
        # each host's kind, in inventory order (a number: its kind is hashed once, not at every use)
        self.kinds = [numbers.setdefault(_kind(host, gpus_of), len(numbers)) for host in cluster.hosts.values()]
        self.hosts: list[list[str]] = [[] for _ in numbers]
        for name, kind in zip(cluster.hosts, self.kinds):
            self.hosts[kind].append(name)
        self.first = [_variables(cluster, cluster.hosts[names[0]], self.port) for names in self.hosts]
        # a kind's first host's variables with stand-ins for its name and address
        self.stand_in = [_variables(cluster, _stand_in(cluster.hosts[names[0]]), self.port) for names in self.hosts]
        self.shared = self._shared()

    def examples(self) -> dict[str, dict[str, Any]]:
        """Each host's name with its kind's first host's variables (what is the same for a kind)."""
        return dict(zip(self.cluster.hosts, map(self.first.__getitem__, self.kinds)))

    def _shared(self) -> dict[str, Any]:
        shared = shared_variables(self.first)
        for kind, names in enumerate(self.hosts):
            if len(names) > 1:
                addresses = {self.cluster.hosts[name].address for name in names}
                varying = {_NAME} if len(addresses) == 1 else {_NAME, _ADDRESS}
                for key, value in self.stand_in[kind].items():
                    if value.__class__ is str and value in varying:
                        shared.pop(key, None)
        return shared

    def members(self) -> JsonMembers:
        """Each host's ``"name": {variables}`` line, in inventory order."""
        fills = [self._fill(kind) for kind in range(len(self.hosts))]
        members = JsonMembers()
        for (name, host), fill in zip(self.cluster.hosts.items(), map(fills.__getitem__, self.kinds)):
            quoted = json_string(name)
            members.append(f"{quoted}: {self._line(host)}" if fill is None else fill(quoted, json_string(host.address)))
        return members

    def _line(self, host: ManagedHost) -> str:
        return self._line_of(_variables(self.cluster, host, self.port))

    def _line_of(self, variables: dict[str, Any]) -> str:
        return json_lines({key: value for key, value in variables.items() if key not in self.shared}, 0)

    def _fill(self, kind: int) -> Callable[[str, str], str] | None:
        """str.format of ``"name": {variables}`` for a kind's hosts (the name and the address as
        JSON); None where its template does not give its first host's line."""
        template = self._template(kind)
        return None if template is None else ("{0}: " + template).format

    def _template(self, kind: int) -> str | None:
        """str.format text of a kind's lines ({0}: the name, {1}: the address, as JSON); None where
        it does not give its first host's line (a value that is a stand-in's very text)."""
        host = self.cluster.hosts[self.hosts[kind][0]]
        pieces = _STAND_INS.split(self._line_of(self.stand_in[kind]))
        fields = {json_string(_NAME): "{0}", json_string(_ADDRESS): "{1}"}
        template = "".join(fields[piece] if index % 2 else piece.replace("{", "{{").replace("}", "}}")
                           for index, piece in enumerate(pieces))
        filled = template.format(json_string(host.name), json_string(host.address))
        return template if filled == self._line_of(self.first[kind]) else None


def host_reach(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """What the deployed record keeps of each host to reach it once it has left the inventory:
    its connection variables and the names of its slurmd instances."""
    return {
        name: {"connection": _connection_vars(host), "slurmd_nodes": [node.name for node in host.slurmd_nodes]}
        for name, host in cluster.hosts.items()
    }


def render_retired_inventory(cluster: Cluster, retired: dict[str, dict[str, Any]]) -> str:
    """A second inventory with the group slurm_retired: hosts the record knows that the inventory
    no longer has (``DeployedRecord.retired``), reached as before, to stop their slurmd instances."""
    hosts = {name: {**entry["connection"], "slurmd_nodes": [], "slurmd_teardown_instances": entry["slurmd_nodes"]}
             for name, entry in retired.items()}
    header = (f"# Hosts that left cluster '{cluster.name}' (from the deployed record), generated by "
              "cluster-cli: do not edit.\n")
    return header + json_text({"all": {"children": {"slurm_retired": {"hosts": hosts}}}}) + "\n"
