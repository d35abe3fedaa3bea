# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""`seccomp_docker_keys(profiles)`: the docker-only keys of seccomp profiles, as sentences.
`seccomp_profiles_pending(stats, profiles, files)`: whether the seccomp profiles are left to install.
`seccomp_untried(image_result, test_image, host)`: why the profiles are installed without a test container
(tasks/seccomp_install.yml reports it).

containerd and CRI-O read a Localhost profile into the OCI runtime-spec structure and silently
drop every key they do not know. Docker's own keys therefore vanish without an error, and a rule
docker would apply only with a capability or on one architecture becomes a rule for everyone.
That is the one mistake nothing else catches; every other problem of a profile (unknown action,
wrong type) makes the runtime refuse the container, which the role's test container shows.

The role reads the node once (tasks/main.yml: a stat of each profile directory and file, with checksums): a node
where every directory is root:root 0755 and every profile file root:root 0644 with the content the role writes
(`to_nice_json(indent=2)` and a newline, tasks/seccomp_install.yml) has nothing to install, and the install tasks
(with their test container) are skipped as a whole.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import get_hash, to_nice_json

# Keys of docker's (and podman's) profile format that have no OCI counterpart, and what losing them does.
DOCKER_PROFILE_KEYS = {
    "archMap": "containerd ignores it, so the profile would apply to the native architecture only; "
    "list the architectures in 'architectures' instead",
    "defaultErrno": "containerd ignores it; the OCI key is 'defaultErrnoRet' (a number)",
}
DOCKER_SYSCALL_KEYS = {
    "includes": "containerd ignores it, so the rule would apply unconditionally",
    "excludes": "containerd ignores it, so the rule would apply unconditionally",
    "name": "containerd ignores it; use 'names' (a list)",
    "comment": "containerd ignores it",
}


def _found(where: str, keys, docker: Mapping[str, str]) -> list[str]:
    return [
        f"{where}: key '{key}' is docker-only (not OCI); {docker[key]}. Write the profile in plain OCI form."
        for key in sorted(docker.keys() & set(keys))
    ]


def seccomp_docker_keys(profiles) -> list[str]:
    """The docker-only keys in a mapping of profile name to profile (empty list: none)."""
    if not isinstance(profiles, Mapping):
        raise AnsibleFilterError(f"seccomp_docker_keys: expects a mapping of name to profile, not {type(profiles)}")
    errors = []
    for name, profile in profiles.items():
        if not isinstance(profile, Mapping):
            errors.append(f"'{name}': a profile is a mapping (a JSON object), not {type(profile).__name__}.")
            continue
        errors += _found(f"'{name}'", profile.keys(), DOCKER_PROFILE_KEYS)
        syscalls = profile.get("syscalls", [])
        for position, rule in enumerate(syscalls if isinstance(syscalls, list) else []):
            if isinstance(rule, Mapping):
                errors += _found(f"'{name}' syscalls[{position}]", rule.keys(), DOCKER_SYSCALL_KEYS)
    return errors


def profile_text(profile) -> str:
    """A profile file's content as the role writes it (tasks/seccomp_install.yml)."""
    return to_nice_json(profile, indent=2) + "\n"


def seccomp_profiles_pending(stats, profiles, files) -> bool:
    """Whether anything is left to install: `stats` is the stat loop's results over the directories and the profile
    files (`files`, <dir>/<name>.json), `profiles` {name: profile}. A file is as wanted when it is a regular file,
    root:root 0644, with the profile's text (sha1); a directory when it is one, root:root 0755."""
    if not isinstance(profiles, Mapping):
        raise AnsibleFilterError(
            f"seccomp_profiles_pending: expects a mapping of name to profile, not {type(profiles)}"
        )
    for result in stats:
        path, stat = result["item"], result["stat"]
        want = profile_text(profiles[os.path.splitext(os.path.basename(path))[0]]) if path in files else None
        if (
            not stat["exists"]
            or stat["pw_name"] != "root"
            or stat["gr_name"] != "root"
            or stat["mode"] != ("0755" if want is None else "0644")
            or stat["isdir"] != (want is None)
            or (want is not None and stat["checksum"] != get_hash(want, "sha1"))
        ):
            return True
    return False


def seccomp_untried(image_result, test_image: str, host: str) -> str:
    """Why the seccomp profiles are installed without a test container: no ``test_image`` set, docker not running
    (``image_result``, the image lookup, skipped), or docker without the image (the lookup's stderr or msg)."""
    if not test_image:
        return (
            "The seccomp profiles are installed without trying them in a container:"
            " security_profiles_seccomp_test_image is empty. Set it to an image present on the node (it is never"
            " pulled) to start a container with each profile before it is installed."
        )
    result = image_result if isinstance(image_result, Mapping) else {}
    if result.get("skipped"):
        why = "docker does not run there"
    else:
        said = str(result.get("stderr") or "").strip() or str(result.get("msg") or "")
        why = f"docker has no image {test_image} there (it is never pulled): {said}"
    return f"The seccomp profiles are not tried in a container on {host}: {why}."


class FilterModule:
    """Seccomp profile filters (see the module docstring)."""

    def filters(self):
        return {
            "seccomp_docker_keys": seccomp_docker_keys,
            "seccomp_profiles_pending": seccomp_profiles_pending,
            "seccomp_untried": seccomp_untried,
        }
