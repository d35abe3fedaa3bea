# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's families: the one list of them, in the doctor's order, each with what its rows check.

A family is a group of the doctor's checks: what the module gpu_validate_checks runs (its option ``families``), what
each row it returns carries (``family``, set by run_checks for the rows of the family's checks) and what the fleet
report groups and filters the rows by. Read by plugins/modules/gpu_validate_checks.py (the node-side module, as
module_utils.gpu_validate.families), by plugins/filter/validate.py (the families the role asks for) and
plugins/filter/fleet_report.py (the report's order of families), both loaded through controller_files, and by the
unit test that checks the families table of roles/gpu_validate/README.md against it.

Stdlib only, Python 3.8+ (the node's python3). Data only.
"""

from __future__ import annotations

# (name, description, switch): switch is the role's variable that turns the family on (gpu_validate_check_*), or
# None where the family always runs. The description is the README's (roles/gpu_validate/README.md, "Families").
FAMILIES = (
    (
        "driver",
        "the NVIDIA driver: loaded at its pin, `nvidia-smi`, `nvidia-peermem`, the driver of the kernel booted next",
        None,
    ),
    ("toolkit", "NVIDIA's container toolkit: installed, at its pin", None),
    ("runtime", "a container runtime to check: a node without docker, containerd and CRI-O warns", None),
    (
        "docker",
        "docker: the nvidia runtime registered and not the default, a container through it, GPU isolation through "
        "nvidia and through the default runtime",
        None,
    ),
    (
        "containerd",
        "containerd: the nvidia runtime in its effective configuration and not the default, its CRI plugin, the "
        "drop-ins' config versions, the running config, a container and GPU isolation through nvidia",
        None,
    ),
    (
        "crio",
        "CRI-O: the nvidia handler in its effective and running configuration and not the default, its CRI, a pod "
        "and GPU isolation through nvidia",
        None,
    ),
    (
        "isolation",
        "GPU isolation of FUSE-like containers: one with CAP_SYS_ADMIN that requests no GPU sees none through each "
        "runtime's default; NVIDIA's device plugin against the node",
        None,
    ),
    (
        "doors",
        "the other doors to a GPU without a request: each NVIDIA runtime entry's toolkit config, GPUs by volume mount, "
        "CDI annotations of pods",
        None,
    ),
    ("cdi", "every CDI spec the runtimes read, against `/dev` and the loaded driver", None),
    ("mig", "the MIG layout the MIG manager selects, against `nvidia-smi`", None),
    ("fabric", "NVIDIA IMEX against `gpu_validate_imex`, and the NVLink fabric", None),
    (
        "health",
        "the GPUs' health (`GPU health: ...`: a failed row marks the node to drain) and the declared GPU settings",
        None,
    ),
    ("fuse", "`/dev/fuse`", "gpu_validate_check_fuse"),
    ("security", "the FUSE AppArmor and seccomp profiles", "gpu_validate_check_security"),
    (
        "confinement",
        "how FUSE pods can be confined: user namespaces, AppArmor + seccomp, seccomp only",
        "gpu_validate_check_fuse",
    ),
    ("kubelet", "the kubelet's drop-in, its main configuration and environment file", "gpu_validate_check_kubelet"),
    (
        "dra",
        "which GPU plugin is registered with the kubelet and, on DRA nodes, what NVIDIA's DRA driver needs",
        "gpu_validate_check_kubelet",
    ),
)

NAMES = tuple(name for name, _description, _switch in FAMILIES)
DESCRIPTIONS = {name: description for name, description, _switch in FAMILIES}
SWITCHES = {name: switch for name, _description, switch in FAMILIES}
