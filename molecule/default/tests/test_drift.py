"""A no-op re-run still repairs drift (issue 47): what each role owns, edited by hand, is put back by the next
site.yml, and the run shows it as a change.

The no-op path of every role is one read that decides whether its changing tasks run (plugins/action/role_read.py):
a read that missed a hand edit would leave the node drifted with changed=0. One site.yml run on one node after one
hand edit per role that acts on a node container (the driver, MIG and gpu_settings have nothing to act on there:
no GPU; AppArmor is not in this kernel, the seccomp half of security_profiles is):
- nvidia_container_toolkit: config.toml accepts NVIDIA_VISIBLE_DEVICES from unprivileged containers again;
- runtime_config: the nvidia entry gone from daemon.json (docker restarts in its transaction);
- fuse: user_allow_other added to /etc/fuse.conf;
- security_profiles: a byte appended to the seccomp profile;
- kubelet: a line added to the KubeletConfiguration drop-in, the --config-dir flag removed from KUBELET_EXTRA_ARGS;
- gpu_validate: validate.txt edited.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import recap, run_playbook

testinfra_hosts = ["ansible://site-debian11"]

TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"
ENVVAR_KEY = "accept-nvidia-visible-devices-envvar-when-unprivileged"
DAEMON_JSON = "/etc/docker/daemon.json"
FUSE_CONF = "/etc/fuse.conf"
SECCOMP = "/var/lib/kubelet/seccomp/profiles/fuse.json"
DROPIN = "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf"
ENV_FILE = "/etc/default/kubelet"
REPORT = "/var/lib/gpu-node-provisioning/validate.txt"
# compared byte for byte after the re-run: the files the roles write whole
WHOLE = (FUSE_CONF, SECCOMP, DROPIN, ENV_FILE, REPORT)


def _toolkit_envvar(host) -> bool:
    return tomllib.loads(host.file(TOOLKIT_CONFIG).content_string)[ENVVAR_KEY]


def test_a_re_run_puts_back_what_each_role_owns(host):
    before = {path: host.file(path).content_string for path in WHOLE}
    daemon = json.loads(host.file(DAEMON_JSON).content_string)
    assert daemon["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert _toolkit_envvar(host) is False
    assert "--config-dir=" in before[ENV_FILE]
    edits = [
        f"sed -i 's/^{ENVVAR_KEY} = false/{ENVVAR_KEY} = true/' {TOOLKIT_CONFIG}",
        # the entry alone: what else daemon.json holds is the node's (the merge keeps it)
        f'python3 -c \'import json; d = json.load(open("{DAEMON_JSON}")); d["runtimes"].pop("nvidia");'
        f' json.dump(d, open("{DAEMON_JSON}", "w"))\'',
        f"echo user_allow_other >> {FUSE_CONF}",
        f"printf ' ' >> {SECCOMP}",
        f"echo 'maxPods: 7' >> {DROPIN}",
        # the role's flag gone (a flag it does not own, such as a renamed one, stays: merged, never clobbered)
        f'sed -i "s|--config-dir=[^ \']*||" {ENV_FILE}',
        f"echo edited by hand >> {REPORT}",
    ]
    for edit in edits:
        host.run_expect([0], f"set -e; {edit}")
    assert _toolkit_envvar(host) is True
    assert all(host.file(path).content_string != before[path] for path in WHOLE)

    # converge.yml: site.yml after the stand-in repository facts of the scenario (its key, its URL)
    run = run_playbook(host, SCENARIO / "converge.yml")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    counters = recap(run.stdout)[host.backend.get_hostname()]
    # each role whose file was edited reports its repair as a change (the toolkit, daemon.json, fuse.conf, the
    # seccomp profile, the drop-in, the env file, the doctor's report)
    assert counters["changed"] >= 6 and counters["failed"] == 0, run.stdout[-4000:]

    assert _toolkit_envvar(host) is False
    assert json.loads(host.file(DAEMON_JSON).content_string) == daemon
    changed = [path for path in WHOLE if host.file(path).content_string != before[path]]
    assert changed == [], changed


# The roles gpu_node_facts' task reads ahead (plugins/plugin_utils/read_ahead.py): a hand edit of one of them alone,
# with nothing changed by a role before it, is found by that read ahead (not by the role's own read after another
# role's change made the read ahead stale, as above): the role reads again in its one task and repairs it.
# (role, the edit, the file it edits)
READ_AHEAD_EDITS = [
    ("fuse", f"echo user_allow_other >> {FUSE_CONF}", FUSE_CONF),
    ("security_profiles", f"printf ' ' >> {SECCOMP}", SECCOMP),
    ("kubelet", f"echo 'maxPods: 7' >> {DROPIN}", DROPIN),
]


def _started(run, role: str) -> list[str]:
    """The task headers of ``role`` the run printed."""
    return [line for line in run.stdout.splitlines() if line.startswith(f"TASK [{role} : ")]


def test_a_role_read_ahead_repairs_a_hand_edit_of_its_own(host):
    before = {path: host.file(path).content_string for _role, _edit, path in READ_AHEAD_EDITS}
    for role, edit, path in READ_AHEAD_EDITS:
        host.run_expect([0], f"set -e; {edit}")
        run = run_playbook(host, SCENARIO / "converge.yml")
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        counters = recap(run.stdout)[host.backend.get_hostname()]
        assert counters["changed"] >= 1 and counters["failed"] == 0, (role, run.stdout[-4000:])
        assert host.file(path).content_string == before[path], role
        # the role read again and changed what its read ahead found: more than its one task
        assert len(_started(run, role)) > 1, (role, _started(run, role))
        # the roles before it were decided by the read ahead: one task each
        for earlier, _edit, _path in READ_AHEAD_EDITS[: [r for r, _e, _p in READ_AHEAD_EDITS].index(role)]:
            assert len(_started(run, earlier)) == 1, (role, earlier, _started(run, earlier))

    # and the no-op re-run: one task for each of these roles
    run = run_playbook(host, SCENARIO / "converge.yml")
    assert run.returncode == 0 and recap(run.stdout)[host.backend.get_hostname()]["changed"] == 0, run.stdout[-4000:]
    assert {role: len(_started(run, role)) for role, _edit, _path in READ_AHEAD_EDITS} == {
        role: 1 for role, _edit, _path in READ_AHEAD_EDITS
    }
