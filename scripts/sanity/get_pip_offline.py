"""Offline stand-in for get-pip.py in ansible-test's sanity virtual environments (tooling, not a test double).

What it replaces: ansible-test creates each sanity test's virtual environment without pip
(ansible_test/_internal/venv.py:170, ``--without-pip``) and bootstraps pip at the version it pins
(ansible_test/_internal/python_requirements.py:436, ``pip='24.2'`` in ansible-core 2.19.14) with a get-pip script that
it downloads from ci-files.testing.ansible.com (ansible_test/_util/target/setup/requirements.py:74), unless
~/.ansible/test/cache/get_pip_<version>.py exists (requirements.py:75-78). No option or environment variable points
elsewhere, so scripts/sanity.sh copies this file to that path in ansible-test's own HOME.

ansible-test runs it (quiet_pip.py, as __main__) with the new environment's interpreter and get-pip's arguments, e.g.
``--disable-pip-version-check pip==24.2 --no-setuptools --no-wheel``. It installs the pip wheel that Python bundles
(ensurepip: no network), then ``pip install`` of the requested version from the configured index: PyPI, or the
wheelhouse that sanity.sh names in $HOME/.config/pip/pip.conf (ansible-test passes no PIP_* variable to pip:
ansible_test/_internal/util.py, common_environment()).
"""

import ensurepip
import os
import subprocess
import sys


def main() -> int:
    # ensurepip deletes every PIP_* variable from os.environ: keep them for the install of the requested version
    env = dict(os.environ)
    args = sys.argv[1:]
    no_setuptools = "--no-setuptools" in args
    packages = [a for a in args if a not in ("--no-setuptools", "--no-wheel")]

    ensurepip.bootstrap()  # the bundled pip (and, up to Python 3.11, setuptools) into sys.prefix, offline

    rc = subprocess.call([sys.executable, "-m", "pip", "install", *packages], env=env)
    if rc:
        return rc
    if no_setuptools:
        # as get-pip.py --no-setuptools would leave it: ensurepip of Python <= 3.11 installs setuptools too
        subprocess.call(
            [sys.executable, "-m", "pip", "uninstall", "-q", "-y", "--disable-pip-version-check", "setuptools"],
            env=env,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
