"""The CDI read of roles/nvidia_container_toolkit (vars/main.yml, run by tasks/read.yml's role_read and by
tasks/cdi.yml): the node read that decides whether the CDI spec, the refresh drop-in or the refresh units need a change
(the changing tasks, tasks/cdi_apply.yml, are included only then). The read's script runs here against files in a
temporary directory, with TEST STAND-IN nvidia-ctk and systemctl scripts on PATH (the real ones need a GPU driver and a
running systemd)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from conftest import render_role_value

from tests.stdin_feed import fed_run

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "nvidia_container_toolkit"
SPEC = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n"
DROPIN = "[Service]\nEnvironment=NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/etc/cdi/nvidia.yaml\n"
UNITS = ["nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service"]

# TEST STAND-IN nvidia-ctk: `cdi generate --output=F` writes SPEC to F.
CTK = """#!/bin/bash
set -euo pipefail
out=${3#--output=}
printf '%s' "$CTK_SPEC" >"$out"
"""
# TEST STAND-IN systemctl: list-unit-files prints $SHIPPED (rc 1 when empty, as systemctl does when none exists);
# is-enabled / is-active succeed for the units in $ENABLED / $ACTIVE.
SYSTEMCTL = """#!/bin/bash
case $1 in
  list-unit-files) [ -n "$SHIPPED" ] || exit 1; for u in $SHIPPED; do echo "$u enabled enabled"; done;;
  is-enabled) [[ " $ENABLED " == *" $3 "* ]];;
  is-active) [[ " $ACTIVE " == *" $3 "* ]];;
  *) exit 2;;
esac
"""


def _script(**variables) -> str:
    """The read's script as Ansible renders it for these values."""
    read = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__nvidia_container_toolkit_cdi_read"]
    assert read["module"] == "ansible.legacy.command" and read["args"]["argv"][:2] == ["/bin/bash", "-c"]
    return render_role_value(
        read["args"]["argv"][2], {"__nvidia_container_toolkit_cdi_refresh_units": UNITS, **variables}
    )


@pytest.fixture
def node(tmp_path):
    """Paths of a node in tmp_path, and a runner of the read: (scratch, differs, units) of its output, or None."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("nvidia-ctk", CTK), ("systemctl", SYSTEMCTL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "tmp").mkdir()
    spec = tmp_path / "cdi" / "nvidia.yaml"
    dropin = tmp_path / "nvidia-cdi-refresh.service.d" / "50-gpu-node-output.conf"

    def run(driver_loaded=True, refresh=True, dropin_wanted=True, shipped=UNITS, enabled=UNITS, active=UNITS,
            ctk=str(bin_dir / "nvidia-ctk")):  # fmt: skip
        script = _script(
            __nvidia_container_toolkit_ctk=ctk,
            __nvidia_container_toolkit_driver_loaded=driver_loaded,
            __nvidia_container_toolkit_cdi_file=spec.name,
            nvidia_container_toolkit_cdi_spec_path=str(spec),
            nvidia_container_toolkit_cdi_refresh=refresh,
            __nvidia_container_toolkit_cdi_refresh_dropin=str(dropin),
            __nvidia_container_toolkit_cdi_refresh_dropin_wanted=dropin_wanted,
        )
        env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "TMPDIR": str(tmp_path / "tmp"),
            "CTK_SPEC": SPEC,
            "SHIPPED": " ".join(shipped),
            "ENABLED": " ".join(enabled),
            "ACTIVE": " ".join(active),
        }
        done = fed_run(["/bin/bash", "-c", script], DROPIN.encode(), env=env)
        assert done.returncode == 0, done.stderr
        assert done.unread == 0, "the read must take all of its stdin, on every path (EPIPE otherwise)"
        lines = done.stdout.splitlines()
        if not lines:
            return None
        return lines[0], lines[1], lines[2:]

    def put(path: Path, text: str, mode: int = 0o644) -> None:
        path.parent.mkdir(mode=0o755, exist_ok=True)
        path.parent.chmod(0o755)
        path.write_text(text)
        path.chmod(mode)

    run.spec, run.dropin, run.put, run.scratch_dirs = spec, dropin, put, lambda: list((tmp_path / "tmp").iterdir())
    return run


# The read wants the files root:root, as the role writes them: these tests run as root, as the project's tests do.


def test_a_node_where_all_is_in_place_is_settled_and_keeps_no_scratch_directory(node):
    node.put(node.spec, SPEC)
    node.put(node.dropin, DROPIN)
    scratch, differs, units = node()
    assert (differs, units) == ("settled", UNITS)
    assert node.scratch_dirs() == [] and not Path(scratch).exists()


def test_a_new_spec_is_kept_in_the_scratch_directory_for_the_copy(node):
    node.put(node.dropin, DROPIN)
    scratch, differs, _ = node()
    assert differs == "spec"
    assert node.scratch_dirs() == [Path(scratch)] and (Path(scratch) / node.spec.name).read_text() == SPEC


@pytest.mark.parametrize(
    ("spec", "mode", "dir_mode"),
    [(SPEC.replace("0.5.0", "0.6.0"), 0o644, 0o755), (SPEC, 0o600, 0o755), (SPEC, 0o644, 0o700)],
    ids=["content", "file mode", "directory mode"],
)
def test_a_spec_that_differs_from_the_generated_one_is_to_be_copied(node, spec, mode, dir_mode):
    node.put(node.spec, spec, mode)
    node.spec.parent.chmod(dir_mode)
    node.put(node.dropin, DROPIN)
    assert node()[1] == "spec"


def test_where_the_driver_is_not_loaded_no_spec_is_generated_and_the_refresh_is_still_read(node):
    node.put(node.dropin, DROPIN)
    assert node(driver_loaded=False) == ("-", "settled", UNITS)
    assert node(driver_loaded=False, enabled=UNITS[:1]) == ("-", "nvidia-cdi-refresh.service", UNITS)
    assert node(driver_loaded=False, active=[]) == ("-", "nvidia-cdi-refresh.path", UNITS)
    assert node.scratch_dirs() == []


@pytest.mark.parametrize(
    ("present", "wanted", "differs"),
    [(DROPIN, True, "settled"), (DROPIN.rstrip("\n"), True, "drop-in"), (None, True, "drop-in"),
     (DROPIN, False, "drop-in"), (None, False, "settled")],
    ids=["in place", "last newline missing", "missing", "unwanted", "absent as wanted"],
)  # fmt: skip
def test_the_refresh_dropin_is_compared_with_what_the_role_writes(node, present, wanted, differs):
    if present is not None:
        node.put(node.dropin, present)
    assert node(driver_loaded=False, dropin_wanted=wanted)[1] == differs


def test_without_the_refresh_units_or_the_refresh_nothing_about_them_differs(node):
    node.put(node.spec, SPEC)
    # toolkit 1.17: no units, so no drop-in to write either
    assert node(shipped=[], enabled=[], active=[])[1:] == ("settled", [])
    # nvidia_container_toolkit_cdi_refresh false: the units are listed (for the report), not enabled
    assert node(refresh=False, enabled=[], active=[])[1:] == ("settled", UNITS)


def test_without_nvidia_ctk_nothing_is_read(node):
    # check mode before the packages are installed
    assert node(ctk="/nonexistent/nvidia-ctk") is None
