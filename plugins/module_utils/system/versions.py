# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Version strings: the one ``version_tuple`` (compared as numbers) and ``parse_version_token`` (issue 51).

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


def parse_version_token(token: str) -> tuple:
    """Split a version token as a tool prints it ("v1.31.2", "20.10.24+dfsg1,", "1.6.20~ds1") into (numeric, as
    printed); (None, None) when it is no version."""
    token = token.strip().rstrip(",;")
    match = re.fullmatch(r"v?(\d+\.\d+(?:\.\d+)*)(\S*)", token)
    if not match:
        return None, None
    return match.group(1), token[1:] if token.startswith("v") else token
