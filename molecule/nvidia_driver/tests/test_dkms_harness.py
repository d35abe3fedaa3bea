"""The TEST HARNESS of the two real DKMS builds (molecule/nvidia_driver/dkms-modules.sh) took effect: DKMS built
and installed nvidia and nvidia-peermem only, from the package's own dkms.conf kept beside the harness's. Should apt
ever unpack and configure in one dpkg run, the builds would be whole again: this fails, and says where the test
time went."""

from __future__ import annotations

import re

testinfra_hosts = ["ansible://drv-debian12", "ansible://drv-ubuntu2604"]


def test_dkms_built_the_two_modules_the_tests_read_and_no_other(host):
    confs = host.check_output("ls -d /usr/src/nvidia*/dkms.conf").split()
    assert len(confs) == 1, confs
    conf = confs[0]
    assert host.file(conf).content_string.startswith("# TEST HARNESS"), conf
    assert host.file(f"{conf}.packaged").exists, f"{conf}.packaged"
    built = host.check_output("find /lib/modules/*/updates -name 'nvidia*.ko*' -printf '%f\\n' | sort -u").split()
    names = sorted({re.sub(r"\.ko(\.[a-z]+)?$", "", name) for name in built})
    assert names in (["nvidia", "nvidia-peermem"], ["nvidia-current", "nvidia-current-peermem"]), built
