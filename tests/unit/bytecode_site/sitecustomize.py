"""TEST HARNESS: the playbooks the unit tests run against this machine run their modules with the compile cache of
molecule's nodes (molecule/resources/bytecode_cache) and share their module payloads (molecule/resources/payload_cache);
tests/unit/conftest.py puts this directory and both of those on PYTHONPATH."""

import gpunode_bytecode_cache  # noqa: F401 (replaces zipimport's compile for Ansible's module payloads)
import gpunode_payload_cache  # noqa: F401 (ansible-playbook: each module's payload built once for the session)
