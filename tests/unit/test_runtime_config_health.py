"""The restart's health check of containerd (roles/runtime_config/tasks/health.yml) reads `config dump` as TOML.

containerd 1.x prints basic strings (`default_runtime_name = "nvidia"`), 2.x literal ones (`= 'nvidia'`): the check
of an RKE2/k3s agent's default runtime matched the double quotes only, so on containerd 2.x (RKE2 from v1.31.6) a
healthy agent that makes nvidia the default failed the check and was rolled back (issue 36, item 3). Here the task
file runs against this machine with a stand-in `ctr` (the CRI plugin ok) and, as `containerd`, the real containerd
2.3.4 from the upstream directory reading a config of this test (fixture upstream_dir), or a TEST STAND-IN printing
what containerd 1.7 prints (the in-k3s/in-rke2 nodes' Debian 13 containerd): the health check passes where the
runtime and its default are there, whatever the quotes, and fails naming what is missing where they are not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_local_playbook

ROOT = Path(__file__).resolve().parents[2]
# TEST STAND-IN for ctr: containerd answers and its CRI plugin is ok
CTR = """#!/bin/sh
[ "$1" = --address ] && shift 2
[ "$1" = plugins ] && echo "io.containerd.grpc.v1  cri  linux/amd64  ok"
exit 0
"""
CRI_V4 = "plugins.'io.containerd.cri.v1.runtime'.containerd"
CONFIG_V4 = f"""version = 4
[{CRI_V4}]
  default_runtime_name = '{{default}}'
[{CRI_V4}.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
[{CRI_V4}.runtimes.{{name}}]
  runtime_type = 'io.containerd.runc.v2'
"""
CRI_V2 = 'plugins."io.containerd.grpc.v1.cri".containerd'
# TEST STAND-IN: the part of containerd 1.7's `config dump` the check reads (basic strings, as 1.x's encoder writes)
DUMP_1X = f"""version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [{CRI_V2}]
      default_runtime_name = "{{default}}"
      [{CRI_V2}.runtimes]
        [{CRI_V2}.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"
        [{CRI_V2}.runtimes.{{name}}]
          runtime_type = "io.containerd.runc.v2"
"""
PLAY = """
- name: The runtime_config restart's health check of containerd
  hosts: localhost
  connection: local
  gather_facts: false
  environment:
    PATH: "{bin}:/usr/bin:/bin"
  vars:
    runtime_config_name: nvidia
    runtime_config_set_as_default: {set_as_default}
    runtime_config_health_retries: 1
    runtime_config_health_delay: 0
    runtime_config_containerd_config: {config}
    __runtime_config_expect_runtime: true
    __runtime_config_rt: {rt}
    __runtime_config_installer_managed: {managed}
    __runtime_config_installer:
      service: rke2-agent
      bin_dir: {bin}
      containerd: {{socket: /run/k3s/containerd/containerd.sock, config: {config}}}
  tasks:
    - name: Run the health check
      ansible.builtin.include_tasks: {health}
    - name: Say the result
      ansible.builtin.debug:
        msg: "healthy={{{{ __runtime_config_health_ok }}}}"
"""


def _health(tmp_path: Path, containerd: str, installer: bool, set_as_default: bool, default: str, name: str = "nvidia"):
    """Run health.yml; ``containerd`` is 'real 2.3.4' (a config file it reads) or '1.7 stand-in' (a printed dump)."""
    bin_dir, config = tmp_path / "bin", tmp_path / "config.toml"
    bin_dir.mkdir()
    (bin_dir / "ctr").write_text(CTR)
    if containerd == "1.7 stand-in":
        (tmp_path / "dump.toml").write_text(DUMP_1X.format(default=default, name=name))
        (bin_dir / "containerd").write_text(f"#!/bin/sh\ncat {tmp_path / 'dump.toml'}\n")
    else:
        config.write_text(CONFIG_V4.format(default=default, name=name))
        (bin_dir / "containerd").symlink_to(containerd)
    for tool in bin_dir.iterdir():
        if not tool.is_symlink():
            tool.chmod(0o755)
    play = PLAY.format(
        bin=bin_dir,
        config=config,
        set_as_default=json.dumps(set_as_default),
        rt="rke2-agent" if installer else "containerd",
        managed=json.dumps(installer),
        health=ROOT / "roles" / "runtime_config" / "tasks" / "health.yml",
    )
    (tmp_path / "play.yml").write_text(play)
    run = run_local_playbook(tmp_path / "play.yml")
    return run, " ".join(run.stdout.split())


@pytest.fixture(scope="module")
def containerd_2_3(upstream_dir) -> str:
    binary = upstream_dir / "containerd" / "bin" / "containerd"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: see {upstream_dir}/containerd/BUILD.md", pytrace=False)
    return str(binary)


@pytest.mark.parametrize("containerd", ["real 2.3.4", "1.7 stand-in"])
def test_an_agent_whose_config_makes_nvidia_the_default_is_healthy_whatever_the_quotes(
    containerd, containerd_2_3, tmp_path
):
    binary = containerd_2_3 if containerd == "real 2.3.4" else containerd
    run, said = _health(tmp_path, binary, installer=True, set_as_default=True, default="nvidia")
    assert run.returncode == 0, said[-3000:]
    assert "healthy=True" in said


def test_an_agent_whose_config_keeps_runc_the_default_fails_naming_it(containerd_2_3, tmp_path):
    """The mutation the check is there for: nvidia asked to be the default, the generated config keeps runc."""
    run, said = _health(tmp_path, containerd_2_3, installer=True, set_as_default=True, default="runc")
    assert run.returncode != 0, said[-3000:]
    assert (
        f"the config the agent generated ({tmp_path / 'config.toml'}) does not make nvidia the default runtime"
        " (default_runtime_name = 'runc')" in said
    ), said[-3000:]


@pytest.mark.parametrize("registered", ["nvidia", "gpu"])
def test_containerd_2_3s_effective_config_has_the_runtime_or_the_check_fails(containerd_2_3, tmp_path, registered):
    run, said = _health(tmp_path, containerd_2_3, False, set_as_default=False, default="runc", name=registered)
    if registered == "nvidia":
        assert run.returncode == 0 and "healthy=True" in said, said[-3000:]
    else:
        assert run.returncode != 0, said[-3000:]
        assert "containerd's effective config has no runtimes.nvidia table" in said, said[-3000:]
