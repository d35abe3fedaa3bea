# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation shared by the modules of library/ that only read the node."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: Reads only, so it reports the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
  platform:
    description: The target operating systems it runs on.
    support: full
    platforms: posix
"""
