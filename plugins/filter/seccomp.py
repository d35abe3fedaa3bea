# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters for seccomp profiles in plain OCI form (what the kubelet hands to containerd and CRI-O).

`seccomp_profile_errors(profile)`
    The problems of a profile as a list of sentences, empty when it is fine. Checks that it is in the
    OCI runtime-spec form (`linux.seccomp` of config.json) and nothing else: containerd and CRI-O read
    a Localhost profile into the OCI structure and silently drop every key they do not know. Docker's
    own keys (`archMap`, `includes`, `excludes`, ...) therefore vanish, and a rule docker would apply
    only with a capability or on one architecture becomes a rule for everyone.

`seccomp_oci_profile(rules, architectures, default_errno_ret=1)`
    Builds a profile that denies every syscall with EPERM (`SCMP_ACT_ERRNO`, errno 1, as the runtime
    default does) except what `rules` allow. The role and the unit tests build profiles through it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

# The values of the OCI runtime-spec (config-linux.md, "Seccomp").
ACTIONS = frozenset(
    {
        "SCMP_ACT_KILL",
        "SCMP_ACT_KILL_PROCESS",
        "SCMP_ACT_KILL_THREAD",
        "SCMP_ACT_TRAP",
        "SCMP_ACT_ERRNO",
        "SCMP_ACT_TRACE",
        "SCMP_ACT_ALLOW",
        "SCMP_ACT_LOG",
        "SCMP_ACT_NOTIFY",
    }
)
ARCHITECTURES = frozenset(
    {
        "SCMP_ARCH_X86",
        "SCMP_ARCH_X86_64",
        "SCMP_ARCH_X32",
        "SCMP_ARCH_ARM",
        "SCMP_ARCH_AARCH64",
        "SCMP_ARCH_MIPS",
        "SCMP_ARCH_MIPS64",
        "SCMP_ARCH_MIPS64N32",
        "SCMP_ARCH_MIPSEL",
        "SCMP_ARCH_MIPSEL64",
        "SCMP_ARCH_MIPSEL64N32",
        "SCMP_ARCH_PPC",
        "SCMP_ARCH_PPC64",
        "SCMP_ARCH_PPC64LE",
        "SCMP_ARCH_S390",
        "SCMP_ARCH_S390X",
        "SCMP_ARCH_PARISC",
        "SCMP_ARCH_PARISC64",
        "SCMP_ARCH_RISCV64",
        "SCMP_ARCH_LOONGARCH64",
        "SCMP_ARCH_M68K",
        "SCMP_ARCH_SH",
        "SCMP_ARCH_SHEB",
    }
)
FLAGS = frozenset(
    {
        "SECCOMP_FILTER_FLAG_TSYNC",
        "SECCOMP_FILTER_FLAG_LOG",
        "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
        "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV",
    }
)
OPERATORS = frozenset(
    {
        "SCMP_CMP_NE",
        "SCMP_CMP_LT",
        "SCMP_CMP_LE",
        "SCMP_CMP_EQ",
        "SCMP_CMP_GE",
        "SCMP_CMP_GT",
        "SCMP_CMP_MASKED_EQ",
    }
)
PROFILE_KEYS = frozenset(
    {"defaultAction", "defaultErrnoRet", "architectures", "flags", "listenerPath", "listenerMetadata", "syscalls"}
)
SYSCALL_KEYS = frozenset({"names", "action", "errnoRet", "args"})
ARG_KEYS = frozenset({"index", "value", "valueTwo", "op"})
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
# Errno values the kernel can return (include/uapi/asm-generic/errno.h ends at 133); 0 would mean "allow".
MAX_ERRNO = 4095
SYSCALL_NAME = re.compile(r"[a-z_][a-z0-9_]*")
ERRNO_ACTIONS = ("SCMP_ACT_ERRNO", "SCMP_ACT_TRACE")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if _is_int(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def _unknown_keys(where: str, keys, known: frozenset, docker: Mapping[str, str]) -> list[str]:
    errors = []
    for key in sorted(str(k) for k in keys if k not in known):
        if key in docker:
            errors.append(
                f"{where}: key '{key}' is docker-only (not OCI); {docker[key]}. Write the profile in plain OCI form."
            )
        else:
            errors.append(f"{where}: unknown key '{key}'; an OCI seccomp profile has only {', '.join(sorted(known))}.")
    return errors


def _action_errors(where: str, action) -> list[str]:
    if not isinstance(action, str):
        return [f"{where}: must be a string (one of {', '.join(sorted(ACTIONS))}), not {_type_name(action)}."]
    if action not in ACTIONS:
        return [f"{where}: unknown action '{action}'; known actions are {', '.join(sorted(ACTIONS))}."]
    return []


def _errno_errors(where: str, value) -> list[str]:
    if not _is_int(value):
        return [f"{where}: must be a number (an errno such as 1 for EPERM), not {_type_name(value)}."]
    if not 0 < value <= MAX_ERRNO:
        return [f"{where}: {value} is not an errno; use a number from 1 to {MAX_ERRNO} (1 is EPERM, 38 ENOSYS)."]
    return []


def _string_list_errors(where: str, value, known: frozenset, what: str) -> list[str]:
    if not isinstance(value, (list, tuple)):
        return [f"{where}: must be a list of {what}, not {_type_name(value)}."]
    errors = []
    for position, item in enumerate(value):
        if not isinstance(item, str):
            errors.append(f"{where}[{position}]: must be a string, not {_type_name(item)}.")
        elif item not in known:
            errors.append(f"{where}[{position}]: unknown value '{item}'; known {what} are {', '.join(sorted(known))}.")
    return errors


def _arg_errors(where: str, arg) -> list[str]:
    if not isinstance(arg, Mapping):
        return [f"{where}: must be a mapping with index, value and op, not {_type_name(arg)}."]
    errors = _unknown_keys(where, arg.keys(), ARG_KEYS, {})
    for key in ("index", "value", "op"):
        if key not in arg:
            errors.append(f"{where}: '{key}' is missing.")
    if "index" in arg and not (_is_int(arg["index"]) and 0 <= arg["index"] <= 5):
        errors.append(f"{where}.index: must be a number from 0 to 5 (the syscall argument), not {arg['index']!r}.")
    for key in ("value", "valueTwo"):
        if key in arg and not (_is_int(arg[key]) and 0 <= arg[key] < 2**64):
            errors.append(f"{where}.{key}: must be a number from 0 to 2^64-1, not {arg[key]!r}.")
    if "op" in arg and arg["op"] not in OPERATORS:
        errors.append(
            f"{where}.op: unknown operator {arg['op']!r}; known operators are {', '.join(sorted(OPERATORS))}."
        )
    return errors


def _syscall_errors(where: str, rule) -> list[str]:
    if not isinstance(rule, Mapping):
        return [f"{where}: must be a mapping with names and action, not {_type_name(rule)}."]
    errors = _unknown_keys(where, rule.keys(), SYSCALL_KEYS, DOCKER_SYSCALL_KEYS)
    names = rule.get("names")
    if names is None:
        errors.append(f"{where}: 'names' is missing; every rule lists the syscalls it applies to.")
    elif not isinstance(names, (list, tuple)):
        errors.append(f"{where}.names: must be a list of syscall names, not {_type_name(names)}.")
    elif not names:
        errors.append(f"{where}.names: is empty; a rule must name at least one syscall.")
    else:
        for position, name in enumerate(names):
            if not isinstance(name, str):
                errors.append(f"{where}.names[{position}]: must be a string, not {_type_name(name)}.")
            elif not name.strip():
                errors.append(f"{where}.names[{position}]: is an empty name.")
            elif not SYSCALL_NAME.fullmatch(name):
                errors.append(f"{where}.names[{position}]: '{name}' is not a syscall name (lower case, digits, _).")
    if "action" not in rule:
        errors.append(f"{where}: 'action' is missing.")
    else:
        errors += _action_errors(f"{where}.action", rule["action"])
    if "errnoRet" in rule:
        errors += _errno_errors(f"{where}.errnoRet", rule["errnoRet"])
        if rule.get("action") not in ERRNO_ACTIONS:
            errors.append(f"{where}.errnoRet: only applies to {' and '.join(ERRNO_ACTIONS)}, not {rule.get('action')}.")
    if "args" in rule:
        args = rule["args"]
        if not isinstance(args, (list, tuple)):
            errors.append(f"{where}.args: must be a list, not {_type_name(args)}.")
        else:
            for position, arg in enumerate(args):
                errors += _arg_errors(f"{where}.args[{position}]", arg)
    return errors


def seccomp_profile_errors(profile) -> list[str]:
    """Return what is wrong with `profile` as an OCI seccomp profile (empty list: nothing)."""
    if not isinstance(profile, Mapping):
        return [f"the profile must be a mapping (a JSON object), not {_type_name(profile)}."]
    errors = _unknown_keys("profile", profile.keys(), PROFILE_KEYS, DOCKER_PROFILE_KEYS)
    if "defaultAction" not in profile:
        errors.append("profile: 'defaultAction' is missing (SCMP_ACT_ERRNO denies what the rules do not allow).")
    else:
        errors += _action_errors("defaultAction", profile["defaultAction"])
    if "defaultErrnoRet" in profile:
        errors += _errno_errors("defaultErrnoRet", profile["defaultErrnoRet"])
    if "architectures" in profile:
        errors += _string_list_errors("architectures", profile["architectures"], ARCHITECTURES, "architectures")
    if "flags" in profile:
        errors += _string_list_errors("flags", profile["flags"], FLAGS, "flags")
    for key in ("listenerPath", "listenerMetadata"):
        if key in profile and not isinstance(profile[key], str):
            errors.append(f"{key}: must be a string, not {_type_name(profile[key])}.")
    syscalls = profile.get("syscalls", [])
    if not isinstance(syscalls, (list, tuple)):
        errors.append(f"syscalls: must be a list of rules, not {_type_name(syscalls)}.")
        syscalls = []
    for position, rule in enumerate(syscalls):
        errors += _syscall_errors(f"syscalls[{position}]", rule)
    actions = [profile.get("defaultAction")] + [r.get("action") for r in syscalls if isinstance(r, Mapping)]
    if "SCMP_ACT_NOTIFY" in actions and not profile.get("listenerPath"):
        errors.append("profile: SCMP_ACT_NOTIFY needs 'listenerPath' (the socket of the seccomp agent).")
    return errors


def seccomp_oci_profile(rules, architectures, default_errno_ret: int = 1) -> dict:
    """Build an OCI profile: deny with errno `default_errno_ret`, except what `rules` say."""
    if not isinstance(rules, (list, tuple)):
        raise AnsibleFilterError(f"seccomp_oci_profile: rules must be a list, not {_type_name(rules)}")
    if not isinstance(architectures, (list, tuple)):
        raise AnsibleFilterError(f"seccomp_oci_profile: architectures must be a list, not {_type_name(architectures)}")
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": default_errno_ret,
        "architectures": list(architectures),
        "syscalls": [dict(rule) for rule in rules],
    }


class FilterModule:
    """Seccomp profile filters (see the module docstring)."""

    def filters(self):
        return {
            "seccomp_profile_errors": seccomp_profile_errors,
            "seccomp_oci_profile": seccomp_oci_profile,
        }
