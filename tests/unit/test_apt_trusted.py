"""The node reads that let a re-run skip an apt repository's key chain: gpu_node_facts' apt_trusted
(roles/gpu_node_facts/vars/main.yml), run by the toolkit's apt read (roles/nvidia_container_toolkit/vars/main.yml)
and by the driver's read of NVIDIA's CUDA repository (roles/nvidia_driver/tasks/repository_debian.yml).

Each role's script is rendered as the role renders it and run with real OpenPGP keys on real files: "trusted" only for
the pinned, valid key with both files root:root 0644 and the source byte for byte what the role writes; and every
path reads all of its stdin (the source it would write: issue 52)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

from tests.stdin_feed import fed_run

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
SHARED = yaml.safe_load((ROLES / "gpu_node_facts" / "vars" / "main.yml").read_text())


def _render(template: str, **variables) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["quote"] = lambda value: shlex.quote(str(value))
    return env.from_string(template).render(
        __gpu_node_facts_apt_trusted_function=SHARED["__gpu_node_facts_apt_trusted_function"], **variables
    )


def toolkit_read(keyring: Path, source: Path, fingerprint: str) -> str:
    """The toolkit's apt read (its first output line says whether the repository chain is skipped)."""
    read = yaml.safe_load((ROLES / "nvidia_container_toolkit" / "vars" / "main.yml").read_text())
    read = read["__nvidia_container_toolkit_apt_read"]
    assert read["module"] == "ansible.legacy.command" and read["args"]["argv"][:2] == ["/bin/bash", "-c"]
    return _render(
        read["args"]["argv"][2],
        __gpu_node_facts_toolkit_keyring=str(keyring),
        __gpu_node_facts_toolkit_apt_source=str(source),
        __nvidia_container_toolkit_fingerprint=fingerprint,
        __nvidia_container_toolkit_packages=["gpunode-test-no-such-package"],
    )


def driver_read(keyring: Path, source: Path, fingerprint: str) -> str:
    """The driver's read of NVIDIA's CUDA repository, before the include of its key chain."""
    tasks = yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "repository_debian.yml").read_text())
    (read,) = [task for task in tasks if task.get("register") == "__nvidia_driver_cuda_trust"]
    (include,) = [task for task in tasks if task.get("ansible.builtin.include_tasks") == "repository_debian_cuda.yml"]
    assert "not __nvidia_driver_cuda_trusted" in include["when"]
    shell = read["ansible.builtin.shell"]
    assert shell["executable"] == "/bin/bash" and shell["stdin"] == "{{ __nvidia_driver_cuda_source_content }}"
    plan = {"cuda_keyring_path": str(keyring), "cuda_source_file": str(source), "cuda_fingerprint": fingerprint}
    return _render(shell["cmd"], __nvidia_driver_plan=plan)


READS = {"toolkit": toolkit_read, "driver": driver_read}


def _gpg(home: Path, *args: str) -> str:
    return subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """A valid key and a key that expired (made with a faked clock), exported as binary keyrings."""
    made = {}
    for name, extra in (("valid", []), ("expired", ["--faked-system-time", "20240101T000000"])):
        home = tmp_path_factory.mktemp(f"gpg-{name}")
        home.chmod(0o700)
        _gpg(
            home,
            *extra,
            "--passphrase",
            "",
            "--quick-gen-key",
            f"{name} <{name}@example.invalid>",
            "rsa2048",
            "sign",
            "1d",
        )
        keyring = home / "key.gpg"
        keyring.write_bytes(
            subprocess.run(["gpg", "--homedir", str(home), "--export"], check=True, capture_output=True).stdout
        )
        fingerprint = next(
            line.split(":")[9]
            for line in _gpg(home, "--with-colons", "--show-keys", str(keyring)).splitlines()
            if line.startswith("fpr:")
        )
        made[name] = (keyring.read_bytes(), fingerprint)
    return made


@pytest.mark.parametrize("role", sorted(READS))
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("as written", "trusted"),
        ("keyring mode 0600", "untrusted"),
        ("source owned by nobody", "untrusted"),
        ("source differs", "untrusted"),
        ("keyring missing", "untrusted"),
        ("expired key", "untrusted"),
        ("another key", "untrusted"),
    ],
)
def test_the_key_chain_is_skipped_only_for_the_pinned_valid_key_and_the_files_as_written(
    tmp_path, keys, role, case, expected
):
    source_text = "# Ansible managed\ndeb [signed-by=/k.gpg] https://example.invalid/stable/deb/$(ARCH) /\n"
    key, fingerprint = keys["expired" if case == "expired key" else "valid"]
    if case == "another key":
        fingerprint = keys["expired"][1]
    keyring, source = tmp_path / "key.gpg", tmp_path / "src.list"
    keyring.write_bytes(key)
    source.write_text(source_text + ("# edited\n" if case == "source differs" else ""))
    for path in (keyring, source):
        path.chmod(0o644)
    if case == "keyring mode 0600":
        keyring.chmod(0o600)
    if case == "source owned by nobody":
        os.chown(source, 65534, 0)
    if case == "keyring missing":
        keyring.unlink()
    script = READS[role](keyring, source, fingerprint.upper())
    result = fed_run(["/bin/bash", "-c", script], source_text.encode())
    assert result.returncode == 0, result.stderr
    assert result.unread == 0, (case, "the read must take all of its stdin, on every path (EPIPE otherwise)")
    assert result.stdout.splitlines()[0] == expected, (case, result.stdout, result.stderr)


def test_the_driver_compares_the_source_its_key_chain_writes():
    """The read's stdin and the chain's copy task are the one variable, so a trusted source is what the chain wrote."""
    chain = yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "repository_debian_cuda.yml").read_text())
    tasks = [task for block in chain for task in [block, *block.get("block", []), *block.get("always", [])]]
    (write,) = [task for task in tasks if task.get("register") == "__nvidia_driver_cuda_source"]
    assert write["ansible.builtin.copy"]["content"] == "{{ __nvidia_driver_cuda_source_content }}"
