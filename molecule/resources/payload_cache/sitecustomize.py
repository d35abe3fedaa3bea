"""TEST HARNESS: molecule's ansible runs in the test command share their module payloads (gpunode_payload_cache);
tests/molecule/test_scenarios.py puts this directory on PYTHONPATH."""

import gpunode_payload_cache  # noqa: F401 (wraps ansible-core's payload build where GPUNODE_PAYLOAD_CACHE is set)
