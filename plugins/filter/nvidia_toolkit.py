# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""What the NVIDIA container toolkit role decides and says to the operator, written once here rather than as Jinja
programs in the role's vars and tasks (issue 40). Each message filter returns "" where there is nothing to say.

- `nvidia_default_now(runtime_defaults, runtimes)`: whether NVIDIA's runtime (under any name: the facts'
  `default_nvidia`, issue 37) is the default of one of `runtimes` now (gpu_node facts `runtime_defaults`).
- `nvidia_toolkit_settings(toolkit_config, keep, accept_envvar, accept_volume_mounts, annotation_prefixes,
  overrides)`: the keys merged into config.toml. The two envvar/volume-mount doors stay shut and the CDI annotation
  prefixes are the role's, except where `keep` (nvidia_container_toolkit_keep_gpu_pod_access) keeps what GPU pods
  rely on now (the facts' `toolkit_config`: the effective values); `overrides` (nvidia_container_toolkit_config) are
  merged over them recursively, as Ansible's `combine(recursive=True)` does.

- `nvidia_toolkit_left_out(host, applies, driver_loaded, cdi_generate, register_wanted, runtimes_found)`: what the
  role leaves out on the node and why, said once before anything changes (tasks/apply.yml, tasks/report.yml): the
  whole role on a node without GPU or driver, else the CDI spec where the driver is not loaded, and the runtime
  registration where no container runtime is found.
- `nvidia_cdi_report(scratch, host, spec_path, refresh, refresh_units)`: who writes the CDI spec where this run
  does not (tasks/cdi_report.yml, tasks/report.yml). `scratch` is the CDI read's first line: "-" where the driver is
  not loaded, "" where the read printed nothing or did not run (nvidia-ctk missing, check mode before the install),
  else the scratch directory of the spec.
- `nvidia_toolkit_key_problem(fingerprints, url, expected, stderr)`: why the downloaded repository key is refused
  (tasks/key.yml): not a key, several keys, or another key.
- `nvidia_toolkit_missing_versions(target, missing, available, host)`: why the packages cannot be installed at one
  version (tasks/version.yml): no source offers the toolkit, or some packages lack the target version.

Callers: roles/nvidia_container_toolkit (vars/main.yml, tasks/key.yml, tasks/version.yml).
"""

from __future__ import annotations

import json
import re

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.vars import merge_hash

_REFRESH_SERVICE = "nvidia-cdi-refresh.service"


def nvidia_default_now(runtime_defaults, runtimes) -> bool:
    """Whether NVIDIA's runtime is the default of one of `runtimes` now."""
    return any(
        isinstance(default, dict) and default.get("default_nvidia")
        for name, default in (runtime_defaults or {}).items()
        if name in runtimes
    )


def nvidia_toolkit_settings(
    toolkit_config, keep: bool, accept_envvar: bool, accept_volume_mounts: bool, annotation_prefixes, overrides
) -> dict:
    """The config.toml keys the role merges (see the module docstring)."""
    now = toolkit_config if isinstance(toolkit_config, dict) else {}

    def kept(key: str) -> bool:
        return keep and boolean(now.get(key, False), strict=False)

    prefixes_now = now.get("cdi_annotation_prefixes_effective") or []
    settings = {
        "accept-nvidia-visible-devices-envvar-when-unprivileged": accept_envvar
        or kept("accept_envvar_when_unprivileged_effective"),
        "accept-nvidia-visible-devices-as-volume-mounts": accept_volume_mounts
        or kept("accept_volume_mounts_effective"),
        "nvidia-container-runtime": {
            "modes": {"cdi": {"annotation-prefixes": prefixes_now if keep and prefixes_now else annotation_prefixes}}
        },
    }
    return merge_hash(settings, overrides or {}, recursive=True)


def nvidia_toolkit_left_out(
    host: str, applies: bool, driver_loaded: bool, cdi_generate: bool, register_wanted: bool, runtimes_found: bool
) -> str:
    """What the role leaves out on `host` and why ("" when nothing)."""
    if not applies:
        return (
            f"Skipping the NVIDIA container toolkit on {host}: no NVIDIA GPU on PCI and no NVIDIA driver loaded "
            "(ansible_facts.gpu_node.has_gpu and .driver.loaded are false). Set nvidia_container_toolkit_force: true "
            "to install it anyway, for example on an image built without GPUs."
        )
    said = []
    if cdi_generate and not driver_loaded:
        said.append(
            f"Not generating the CDI spec on {host} in this run: the NVIDIA driver is not loaded "
            "(ansible_facts.gpu_node.driver.loaded is false; a driver installed in this run loads at the reboot), and "
            "nvidia-ctk needs it to list the devices. The refresh units are still enabled where the toolkit ships "
            "them, and the run says below who writes the spec."
        )
    if register_wanted and not runtimes_found:
        said.append(
            f"No container runtime to register the nvidia runtime in on {host}: none of docker, containerd and CRI-O "
            "is installed (ansible_facts.gpu_node.runtimes_installed is empty). Install one first, or name them in "
            "nvidia_container_toolkit_runtimes."
        )
    return " ".join(said)


def nvidia_cdi_report(scratch: str, host: str, spec_path: str, refresh: bool, refresh_units) -> str:
    """Who writes the CDI spec at `spec_path` where this run does not ("" where this run did, or nothing was read)."""
    if scratch == "-":
        said = f"No NVIDIA driver is loaded on {host} yet, so this run generated no CDI spec."
        if refresh and _REFRESH_SERVICE in refresh_units:
            return (
                f"{said} {_REFRESH_SERVICE} is enabled: at the next boot with the driver (the driver role's reboot "
                f'after a fresh install) it writes {spec_path}; the doctor (playbooks/validate.yml, row "CDI spec") '
                "checks it after that reboot."
            )
        why = ": toolkit 1.17 or older" if refresh else ", nvidia_container_toolkit_cdi_refresh is false"
        return (
            f"{said} Nothing writes {spec_path} at boot (no nvidia-cdi-refresh units{why}): run site.yml --tags "
            "toolkit again once the driver is loaded."
        )
    if scratch and refresh and len(refresh_units) == 0:
        under_run = ", and after each boot (the spec is under /run)" if re.match("/(var/)?run/", spec_path) else ""
        return (
            "The installed toolkit does not ship nvidia-cdi-refresh.path/.service (they come with 1.18): the CDI spec "
            f"at {spec_path} is not regenerated at boot or when the driver changes. Run this role again after a "
            f"driver change{under_run}."
        )
    return ""


def nvidia_toolkit_key_problem(fingerprints, url: str, expected: str, stderr: str) -> str:
    """Why the key file at `url`, whose primary key fingerprints are `fingerprints`, is not to be trusted."""
    untrusted = "Nothing was written and the repository is not trusted."
    if len(fingerprints) == 0:
        return (
            f"The file at {url} is not an OpenPGP public key ({stderr.strip().replace(chr(10), '; ')}). {untrusted} "
            "Correct nvidia_container_toolkit_repo_key_url."
        )
    if len(fingerprints) > 1:
        return (
            f"The file at {url} holds {len(fingerprints)} keys ({', '.join(fingerprints)}), but only the key with the "
            f"fingerprint {expected} (nvidia_container_toolkit_repo_key_fingerprint) may be trusted. {untrusted} Point "
            "nvidia_container_toolkit_repo_key_url at a file with that key alone."
        )
    return (
        f"The key at {url} has the fingerprint {fingerprints[0]}, but nvidia_container_toolkit_repo_key_fingerprint "
        f"expects {expected}. {untrusted} Check the key out of band and correct nvidia_container_toolkit_repo_key_url "
        "or nvidia_container_toolkit_repo_key_fingerprint."
    )


def nvidia_toolkit_missing_versions(target: str, missing, available: dict, host: str) -> str:
    """Why the toolkit packages cannot all be installed at `target` ({package: versions offered} in `available`)."""
    if len(target) == 0:
        return (
            f"No package source of {host} offers nvidia-container-toolkit. Let the role manage the repository "
            "(nvidia_container_toolkit_manage_repo: true) or add NVIDIA's repository (or your mirror) yourself."
        )
    offered = {name: versions for name, versions in available.items() if name in missing}
    return (
        f"The package sources of {host} do not offer version {target} of {', '.join(missing)} (versions offered: "
        f"{json.dumps(offered)}). Set nvidia_container_toolkit_version to a version all four packages have."
    )


class FilterModule:
    """The toolkit role's messages (see the module docstring)."""

    def filters(self):
        return {
            "nvidia_default_now": nvidia_default_now,
            "nvidia_toolkit_settings": nvidia_toolkit_settings,
            "nvidia_toolkit_left_out": nvidia_toolkit_left_out,
            "nvidia_cdi_report": nvidia_cdi_report,
            "nvidia_toolkit_key_problem": nvidia_toolkit_key_problem,
            "nvidia_toolkit_missing_versions": nvidia_toolkit_missing_versions,
        }
