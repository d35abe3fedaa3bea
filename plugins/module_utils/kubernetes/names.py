"""Syntax checks for the Kubernetes names a node's kubelet is configured with.

Pure functions, standard library only and no Ansible imports: modules on the
node use them through ``from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes.names import ...``
and controller-side plugins import it by the same package path.

Each ``*_error`` function returns ``None`` for a valid value, or one sentence
that says what is wrong and what a valid value looks like. The rules are the
API server's (``k8s.io/apimachinery/pkg/util/validation``) and, for node
labels, the kubelet's own start-up check of ``--node-labels``.
"""

from __future__ import annotations

import re

__all__ = [
    "KUBELET_ALLOWED_LABELS",
    "KUBELET_ALLOWED_LABEL_NAMESPACES",
    "TAINT_EFFECTS",
    "kubelet_label_error",
    "label_value_error",
    "parse_taint",
    "qualified_name_error",
    "render_taint",
]

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*\Z")
_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")

NAME_MAX = 63
PREFIX_MAX = 253
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# Labels in the kubernetes.io and k8s.io namespaces that a kubelet may set on
# itself with --node-labels (k8s.io/kubelet/pkg/apis/well_known_labels.go);
# any other key in those namespaces makes the kubelet refuse to start.
KUBELET_ALLOWED_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
KUBELET_ALLOWED_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
_RESTRICTED_NAMESPACES = ("kubernetes.io", "k8s.io")

_NAME_RULE = "at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
_PREFIX_RULE = (
    "a DNS subdomain of at most 253 characters: lowercase letters, digits, '-' and '.', "
    "each dot-separated part starting and ending with a letter or digit"
)


def _kind(value) -> str:
    """The name of the plain type ``value`` is (or derives from: Ansible passes tagged subclasses)."""
    for kind in (bool, int, float, str, list, tuple, dict):
        if isinstance(value, kind):
            return kind.__name__
    return type(value).__name__


def _name_error(name: str) -> str | None:
    if not name:
        return "the name part is empty"
    if len(name) > NAME_MAX:
        return f"the name part {name!r} is {len(name)} characters long"
    if not _NAME_RE.match(name):
        return f"the name part {name!r} has characters or an ending that are not allowed"
    return None


def qualified_name_error(key, what: str = "label key") -> str | None:
    """Check a label or taint key: ``[prefix/]name``.

    ``prefix`` is an optional DNS subdomain (<= 253 characters), ``name`` is
    <= 63 characters of ``[A-Za-z0-9._-]`` starting and ending alphanumeric.
    """
    if not isinstance(key, str):
        return f"{what} {key!r} is a {_kind(key)}, not a string"
    if key.count("/") > 1:
        return f"{what} {key!r} has more than one '/': use [prefix/]name, e.g. example.com/gpu-pool"
    prefix, _sep, name = key.rpartition("/")
    if "/" in key:
        if not prefix:
            return f"{what} {key!r} has an empty prefix before '/': drop the '/' or put a DNS subdomain before it"
        if len(prefix) > PREFIX_MAX or not _DNS_SUBDOMAIN_RE.match(prefix):
            return f"{what} {key!r}: the prefix {prefix!r} must be {_PREFIX_RULE}"
    problem = _name_error(name)
    if problem:
        return f"{what} {key!r}: {problem}; the name must be {_NAME_RULE}"
    return None


def label_value_error(value, what: str = "label value") -> str | None:
    """Check a label or taint value: empty, or <= 63 characters like a name part."""
    if not isinstance(value, str):
        return f"{what} {value!r} is a {_kind(value)}, not a string"
    if value == "":
        return None
    if len(value) > NAME_MAX or not _NAME_RE.match(value):
        return f"{what} {value!r} is not valid: it must be empty or {_NAME_RULE}"
    return None


def _in_namespace(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def kubelet_label_error(key: str) -> str | None:
    """Check that the kubelet accepts ``key`` in ``--node-labels``.

    The kubelet refuses to start when a label in the kubernetes.io or k8s.io
    namespaces is neither one of KUBELET_ALLOWED_LABELS nor in one of
    KUBELET_ALLOWED_LABEL_NAMESPACES (``node-role.kubernetes.io/...`` is the
    classic example). Assumes ``key`` passed qualified_name_error.
    """
    if key in KUBELET_ALLOWED_LABELS or "/" not in key:
        return None
    namespace = key.split("/", 1)[0]
    if not any(_in_namespace(namespace, domain) for domain in _RESTRICTED_NAMESPACES):
        return None
    if any(_in_namespace(namespace, allowed) for allowed in KUBELET_ALLOWED_LABEL_NAMESPACES):
        return None
    return (
        f"label key {key!r} is in the reserved {namespace} namespace, and the kubelet refuses to start with it "
        "in --node-labels (only node.kubernetes.io/..., kubelet.kubernetes.io/... and the well-known topology, "
        "os, arch and instance-type labels are allowed); use your own prefix (e.g. example.com/role), or set the "
        "label through the API (kubectl label node)"
    )


def parse_taint(text) -> dict:
    """Parse ``key[=value]:Effect`` into ``{"key", "value"?, "effect"}``.

    Raises ValueError with a message that names the problem. The value is left
    out of the result when the text has none (``key:Effect``).
    """
    if not isinstance(text, str):
        raise ValueError(f"taint {text!r} is a {_kind(text)}, not a string of the form key[=value]:Effect")
    spec, sep, effect = text.rpartition(":")
    if not sep:
        raise ValueError(
            f"taint {text!r} has no effect: write key[=value]:Effect, e.g. nvidia.com/gpu=present:NoSchedule"
        )
    if effect not in TAINT_EFFECTS:
        raise ValueError(f"taint {text!r} has the effect {effect!r}: use one of {', '.join(TAINT_EFFECTS)}")
    key, has_value, value = spec.partition("=")
    problem = qualified_name_error(key, what="taint key")
    if problem:
        raise ValueError(f"taint {text!r}: {problem}")
    taint = {"key": key}
    if has_value:
        problem = label_value_error(value, what="taint value")
        if problem:
            raise ValueError(f"taint {text!r}: {problem}")
        taint["value"] = value
    taint["effect"] = effect
    return taint


def render_taint(taint: dict) -> str:
    """Inverse of parse_taint."""
    value = f"={taint['value']}" if "value" in taint else ""
    return f"{taint['key']}{value}:{taint['effect']}"
