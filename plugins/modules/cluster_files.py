#!/usr/bin/python
"""Ansible module: a host's set of small files and directories in one round trip.

`file` and `copy` in a loop cost one module run (an SSH round trip and a worker) per item; a
deploy to a thousand hosts pays that for every directory and config file of every host. This
module takes the whole set: it checks that the files the set relies on are there, reads the files
asked for, makes the directories, writes the files (atomically, only when the bytes differ), makes
the character devices and removes the absent ones, in that order, and says which paths changed. A
symbolic link where a file or directory belongs is refused: the module never writes through one.
Something else where a character device belongs (or a device with other numbers) is never
replaced: the run fails before it changes anything.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_files
short_description: Read, create and remove a host's small files and directories in one module run
description:
  - Checks that the files the set relies on are there, reads the files asked for, makes the directories, writes the
    files (atomically, only when the bytes differ), makes the character devices and removes the absent paths, in that
    order, and says which paths changed.
  - A symbolic link where a file or directory belongs is refused, and something else where a character device belongs
    (or a device with other numbers) is never replaced; the run fails before it changes anything.
author: cluster-cli maintainers (!UNKNOWN)
options:
  required:
    type: list
    elements: dict
    default: []
    description:
      - Files that must already be there (C(path), a regular file, a link to one will do) before anything changes;
        the run fails with the item's C(message) for each one missing.
  read:
    type: list
    elements: path
    default: []
    description:
      - Files whose text is returned in C(contents) (null when absent), read before anything changes.
  directories:
    type: list
    elements: dict
    default: []
    description:
      - Directories to create (parents too) with owner, group and mode, in order; with C(keep) an existing one is left
        as it is (a file system mounted there); C(label) names the setting in a refusal.
  files:
    type: list
    elements: dict
    default: []
    description:
      - Files with C(dest), C(content) (text), C(owner), C(group), C(mode), C(backup) (keep a changed file's old bytes
        beside it).
  devices:
    type: list
    elements: dict
    default: []
    description:
      - Character devices with C(path), C(major), C(minor), C(owner), C(group), C(mode); their directories must exist
        (C(directories)).
  absent:
    type: list
    elements: path
    default: []
    description:
      - Files to remove.
"""

EXAMPLES = r"""
- name: Make the configuration directory and write one file into it
  cluster_cli.slurm.cluster_files:
    directories:
      - {path: /etc/example, owner: root, group: root, mode: "0755"}
    files:
      - {dest: /etc/example/example.conf, content: "key=value\n", owner: root, group: root, mode: "0644"}
    absent: [/etc/example/old.conf]
"""

RETURN = r"""
changed_paths:
  type: list
  elements: str
  returned: always
  description: The directories, files and removed paths that changed, in order.
contents:
  type: dict
  returned: always
  description: The text of each file of C(read), null when it is not there.
backups:
  type: dict
  returned: always
  description: The backup file of each changed file with C(backup).
"""

import grp
import os
import pwd
import shutil
import stat
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule


class Refused(Exception):
    """A path this module will not touch (a symbolic link, a directory where a file belongs)."""


def _ids(item: dict) -> tuple[int, int]:
    try:
        return pwd.getpwnam(item.get("owner") or "root").pw_uid, grp.getgrnam(item.get("group") or "root").gr_gid
    except KeyError as missing:
        raise Refused(f"{item.get('dest') or item.get('path')}: no such user or group {missing}") from None


def _mode(item: dict, default: int) -> int:
    mode = item.get("mode")
    return default if mode in (None, "") else int(str(mode), 8)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _attributes_differ(info: os.stat_result, uid: int, gid: int, mode: int) -> bool:
    return (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) != (uid, gid, mode)


def read_text(path: str) -> str | None:
    info = _lstat(path)
    if info is None:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"{path} is not a regular file (a symbolic link is not followed): not read")
    return _read_bytes(path).decode("utf-8", errors="replace")


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def ensure_directory(item: dict, check: bool) -> bool:
    path, (uid, gid), mode = item["path"], _ids(item), _mode(item, 0o755)
    info = _lstat(path)
    if info is not None and not stat.S_ISDIR(info.st_mode):
        label = f" ({item['label']})" if item.get("label") else ""
        raise Refused(f"{path}{label} exists and is not a directory (a symbolic link is not followed)")
    if info is not None and (item.get("keep") or not _attributes_differ(info, uid, gid, mode)):
        return False
    if not check:
        os.makedirs(path, mode=0o755, exist_ok=True)
        os.chown(path, uid, gid, follow_symlinks=False)
        os.chmod(path, mode)
    return True


