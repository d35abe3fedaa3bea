#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: node_files
short_description: Look at and read several files of the node in one module run
description:
  - The reads of a role in one run on the node instead of one C(ansible.builtin.stat) or C(ansible.builtin.slurp) run
    per file. Each module run costs a process on the node and a worker, a connection and a result on the controller
    (bench/README.md); a role that looks at twelve files paid twelve of them on every re-run.
  - Each entry of O(files) gets what C(ansible.builtin.stat) returns for it (RV(files[].stat)), and with
    O(files[].content) its bytes as C(ansible.builtin.slurp) returns them (base64).
  - C(plugins/action/role_read.py) sends the C(stat) and C(slurp) reads of one task here, in one run, and hands each
    read the result its own module would have registered.
  - Runs on the managed node with the Python standard library only. Changes nothing.
version_added: "0.3.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  files:
    description: The files to look at, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      follow:
        description: Look at the target of a symlink rather than the link (C(ansible.builtin.stat)'s O(files[].follow)).
        type: bool
        default: false
      get_checksum:
        description: Return the checksum of a readable regular file.
        type: bool
        default: true
      checksum_algorithm:
        description: The checksum's algorithm.
        type: str
        default: sha1
        choices: [md5, sha1, sha224, sha256, sha384, sha512]
      content:
        description:
          - Also read the file (symlinks followed, as C(ansible.builtin.slurp) does) and return its bytes,
            base64-encoded.
          - A file that cannot be read gets C(failed) and C(ansible.builtin.slurp)'s message for it (C(file not found),
            C(source is a directory and must be a file), C(file is not readable)); the other entries are still read.
        type: bool
        default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads only; the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The fields of RV(files[].stat) are those of C(ansible.builtin.stat) without its C(get_mime) and C(get_attributes)
    parts (mimetype, charset, attributes, attr_flags, version). No role reads them, and they cost a C(file) and an
    C(lsattr) run per path. ansible-core's stat module documents its return values
    (U(https://docs.ansible.com/ansible/latest/collections/ansible/builtin/stat_module.html)).
seealso:
  - module: ansible.builtin.stat
    description: The return values each entry's stat has.
  - module: ansible.builtin.slurp
    description: The content and the messages of an entry read with O(files[].content).
"""

EXAMPLES = r"""
- name: Look at the kubelet drop-in and read its config
  node_files:
    files:
      - path: /etc/kubernetes/kubelet.conf.d/50-gpu-node.conf
        get_checksum: false
      - path: /var/lib/kubelet/config.yaml
        follow: true
        content: true
  register: kubelet_files
"""

RETURN = r"""
files:
  description: One entry per entry of O(files), in order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The path looked at.
      type: str
    stat:
      description: What C(ansible.builtin.stat) returns as its C(stat) for the path (C(exists) false where it is
        not there).
      type: dict
    content:
      description: The file's bytes, base64-encoded (with O(files[].content), where it could be read).
      type: str
    encoding:
      description: C(base64), with RV(files[].content).
      type: str
    source:
      description: The path read, with RV(files[].content).
      type: str
    failed:
      description: True where O(files[].content) was asked and the file could not be read.
      type: bool
    msg:
      description: Why the file could not be read.
      type: str
"""

import base64
import errno
import grp
import hashlib
import os
import pwd
import stat as st

from ansible.module_utils.basic import AnsibleModule

CHUNK = 64 * 1024


def _digest(path: str, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _name(lookup, ident: int) -> str | None:
    try:
        return lookup(ident)[0]
    except KeyError:
        return None


def look(path: str, follow: bool = False, get_checksum: bool = True, checksum_algorithm: str = "sha1") -> dict:
    """The stat dict ansible.builtin.stat returns for ``path`` (without mime and attributes)."""
    try:
        info = os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return {"exists": False}
        raise
    mode = info.st_mode
    found = {
        "exists": True,
        "path": path,
        "mode": f"{st.S_IMODE(mode):04o}",
        "isdir": st.S_ISDIR(mode),
        "ischr": st.S_ISCHR(mode),
        "isblk": st.S_ISBLK(mode),
        "isreg": st.S_ISREG(mode),
        "isfifo": st.S_ISFIFO(mode),
        "islnk": st.S_ISLNK(mode),
        "issock": st.S_ISSOCK(mode),
        "uid": info.st_uid,
        "gid": info.st_gid,
        "size": info.st_size,
        "inode": info.st_ino,
        "dev": info.st_dev,
        "nlink": info.st_nlink,
        "atime": info.st_atime,
        "mtime": info.st_mtime,
        "ctime": info.st_ctime,
        "wusr": bool(mode & st.S_IWUSR),
        "rusr": bool(mode & st.S_IRUSR),
        "xusr": bool(mode & st.S_IXUSR),
        "wgrp": bool(mode & st.S_IWGRP),
        "rgrp": bool(mode & st.S_IRGRP),
        "xgrp": bool(mode & st.S_IXGRP),
        "woth": bool(mode & st.S_IWOTH),
        "roth": bool(mode & st.S_IROTH),
        "xoth": bool(mode & st.S_IXOTH),
        "isuid": bool(mode & st.S_ISUID),
        "isgid": bool(mode & st.S_ISGID),
        "blocks": info.st_blocks,
        "block_size": info.st_blksize,
        "device_type": info.st_rdev,
        "pw_name": _name(pwd.getpwuid, info.st_uid),
        "gr_name": _name(grp.getgrgid, info.st_gid),
        "readable": os.access(path, os.R_OK),
        "writeable": os.access(path, os.W_OK),
        "executable": os.access(path, os.X_OK),
    }
    if st.S_ISLNK(mode):
        found["lnk_source"] = os.path.realpath(path)
        found["lnk_target"] = os.readlink(path)
    if get_checksum and st.S_ISREG(mode) and found["readable"]:
        found["checksum"] = _digest(path, checksum_algorithm)
    return found


def read(path: str) -> dict:
    """The bytes of ``path`` as ansible.builtin.slurp returns them, or its failure."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        reason = {
            errno.ENOENT: "file not found",
            errno.EISDIR: "source is a directory and must be a file",
            errno.EACCES: "file is not readable",
        }.get(exc.errno, f"unable to slurp file ({exc.strerror})")
        return {"failed": True, "msg": f"{reason}: {path}"}
    return {"content": base64.b64encode(data).decode("ascii"), "encoding": "base64", "source": path}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "path": {"type": "path", "required": True},
                    "follow": {"type": "bool", "default": False},
                    "get_checksum": {"type": "bool", "default": True},
                    "checksum_algorithm": {
                        "type": "str",
                        "default": "sha1",
                        "choices": ["md5", "sha1", "sha224", "sha256", "sha384", "sha512"],
                    },
                    "content": {"type": "bool", "default": False},
                },
            }
        },
        supports_check_mode=True,
    )
    results = []
    for entry in module.params["files"]:
        path = entry["path"]
        try:
            found = {
                "path": path,
                "stat": look(path, entry["follow"], entry["get_checksum"], entry["checksum_algorithm"]),
            }
        except OSError as exc:
            module.fail_json(msg=f"could not look at {path}: {exc}", files=results)
        if entry["content"]:
            found.update(read(path))
        results.append(found)
    module.exit_json(changed=False, files=results)


if __name__ == "__main__":
    main()
