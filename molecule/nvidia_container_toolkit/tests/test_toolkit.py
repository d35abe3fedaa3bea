"""Verify the nvidia_container_toolkit role on every node: repository trust, pinned packages, config.toml.

The packages are TEST STAND-INS from a local repository (tests/fixtures/nvidia-container-toolkit-standin).
side_effect.yml ran after converge: it tried bad repositories, then moved the pin from 1.17.8-1 to 1.18.0-1.
"""

from __future__ import annotations

import json
import tomllib

import pytest

PACKAGES = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]
KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
SOURCE = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
CONFIG = "/etc/nvidia-container-runtime/config.toml"
REPO_DIR = "/srv/nvidia-container-toolkit-standin"


def primary_fingerprints(host, path: str) -> list[str]:
    listing = host.check_output(
        f"home=$(mktemp -d) && gpg --homedir $home --batch --show-keys --with-colons {path}; rm -rf $home"
    )
    fingerprints, previous = [], ""
    for line in listing.splitlines():
        fields = line.split(":")
        if fields[0] == "fpr" and previous == "pub":
            fingerprints.append(fields[9])
        previous = fields[0]
    return fingerprints


@pytest.fixture(scope="module")
def good_fingerprint(host):
    return host.file(f"{REPO_DIR}/fingerprint").content_string.strip()


@pytest.fixture(scope="module")
def rogue_fingerprint(host):
    return host.file(f"{REPO_DIR}/rogue-fingerprint").content_string.strip()


def refusal(host, case: str) -> dict:
    return json.loads(host.file(f"/var/tmp/tk-refusal-{case}.json").content_string)


def dpkg_state(text: str) -> dict:
    """{package: (version, status)} from `dpkg-query --showformat='${Package} ${Version} ${Status}\\n'` output."""
    state = {}
    for line in text.splitlines():
        name, version, status = line.split(" ", 2)
        state[name] = (version, status)
    return state


# --------------------------------------------------------------------------- repository trust


def test_keyring_holds_exactly_the_expected_key(host, good_fingerprint):
    keyring = host.file(KEYRING)
    assert keyring.is_file
    assert keyring.user == "root"
    assert keyring.mode == 0o644
    assert primary_fingerprints(host, KEYRING) == [good_fingerprint]
    # dearmored: a binary keyring, not ASCII armor
    assert not keyring.content.startswith(b"-----BEGIN PGP")


def test_apt_source_is_signed_by_that_keyring_only(host):
    source = host.file(SOURCE)
    assert source.mode == 0o644
    lines = [line for line in source.content_string.splitlines() if line and not line.startswith("#")]
    assert lines == [f"deb [signed-by={KEYRING}] http://127.0.0.1:8765/stable/deb/$(ARCH) /"]
    assert source.content_string.startswith("#")  # the ansible_managed header


def test_the_key_is_not_trusted_globally(host, good_fingerprint):
    # no apt-key: the key must not be in apt's global trust stores
    globally = host.run("ls /etc/apt/trusted.gpg /etc/apt/trusted.gpg.d/* 2>/dev/null").stdout.split()
    for path in globally:
        assert good_fingerprint not in primary_fingerprints(host, path), path


def test_apt_takes_the_toolkit_from_the_signed_repository(host):
    policy = host.check_output("apt-cache policy nvidia-container-toolkit")
    assert "http://127.0.0.1:8765/stable/deb/amd64  Packages" in policy
    assert "1.17.8-1" in policy
    assert "1.18.0-1" in policy


def test_a_key_with_another_fingerprint_is_refused(host, good_fingerprint, rogue_fingerprint):
    result = refusal(host, "wrong-key")
    assert result["failed"] is True
    assert result["task"] == "Refuse a key whose fingerprint is not the expected one"
    assert result["msg"].startswith(
        f"The key at http://127.0.0.1:8765/rogue-gpgkey has the fingerprint {rogue_fingerprint}, "
        f"but nvidia_container_toolkit_repo_key_fingerprint expects {good_fingerprint}."
    )
    assert "Nothing was written" in result["msg"]


def test_a_repository_signed_by_another_key_is_refused(host, good_fingerprint, rogue_fingerprint):
    result = refusal(host, "rogue-signed")
    assert result["failed"] is True
    assert result["msg"].startswith(
        "apt refused the repository http://127.0.0.1:8765/rogue/deb/$(ARCH) when trusting only the checked key "
        f"{good_fingerprint}:"
    )
    # gpgv names the signer's long key id (NO_PUBKEY), sqv its fingerprint
    assert rogue_fingerprint[-16:] in result["msg"]
    assert "is not signed" in result["msg"]
    assert "Nothing was written" in result["msg"]


