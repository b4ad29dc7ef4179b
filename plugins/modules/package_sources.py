#!/usr/bin/python
"""Ansible module: the host's other package sources beside an air-gapped mirror, in one run.

An exclusive mirror disables every other apt source by renaming it NAME + suffix (apt ignores it
then); without one, the renamed sources are put back under their names. A renamed copy left from
before (a package put the file back) is kept as NAME + suffix + .~N~ (mv --backup=numbered); a
name taken again by a new file is not overwritten: the renamed copy stays, with a warning. A
pip.conf this role wrote (it holds the marker line) is removed when the inventory has no pip
mirror any more; any other pip.conf is left alone. Then, with update_lists, apt-get update reads
the package lists of the sources now active (retried: a mirror over the network may fail for a
moment). One module run where find, mv, file and apt tasks cost one task result each on every host.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: package_sources
short_description: Disable the other apt sources beside an exclusive mirror, or put them back; remove a stale pip.conf
description:
  - An exclusive mirror disables every other apt source by renaming it NAME + C(suffix); without one the renamed
    sources are put back under their names. A name taken again by a new file is not overwritten.
  - A pip.conf this role wrote (it holds C(pip_conf_marker)) is removed; then, with C(update_lists), apt-get update
    reads the package lists of the sources now active.
author: cluster-cli maintainers (!UNKNOWN)
options:
  places:
    type: list
    elements: dict
    required: true
    description:
      - Directories (C(path)) and the file name patterns (C(patterns), globs) of the apt sources in them, renamed
        copies included.
  excludes:
    type: list
    elements: str
    default: []
    description:
      - File name patterns never touched (the mirror's own source, cluster-cli's own).
  suffix:
    type: str
    required: true
    description:
      - What a disabled source's name ends with.
  exclusive:
    type: bool
    required: true
    description:
      - Disable the other sources (true) or put the disabled ones back (false).
  stale_pip_conf:
    type: path
    description:
      - A pip.conf to remove when it holds C(pip_conf_marker).
  pip_conf_marker:
    type: str
    default: ''
    description:
      - What a line of a pip.conf this role wrote starts with.
  update_lists:
    type: bool
    default: false
    description:
      - Refresh the package lists (apt-get update) afterwards; not in check mode. It changes no state.
"""

EXAMPLES = r"""
- name: Only the mirror's source stays active
  cluster_cli.slurm.package_sources:
    places:
      - {path: /etc/apt/sources.list.d, patterns: ["*.list", "*.sources"]}
    excludes: [cluster-mirror.sources]
    suffix: .cluster-cli.disabled
    exclusive: true
    update_lists: true
"""

RETURN = r"""
disabled:
  type: list
  elements: str
  returned: always
  description: The sources renamed to NAME + suffix.
restored:
  type: list
  elements: str
  returned: always
  description: The renamed sources put back under their names.
shadowed:
  type: list
  elements: str
  returned: always
  description: Renamed sources left as they are because their name is taken again.
removed:
  type: list
  elements: str
  returned: always
  description: The stale pip.conf, when it was removed.
lists_updated:
  type: bool
  returned: always
  description: Whether apt-get update ran (and worked).
"""

import fnmatch
import os
import time

from ansible.module_utils.basic import AnsibleModule


# apt-get update, as the apt module's update_cache: a few tries with growing pauses.
UPDATE_TRIES = 4
APT_LOCK_TIMEOUT_S = 600


def sources(places: list[dict], excludes: list[str]) -> list[str]:
    """The regular files of ``places`` whose names match a pattern and no exclude, sorted."""
    found = []
    for place in places:
        try:
            names = os.listdir(place["path"])
        except FileNotFoundError:
            continue
        for name in names:
            path = os.path.join(place["path"], name)
            if (any(fnmatch.fnmatch(name, pattern) for pattern in place["patterns"])
                    and not any(fnmatch.fnmatch(name, pattern) for pattern in excludes)
                    and os.path.isfile(path) and not os.path.islink(path)):
                found.append(path)
    return sorted(found)


def plan(found: list[str], suffix: str, exclusive: bool) -> tuple[list[str], list[str], list[str]]:
    """(to disable, to put back, shadowed): exclusive disables every active source; otherwise each
    disabled one goes back unless an active file holds its name again."""
    active = [path for path in found if not path.endswith(suffix)]
    disabled = [path for path in found if path.endswith(suffix)]
    if exclusive:
        return active, [], []
    taken = {path + suffix for path in active}
    return [], [path for path in disabled if path not in taken], [path for path in disabled if path in taken]


def holds_marker(path: str, marker: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return any(line.startswith(marker) for line in handle)
    except FileNotFoundError:
        return False


def update_lists(module: AnsibleModule) -> None:
    """apt-get update until it works (exit 0: every source read), or fail with apt's last words."""
    argv = [module.get_bin_path("apt-get", required=True), "-q", "-o", f"DPkg::Lock::Timeout={APT_LOCK_TIMEOUT_S}",
            "update"]
    for attempt in range(UPDATE_TRIES):
        rc, out, err = module.run_command(argv, environ_update={"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"})
        if rc == 0:
            return
        if attempt + 1 < UPDATE_TRIES:
            time.sleep(2**attempt)
    module.fail_json(msg=f"apt-get update failed {UPDATE_TRIES} times (the package lists of the sources "
                         f"above): {(err or out).strip()[-1500:]}", rc=rc)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "places": {"type": "list", "elements": "dict", "required": True},
            "excludes": {"type": "list", "elements": "str", "default": []},
            "suffix": {"type": "str", "required": True},
            "exclusive": {"type": "bool", "required": True},
            "stale_pip_conf": {"type": "path"},
            "pip_conf_marker": {"type": "str", "default": ""},
            "update_lists": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    suffix = params["suffix"]
    to_disable, to_restore, shadowed = plan(sources(params["places"], params["excludes"]), suffix, params["exclusive"])
    stale = params["stale_pip_conf"]
    removed = [stale] if stale and params["pip_conf_marker"] and holds_marker(stale, params["pip_conf_marker"]) else []
    if not module.check_mode:
        # coreutils mv, as before: --backup=numbered keeps an earlier renamed copy, --no-clobber
        # never overwrites a name taken again in the meantime.
        for path in to_disable:
            module.run_command(["mv", "--backup=numbered", "--", path, path + suffix], check_rc=True)
        for path in to_restore:
            module.run_command(["mv", "--no-clobber", "--", path, path[: -len(suffix)]], check_rc=True)
        for path in removed:
            os.remove(path)
    for path in shadowed:
        module.warn(f"{path} was not put back: {path[: -len(suffix)]} exists again. "
                    "Compare the two and delete the one that is not wanted.")
    lists_updated = params["update_lists"] and not module.check_mode
    if lists_updated:
        update_lists(module)
    module.exit_json(changed=bool(to_disable or to_restore or removed), disabled=to_disable, restored=to_restore,
                     shadowed=shadowed, removed=removed, lists_updated=lists_updated)


if __name__ == "__main__":
    main()
