# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""`apparmor_refusal(failed_result, parser, parser_found, apparmor_dir, host)`: why the AppArmor profiles were
refused, as one message that names the fix.

`apparmor_pending(stats, profiles, apparmor_dir, parser, service_link="", loadable=False)`: whether the AppArmor
tasks of the role have anything to do, from its stat loop's results (``stats``): always where the kernel can load
profiles (``loadable``: only the load task reads which ones are loaded); else when apparmor_parser (``parser``, the
apparmor package) or apparmor.service's boot link (``service_link``; "" where the role does not enable it) is
missing, or a profile of ``profiles`` ({name: text}) is not in ``apparmor_dir`` as a root:root 0644 file with that text.

`apparmor_unloaded(profiles, host, supported, check_without_tools, kernel_enabled, apparmor_dir, platform)`: why the
AppArmor profiles are not loaded on a node: the platform (``platform``, e.g. "Rocky 9") has no AppArmor
(``supported`` false), check mode could not preview them (``check_without_tools``: the tools are not installed yet),
or the kernel has AppArmor disabled or no securityfs (``kernel_enabled`` says which). The security_profiles role
reports it (roles/security_profiles/tasks/main.yml).

The security_profiles role writes each AppArmor profile with apparmor_parser as the ``validate`` command
(roles/security_profiles/tasks/apparmor.yml); when that loop fails, its rescue states either that the parser is
missing, or, for each profile the parser rejected, the parser's own words (its cache warning dropped, the path of
the temporary copy replaced by the profile's name).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

# apparmor_parser -Q -K reads the candidate from the copy module's temporary file: <dir>/.source
_TEMPORARY_COPY = re.compile(r"/[^ ]+/[.]source")
_CACHE_WARNING = re.compile("Cache read/write disabled")


def apparmor_pending(stats, profiles, apparmor_dir: str, parser: str, service_link: str = "", loadable=False) -> bool:
    """Whether the AppArmor tasks have anything to do on the node the stat loop read (see the module docstring)."""
    if loadable:
        return True
    found = {r["item"]: r.get("stat", {}) for r in stats if isinstance(r, Mapping) and "item" in r}
    if not found.get(parser, {}).get("exists") or (service_link and not found.get(service_link, {}).get("exists")):
        return True
    for name, text in profiles.items():
        stat = found.get(f"{apparmor_dir}/{name}", {})
        if (
            not stat.get("exists")
            or not stat.get("isreg")
            or (stat.get("pw_name"), stat.get("gr_name"), stat.get("mode")) != ("root", "root", "0644")
            or stat.get("checksum") != hashlib.sha1(str(text).encode("utf-8")).hexdigest()
        ):
            return True
    return False


def apparmor_unloaded(
    profiles,
    host: str,
    supported: bool,
    check_without_tools: bool,
    kernel_enabled: bool,
    apparmor_dir: str,
    platform: str,
) -> str:
    """Why the AppArmor profiles ``profiles`` (their names) are not loaded on ``host``, with what follows."""
    names = ", ".join(str(p) for p in profiles)
    if not supported:
        return (
            f"{platform} has no AppArmor (containers are confined by SELinux there): no AppArmor profile is installed"
            f" on {host}. Pods scheduled on it must not set securityContext.appArmorProfile."
        )
    if check_without_tools:
        return (
            f"Check mode: the AppArmor tools are not installed on {host} yet, so the profiles ({names}) are parsed,"
            " installed and loaded by a real run only."
        )
    kernel = (
        f"AppArmor is enabled in the kernel of {host} but its interface /sys/kernel/security/apparmor is not there"
        " (a container without securityfs?)"
        if kernel_enabled
        else f"The kernel of {host} has AppArmor disabled"
    )
    return (
        f"{kernel}: AppArmor profile(s) {names} are installed in {apparmor_dir} but not loaded. apparmor.service loads"
        " them at the next boot with AppArmor enabled; until they are loaded, pods that reference them do not start on"
        " this node."
    )


def _failed(result: Mapping) -> list:
    """The failed items of a loop's result, or the result itself when it is not a loop's."""
    items = result.get("results", [result]) if isinstance(result, Mapping) else []
    return [r for r in items if isinstance(r, Mapping) and r.get("failed")]


def _refusal(item: Mapping, apparmor_dir: str) -> str:
    looped = item.get("item")
    key = looped.get("key", "?") if isinstance(looped, Mapping) else "?"
    stderr = " ".join(line for line in item.get("stderr_lines", []) if not _CACHE_WARNING.search(line))
    detail = _TEMPORARY_COPY.sub(key, stderr) or item.get("msg", "")
    return f"AppArmor profile '{key}' refused, nothing was written for it to {apparmor_dir}: {detail}. "


def apparmor_refusal(failed_result: Mapping, parser: str, parser_found: bool, apparmor_dir: str, host: str) -> str:
    """The message of a failed AppArmor install: the parser is missing (install it or turn AppArmor off), or
    each refused profile with apparmor_parser's reason, then the fix (the profile text)."""
    if not parser_found:
        return (
            f"{parser} is missing on {host}: the AppArmor profiles cannot be checked, so none is installed. "
            "Install the apparmor package (security_profiles_apparmor_install_packages: true) or set "
            "security_profiles_manage_apparmor: false."
        )
    refusals = "".join(_refusal(item, apparmor_dir) for item in _failed(failed_result))
    return (
        f"{refusals}Fix the profile text (security_profiles_apparmor_extra, or the security_profiles_apparmor_* "
        "variables for the FUSE profile) and run again."
    )


class FilterModule:
    """Filters of the security_profiles role's AppArmor part."""

    def filters(self):
        return {
            "apparmor_pending": apparmor_pending,
            "apparmor_refusal": apparmor_refusal,
            "apparmor_unloaded": apparmor_unloaded,
        }