def _write_atomically(path: str, data: bytes, uid: int, gid: int, mode: int) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "wb") as out:
            os.fchown(out.fileno(), uid, gid)
            os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.rename(temporary, path)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise


def _backup(path: str) -> str:
    copy = f"{path}.{os.getpid()}.{time.strftime('%Y-%m-%d@%H:%M:%S')}~"
    shutil.copy2(path, copy)
    return copy


def ensure_file(item: dict, check: bool, backups: dict[str, str]) -> tuple[bool, str | None]:
    """Whether the file changed, and its old text when its bytes did (for --diff)."""
    path, (uid, gid), mode = item["dest"], _ids(item), _mode(item, 0o644)
    data = item.get("content", "").encode("utf-8")
    info = _lstat(path)
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise Refused(f"{path} exists and is not a regular file (a symbolic link is not followed)")
    old = None if info is None else _read_bytes(path)
    if info is not None and old == data:
        if not _attributes_differ(info, uid, gid, mode):
            return False, None
        if not check:
            os.chown(path, uid, gid, follow_symlinks=False)
            os.chmod(path, mode)
        return True, None
    if not check:
        if old is not None and item.get("backup"):
            backups[path] = _backup(path)
        _write_atomically(path, data, uid, gid, mode)
    return True, "" if old is None else old.decode("utf-8", errors="replace")


def refuse_wrong_devices(items: list[dict]) -> None:
    """Fail, before anything changes, when a device path holds something else than that device."""
    wrong = []
    for item in items:
        info = _lstat(item["path"])
        wanted = os.makedev(int(item["major"]), int(item["minor"]))
        if info is not None and (not stat.S_ISCHR(info.st_mode) or info.st_rdev != wanted):
            found = (f"character device {os.major(info.st_rdev)}:{os.minor(info.st_rdev)}"
                     if stat.S_ISCHR(info.st_mode) else "not a character device")
            wrong.append(f"{item['path']} is {found}, not {item['major']}:{item['minor']}")
    if wrong:
        raise Refused(f"These paths exist but are not the expected character devices: {'; '.join(wrong)}. "
                      "Remove them so they can be made again.")


def ensure_device(item: dict, check: bool) -> bool:
    path, (uid, gid), mode = item["path"], _ids(item), _mode(item, 0o600)
    info = _lstat(path)
    if info is not None and not _attributes_differ(info, uid, gid, mode):
        return False
    if not check:
        if info is None:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(int(item["major"]), int(item["minor"])))
        os.chown(path, uid, gid, follow_symlinks=False)
        os.chmod(path, mode)
    return True


def ensure_absent(path: str, check: bool) -> bool:
    info = _lstat(path)
    if info is None:
        return False
    if stat.S_ISDIR(info.st_mode):
        raise Refused(f"{path} is a directory: only files are removed")
    if not check:
        os.unlink(path)
    return True


def refuse_missing(items: list[dict]) -> None:
    """Fail, before anything changes, when a file that must be there is not (a preflight of the
    files it goes with: a source that names a key, say)."""
    missing = [item.get("message") or f"{item['path']} is missing" for item in items
               if not os.path.isfile(item["path"])]
    if missing:
        raise Refused("; ".join(missing))


def converge(params: dict, check: bool) -> dict:
    result: dict = {"changed_paths": [], "contents": {}, "backups": {}, "diff": []}
    refuse_missing(params["required"])
    for path in params["read"]:
        result["contents"][path] = read_text(path)
    refuse_wrong_devices(params["devices"])
    for item in params["directories"]:
        if ensure_directory(item, check):
            result["changed_paths"].append(item["path"])
    for item in params["files"]:
        changed, before = ensure_file(item, check, result["backups"])
        if changed:
            result["changed_paths"].append(item["dest"])
        if before is not None:
            result["diff"].append({"before_header": item["dest"], "after_header": item["dest"],
                                   "before": before, "after": item.get("content", "")})
    for item in params["devices"]:
        if ensure_device(item, check):
            result["changed_paths"].append(item["path"])
    for path in params["absent"]:
        if ensure_absent(path, check):
            result["changed_paths"].append(path)
            result["diff"].append({"before_header": path, "after_header": path, "before": "(present)\n", "after": "(absent)\n"})
    result["changed"] = bool(result["changed_paths"])
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "required": {"type": "list", "elements": "dict", "default": []},
            "read": {"type": "list", "elements": "path", "default": []},
            "directories": {"type": "list", "elements": "dict", "default": []},
            "files": {"type": "list", "elements": "dict", "default": []},
            "devices": {"type": "list", "elements": "dict", "default": []},
            "absent": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    try:
        result = converge(module.params, module.check_mode)
    except (Refused, OSError) as error:
        module.fail_json(msg=str(error))
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
