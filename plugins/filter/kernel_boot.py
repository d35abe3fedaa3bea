"""Which kernel a node boots after playbooks/upgrade_kernel.yml's reboot: its boot loader's default, read before the
node is drained (tasks/upgrade_kernel_boot_read.yml), and what makes the target kernel that default.

REFERENCE (facts about GRUB and grubby this file relies on):
- GRUB_DEFAULT is a menu entry number (counted from 0), a title or identifier (a submenu's and its entry's joined by
  ">"), or "saved": then the entry in the environment block's saved_entry boots (next_entry once, first), set by
  grub-set-default / grub-reboot; unset, entry 0 boots (GNU GRUB manual, "Simple configuration", GRUB_DEFAULT;
  grub-set-default(8): "This requires setting GRUB_DEFAULT=saved in /etc/default/grub"; grub-editenv(1)).
- grub-mkconfig sources /etc/default/grub, then every /etc/default/grub.d/*.cfg (a later assignment wins: Ubuntu's
  cloud images keep settings there) (grub2-common, /usr/sbin/grub-mkconfig).
- Entry 0 of the menu is the newest kernel: util/grub.d/10_linux.in lists /boot/vmlinuz-* in `version_sort -r`
  order, unless GRUB_TOP_LEVEL names the kernel to put first (GRUB 2.12).
- On EL (RHEL, Rocky, Alma 8+: BootLoaderSpec entries), `grubby --set-default /boot/vmlinuz-<release>` makes that
  kernel the default and `grubby --default-kernel` prints the default's kernel path (grubby(8)); whether kernel-install
  makes a new kernel the default depends on UPDATEDEFAULT in /etc/sysconfig/kernel, so it is set, not assumed.
"""

from __future__ import annotations

import re


def _version_key(text: str) -> list:
    """GNU sort -V's order (what GRUB's version_sort uses), close enough for kernel releases: digit runs compare as
    numbers, the rest as text."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.findall(r"\d+|\D+", str(text))]


def _names(entry: str, release: str) -> bool:
    """Whether a GRUB entry (title, identifier, or submenu>entry) names kernel ``release``, not one it prefixes."""
    return re.search(rf"(?<![\w.]){re.escape(release)}(?![\w.])", str(entry)) is not None


def _read(stdout: str) -> dict:
    """The key=value lines upgrade_kernel_boot_read.yml prints (kernel= once per /boot/vmlinuz-*)."""
    facts: dict = {"kernel": []}
    for line in str(stdout or "").splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "kernel":
            facts["kernel"].append(value.strip())
        else:
            facts[key] = value.strip()
    return facts


def gpu_kernel_boot(stdout, release, pkg_mgr="apt") -> dict:
    """What the node's boot loader boots once kernel ``release`` is installed, from upgrade_kernel_boot_read.yml's
    output: ``{"ok", "action", "boots", "reason", "fix"}``. ``action``: "none" (the default is the target already,
    or will be once it is installed), "grubby" (EL: set with grubby), "unset_saved" (GRUB_DEFAULT=saved with another
    saved entry, the target the newest kernel: forgetting the saved entry makes entry 0, the target, boot).
    ``ok`` False: the node would boot another kernel and nothing here can safely change that (``reason``, ``fix``);
    ``boots``: the kernel (or entry) it would boot."""
    release = str(release)
    facts = _read(stdout)
    target = f"/boot/vmlinuz-{release}"
    result = {"ok": True, "action": "none", "boots": release, "reason": "", "fix": ""}
    if pkg_mgr != "apt":
        if facts.get("grubby") != "yes":
            return {
                **result,
                "ok": False,
                "boots": "?",
                "reason": "grubby is not installed, so the default boot entry cannot be set to the target kernel",
                "fix": "install grubby (dnf install grubby)",
            }
        if facts.get("grubby_default") == target:
            return result
        return {**result, "action": "grubby"}
    if facts.get("grub") != "yes":
        # no GRUB configuration (systemd-boot, a board's own loader): the check after the reboot tells
        return {
            **result,
            "boots": "?",
            "reason": "no GRUB configuration: the running kernel is checked after the reboot",
        }
    kernels = sorted({*(k for k in facts["kernel"] if k), release}, key=_version_key, reverse=True)
    newest = kernels[0]
    newer = [k for k in kernels if _version_key(k) > _version_key(release)]
    default = facts.get("default", "")
    top = facts.get("top_level", "")
    if top and top != target:
        return {
            **result,
            "ok": False,
            "boots": top.rpartition("vmlinuz-")[2],
            "reason": f"GRUB_TOP_LEVEL={top} puts that kernel first in the boot menu",
            "fix": f"set GRUB_TOP_LEVEL={target} or remove it, run update-grub, then run the playbook again",
        }
    saved = facts.get("next_entry") or facts.get("saved_entry") or ""
    if default == "saved" and saved:
        if _names(saved, release):
            return result
        if newest == release:
            return {**result, "action": "unset_saved"}
        return {
            **result,
            "ok": False,
            "boots": saved,
            "reason": f"GRUB_DEFAULT=saved boots the saved entry {saved!r}, and {release} is not the newest kernel "
            f"(newer: {', '.join(newer)}), so forgetting that entry would boot {newest}",
            "fix": f"grub-set-default the entry of {release} (grep menuentry /boot/grub/grub.cfg) after it is "
            f"installed, or remove the newer kernels, then run the playbook again",
        }
    if default in ("", "0", "saved"):
        if newest == release:
            return result
        return {
            **result,
            "ok": False,
            "boots": newest,
            "reason": f"GRUB_DEFAULT={default or '0'} boots the newest kernel, and {', '.join(newer)} "
            f"{'is' if len(newer) == 1 else 'are'} newer than {release}",
            "fix": f"remove the newer kernel packages, or set GRUB_DEFAULT=saved and grub-set-default the entry of "
            f"{release}, then run the playbook again",
        }
    if _names(default, release):
        return result
    return {
        **result,
        "ok": False,
        "boots": default,
        "reason": f"GRUB_DEFAULT={default} pins another boot entry than kernel {release}",
        "fix": f"set GRUB_DEFAULT=0 (the newest kernel boots) or to the entry of {release} in /etc/default/grub (and "
        f"any /etc/default/grub.d/*.cfg that sets it), run update-grub, then run the playbook again",
    }


class FilterModule:
    """The boot loader's default kernel, for playbooks/upgrade_kernel.yml."""

    def filters(self):
        return {"gpu_kernel_boot": gpu_kernel_boot}