def test_an_unsigned_repository_is_refused(host):
    result = refusal(host, "unsigned")
    assert result["failed"] is True
    assert "apt refused the repository http://127.0.0.1:8765/unsigned/deb/$(ARCH)" in result["msg"]
    assert "E: The repository 'http://127.0.0.1:8765/unsigned/deb/amd64  Release' is not signed." in result["msg"]


def test_refused_repositories_changed_nothing_and_left_no_scratch_files(host):
    before = host.file("/var/tmp/tk-trust-before.txt").content_string
    after = host.file("/var/tmp/tk-trust-after.txt").content_string
    assert before == after
    assert KEYRING in before
    assert SOURCE in before
    leftovers = host.run("ls -d /tmp/*.nvidia-container-toolkit /tmp/*.nvidia-cdi 2>/dev/null").stdout.split()
    assert leftovers == []
    # the apt source still points at the good repository
    assert "/stable/deb/" in host.file(SOURCE).content_string


# --------------------------------------------------------------------------- packages


def test_the_first_pin_installed_and_held_all_four_packages(host):
    before = dpkg_state(host.file("/var/tmp/tk-before-pin-change.txt").content_string)
    assert before == {name: ("1.17.8-1", "hold ok installed") for name in PACKAGES}


def test_held_packages_are_kept_back_by_upgrades(host):
    simulation = host.file("/var/tmp/tk-upgrade-simulation.txt").content_string
    # 1.18.0-1 was available while 1.17.8-1 was installed and held
    for name in PACKAGES:
        assert f"Inst {name} " not in simulation, simulation
        assert name in simulation, f"{name} is not reported as kept back:\n{simulation}"


def test_changing_the_pin_moved_all_four_packages_and_kept_them_held(host):
    fmt = "${Package} ${Version} ${Status}\\n"
    now = dpkg_state(host.check_output(f"dpkg-query --show --showformat='{fmt}' {' '.join(PACKAGES)}"))
    assert now == {name: ("1.18.0-1", "hold ok installed") for name in PACKAGES}
    holds = [name for name in host.check_output("apt-mark showhold").split() if name != "nvidia-mig-manager"]
    assert sorted(holds) == sorted(PACKAGES)  # tk-debian13 also holds the MIG manager (role nvidia_mig)
    # the stand-in packages carry NVIDIA's real binaries (toolkit 1.20.0, GPUNODE_UPSTREAM_DIR), whatever the version
    assert host.check_output("nvidia-ctk --version").splitlines()[0] == "NVIDIA Container Toolkit CLI version 1.20.0"


def test_the_installed_packages_are_the_test_stand_ins(host):
    # guard: this scenario must never pass because something from NVIDIA's repository got installed
    for name in PACKAGES:
        assert host.file(f"/usr/share/doc/{name}/STAND-IN").exists, name


def test_the_stand_in_packages_carry_nvidias_real_binaries(host):
    """NVIDIA's own runtime, hook and CDI hook (toolkit 1.20.0 from GPUNODE_UPSTREAM_DIR), not scripts."""
    for binary in ("nvidia-container-runtime", "nvidia-container-runtime-hook", "nvidia-cdi-hook"):
        head = host.check_output(f"head -c 4 /usr/bin/{binary} | od -An -c").split()
        assert head[1:4] == ["E", "L", "F"], (binary, head)
    version = host.check_output("nvidia-container-runtime --version")
    assert "NVIDIA Container Runtime version 1.20.0" in version, version


# --------------------------------------------------------------------------- config.toml


def test_config_toml_has_the_hardening_keys_and_keeps_unmanaged_settings(host):
    config = host.file(CONFIG)
    assert config.mode == 0o644
    text = config.content_string
    value = tomllib.loads(text)
    assert value["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False
    assert value["accept-nvidia-visible-devices-as-volume-mounts"] is False
    # written by prepare, not managed by the role: kept through the role and two package installs
    assert value["nvidia-container-runtime"]["log-level"] == "debug"
    assert value["nvidia-container-runtime"]["runtimes"] == ["runc"]
    assert value["nvidia-container-runtime"]["debug"] == "/var/log/nvidia-container-runtime.log"
    assert "# raised by the operator for debugging; must be kept" in text
    assert text.startswith("# pre-existing config (molecule prepare)")


def test_config_toml_was_backed_up_before_the_change_into_the_backup_tree(host):
    assert host.run(f"ls {CONFIG}.*~").rc != 0, "no backup beside the file"
    backups = host.run(f"ls /var/backups/gpu-node-provisioning{CONFIG}.*~").stdout.split()
    assert len(backups) == 1, backups  # one change: converge; the idempotence and pin-change runs wrote nothing
    assert host.file(backups[0]).mode == host.file(CONFIG).mode
    original = tomllib.loads(host.file(backups[0]).content_string)
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged" not in original
    assert original["nvidia-container-runtime"]["log-level"] == "debug"
