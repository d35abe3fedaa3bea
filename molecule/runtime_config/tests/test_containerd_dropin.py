"""runtime_config_containerd_method: dropin on a real containerd 2.2 (rc-ubuntu2204; issue 24 item 6).

The drop-in (/etc/containerd/conf.d/99-nvidia.toml, imported by config.toml) is checked the way the in-place edit
is: before writing, containerd reads config.toml with the new drop-in in a staged copy of conf.d
(`containerd --config <root> config dump`), and a reading that differs from what was meant is refused, naming the
tables, with both files left as they were. Here an admin's drop-in in conf.d, which config.toml does not import yet,
sorts after ours and gives nvidia another binary: the current effective config cannot show it (the role's check of
the running config passes), only the reading of the pair does. The node gets back its config.toml byte for byte
(the later tests use method inplace).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from playbook_runner import folded, run_playbook

from tests.cri.containerd import cri_ready, effective, started_at

testinfra_hosts = ["ansible://rc-ubuntu2204"]
CONFIG = "/etc/containerd/config.toml"
CONF_D = "/etc/containerd/conf.d"
DROPIN = f"{CONF_D}/99-nvidia.toml"
ADMIN = f"{CONF_D}/99-zz-admin.toml"
RUNTIME = "/usr/bin/nvidia-container-runtime"
DROPIN_METHOD = {"runtime_config_containerd_method": "dropin"}


def _nvidia(host) -> dict:
    return effective(host)["runtimes"]["nvidia"]


def test_the_dropin_method_is_read_by_containerd_and_a_reading_otherwise_is_refused(host):
    saved = host.check_output(f"base64 -w0 {CONFIG}")
    try:
        # a config.toml that imports nothing (containerd 2.1's `config default`, an AKS-style file; 2.2's default
        # imports conf.d/*.toml already) and an admin's drop-in in conf.d: harmless today, but the drop-in method
        # imports conf.d/*.toml, and this file sorts after ours: nvidia would run runc itself
        host.check_output(f"sed -i 's|^imports = .*$|imports = []|' {CONFIG} && grep -qx 'imports = \\[\\]' {CONFIG}")
        host.check_output(
            f"mkdir -p {CONF_D} && printf '%s\\n' 'version = 3' "
            "'[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia.options]' "
            f"'  BinaryName = \"/usr/sbin/runc\"' > {ADMIN}"
        )
        config, started = host.file(CONFIG).sha256sum, started_at(host)
        run = run_playbook(host, SCENARIO / "converge.yml", DROPIN_METHOD)
        assert run.returncode != 0, run.stdout[-3000:]
        said = folded(run)
        assert f"containerd reads the new {DROPIN} (imported by {CONFIG}) otherwise than meant" in said, said[-3000:]
        assert f"runtimes.nvidia.options.BinaryName is '/usr/sbin/runc', not '{RUNTIME}'" in said, said[-3000:]
        assert f"{DROPIN} (imported by {CONFIG}) was left as it was" in said
        assert host.file(CONFIG).sha256sum == config and not host.file(DROPIN).exists
        assert started_at(host) == started, "containerd was restarted"
        assert host.check_output(f"ls -A {CONF_D}") == ADMIN.rsplit("/", 1)[1]  # no debris of the staged reading

        # without the admin's file the same run writes the drop-in, and the running containerd reads it as meant
        host.check_output(f"rm {ADMIN}")
        run = run_playbook(host, SCENARIO / "converge.yml", DROPIN_METHOD)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr
        assert host.file(DROPIN).exists
        assert f"{CONF_D}/*.toml" in tomllib.loads(host.file(CONFIG).content_string)["imports"]
        assert _nvidia(host)["options"]["BinaryName"] == RUNTIME
    finally:
        host.check_output(f"rm -f {ADMIN} {DROPIN} && echo {saved} | base64 -d > {CONFIG}")
        host.check_output(f"rmdir --ignore-fail-on-non-empty {CONF_D} && systemctl restart containerd")
        cri_ready(host)
    assert _nvidia(host)["options"]["BinaryName"] == RUNTIME
