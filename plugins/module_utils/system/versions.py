# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Version strings compared as numbers: the one ``version_tuple`` (issue 51).

Stdlib only, Python 3.8+: node-side modules (the doctor, the facts) and controller-side plugins import it by its
package path.
"""

from __future__ import annotations

import re

_LEADING = re.compile(r"v?(\d+(?:\.\d+)*)")


def version_tuple(version) -> tuple | None:
    """The leading numbers of a version (``v1.31.2-rc.1`` -> (1, 31, 2), ``580.95.05`` -> (580, 95, 5)); None
    where it starts with none (``""``, None, ``unknown``)."""
    match = _LEADING.match(str(version or "").strip())
    return tuple(int(part) for part in match.group(1).split(".")) if match else None
