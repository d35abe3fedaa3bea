"""molecule/nvidia_driver/conftest-cache.sh, the TEST HARNESS result cache of NVIDIA's conftest probes: a probe of
the same source, arguments and included files under another PID is answered from the cache (its .o, stderr and exit
status as the compiler gave them), whatever PIDs its name and its CFLAGS carry; a change of any of them, or a call
that is no probe, goes to the compiler."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "molecule" / "nvidia_driver" / "conftest-cache.sh"

# TEST STAND-IN compiler: logs each call; compiles (writes <stem>.o) unless the source says FAIL
COMPILER = """#!/bin/sh
echo "$*" >> "$CALLS"
[ "$1" = --version ] && { echo "gcc (Debian 12.2.0-14) 12.2.0"; exit 0; }
for arg; do case $arg in conftest*.c) src=$arg ;; esac; done
if grep -q FAIL "$src"; then echo "error: no such member" >&2; exit 1; fi
echo "object of $src" > "${src%.c}.o"
"""


@pytest.fixture
def probe(tmp_path):
    compiler = tmp_path / "cc"
    compiler.write_text(COMPILER)
    compiler.chmod(0o755)
    build = tmp_path / "build"
    (build / "conftest").mkdir(parents=True)
    (build / "conftest" / "headers.h").write_text("#define NV_LINUX_KCONFIG_H_PRESENT\n")
    (build / "autoconf.h").write_text("#define CONFIG_X86_64 1\n")
    calls = tmp_path / "calls"
    env = dict(os.environ, CALLS=str(calls), GPUNODE_CONFTEST_CACHE=str(tmp_path / "cache"))

    def run(pid: int, code: str, *extra: str):
        source = build / f"conftest{pid}.c"
        source.write_text(f'#include "conftest/headers.h"\n{code}\n')
        # the CFLAGS carry the PID of the shell that printed them (conftest.sh's build_cflags), another than the file's
        cflags = [f'-DKBUILD_BASENAME="#conftest{pid * 3}"']
        args = ["-O2", "-include", "autoconf.h", *cflags, *extra, "-c", source.name]
        calls.write_text("")
        result = subprocess.run(
            ["sh", str(SCRIPT), str(compiler), *args], cwd=build, env=env, capture_output=True, text=True
        )
        compiled = [line for line in calls.read_text().splitlines() if line != "--version"]
        made = build / f"conftest{pid}.o"
        obj = made.read_text() if made.exists() else None
        made.unlink(missing_ok=True)
        source.unlink()
        return result.returncode, result.stderr, obj, compiled

    run.build = build
    return run


def test_a_probe_under_another_pid_is_answered_from_the_cache(probe):
    rc, err, obj, compiled = probe(101, "int f(void) { return 0; }")
    assert (rc, err, obj) == (0, "", "object of conftest101.c\n") and len(compiled) == 1
    rc, err, obj, compiled = probe(202, "int f(void) { return 0; }")
    # the .o the compiler made under the first PID, put where conftest.sh looks for this one's
    assert (rc, err, obj, compiled) == (0, "", "object of conftest101.c\n", [])


def test_a_failed_probe_is_answered_failed_with_its_stderr_and_no_object(probe):
    first = probe(101, "FAIL")
    assert first[:3] == (1, "error: no such member\n", None) and len(first[3]) == 1
    assert probe(202, "FAIL") == (1, "error: no such member\n", None, [])


@pytest.mark.parametrize(
    "change",
    ["source", "arguments", "included file", "header answers"],
)
def test_a_change_of_what_the_probe_reads_goes_to_the_compiler(probe, change):
    code, extra = "int f(void) { return 0; }", []
    assert len(probe(101, code)[3]) == 1
    if change == "source":
        code = "int g(void) { return 0; }"
    elif change == "arguments":
        extra = ["-DNV_BUILD_MODULE_INSTANCES=0"]
    elif change == "included file":
        (probe.build / "autoconf.h").write_text("#define CONFIG_X86_64 1\n#define CONFIG_XEN 1\n")
    else:
        (probe.build / "conftest" / "headers.h").write_text("#undef NV_LINUX_KCONFIG_H_PRESENT\n")
    assert len(probe(202, code, *extra)[3]) == 1


@pytest.mark.parametrize("extra", [["-E"], ["-o", "conftest.i"], ["-Wp,-MMD,conftest.d"]])
def test_a_call_that_is_no_plain_probe_compile_always_goes_to_the_compiler(probe, extra):
    assert len(probe(101, "int f(void) { return 0; }", *extra)[3]) == 1
    assert len(probe(202, "int f(void) { return 0; }", *extra)[3]) == 1
