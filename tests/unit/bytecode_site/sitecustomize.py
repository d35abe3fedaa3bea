"""TEST HARNESS: the playbooks the unit tests run against this machine run their modules with the compile cache of
molecule's nodes (molecule/resources/bytecode_cache); tests/unit/conftest.py puts this directory on PYTHONPATH."""

import gpunode_bytecode_cache  # noqa: F401 (replaces zipimport's compile for Ansible's module payloads)
