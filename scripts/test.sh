#!/usr/bin/env bash
# Runs every test: lint, unit tests, the demo (scripts/demo.sh in a fresh clone)
# and every molecule scenario, in that order.
# Sets up what it needs on a fresh Debian/Ubuntu machine (as root): a Python
# venv from requirements-test.txt, a Docker engine; the node images are built
# by the tests that need them. First of all
# it needs the upstream builds in GPUNODE_UPSTREAM_DIR (default ../shared/upstream),
# or builds them (scripts/build-upstream.sh), or stops naming what is missing.
#   bash scripts/test.sh                 # everything
#   bash scripts/test.sh -k unit         # extra arguments go to pytest
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

t0=$(date +%s)
# first, before anything else: the upstream builds the molecule scenarios run (GPUNODE_UPSTREAM_DIR, see lib.sh);
# lint, the unit tests and the demo alone need none
case " $* " in
  *" -k unit "* | *" -k lint "* | *" -k demo "* | *" -m "*"not molecule"*) resolve_upstream_dir ;;
  *) ensure_upstream ;;
esac
ensure_venv
ensure_docker
echo "timing: setup's venv and engine $(( $(date +%s) - t0 ))s"
# The node images are built by the tests that run nodes, when they run (ensure_images, one build of an image at a
# time): each molecule scenario its own (tests/molecule/test_scenarios.py), the demo its own, the unit test on Debian
# 11's Python its own. On a new machine the builds (about 4 to 11 minutes) overlap lint and the unit tests on the other
# workers instead of holding every worker back. Here only what the builds need (debootstrap, Ubuntu's archive key).
ensure_image_tools ubuntu
ensure_inotify
# molecule/fleet renders the fleet report in headless Chromium: only when the molecule tests run.
# molecule/arm64's node runs under qemu-user (Grace nodes are aarch64), registered here where the kernel lets
# scripts/lib.sh; where it cannot, the scenario is skipped saying why (GPUNODE_ARM64_UNAVAILABLE,
# tests/molecule/test_scenarios.py, which builds its image when it runs: about 12 minutes on a new machine).
# GPUNODE_TEST_ARM64=0 leaves it out; =1 makes it require NVIDIA's toolkit built for arm64 (lib.sh, upstream_needed).
case " $* " in
  *" -k unit "* | *" -k lint "* | *" -m "*"not molecule"*) ;;
  *)
    ensure_chromium
    if [ "${GPUNODE_TEST_ARM64:-}" = 0 ]; then
      export GPUNODE_ARM64_UNAVAILABLE="left out with GPUNODE_TEST_ARM64=0"
    elif ! { why=$(ensure_arm64_emulation 2>&1 1>&3); } 3>&1; then
      [ "${GPUNODE_TEST_ARM64:-}" != 1 ] || die "GPUNODE_TEST_ARM64=1 asks for molecule/arm64, and there is no arm64 emulation: $why"
      echo "WARNING: no arm64 emulation, so molecule/arm64 is skipped: $why" >&2
      export GPUNODE_ARM64_UNAVAILABLE="$why"
    fi
    ;;
esac
echo "timing: setup $(( $(date +%s) - t0 ))s"

export PATH="$VENV/bin:$PATH"
# Python may write bytecode: an environment with PYTHONDONTWRITEBYTECODE=1 (this project's CI machines set it) makes
# every ansible-playbook, each of its forked workers and every pytest worker compile the collection's plugins and the
# tests from source again (collecting the tests: 16 CPU s a worker with it, 8 without)
unset PYTHONDONTWRITEBYTECODE
# Three pytest-xdist workers (tests/lanes.py, tests/conftest.py): the scenarios with a
# forky node one after another on the first; lint and the unit tests, then the demo and
# the other scenarios, the longest first, on whichever worker is idle.
# GPUNODE_TEST_WORKERS=0 runs everything in one process, in order.
workers=${GPUNODE_TEST_WORKERS:-3}
if [ "$workers" = 0 ]; then
  exec pytest tests/test_lint.py tests/unit tests/demo tests/molecule "$@"
fi
exec pytest -n "$workers" --dist loadgroup tests/test_lint.py tests/unit tests/demo tests/molecule "$@"
