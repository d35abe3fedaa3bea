"""Unit and property tests of the merge engine (plugins/module_utils/files/merge.py)."""

from __future__ import annotations

import copy
import json

import pytest
import tomlkit
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.merge import (
    LIST_STRATEGIES,
    get_path,
    merge,
    merge_into,
    normalize_path,
    remove_paths,
    values_equal,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# ---------------------------------------------------------------- merge_into / merge


def test_nested_mappings_merge_and_keep_unnamed_keys():
    target = {"log-opts": {"max-size": "10m"}, "features": {"buildkit": True}, "debug": False}
    changed = merge_into(target, {"features": {"cdi": True}, "runtimes": {"nvidia": {"path": "x"}}})
    assert changed is True
    assert target == {
        "log-opts": {"max-size": "10m"},
        "features": {"buildkit": True, "cdi": True},
        "debug": False,
        "runtimes": {"nvidia": {"path": "x"}},
    }
    assert list(target) == ["log-opts", "features", "debug", "runtimes"]
    assert list(target["features"]) == ["buildkit", "cdi"]


def test_equal_values_report_no_change():
    target = {"a": {"b": [1, 2], "c": "x"}, "d": 1.5}
    assert merge_into(target, {"a": {"b": [1, 2], "c": "x"}, "d": 1.5}) is False
    assert target == {"a": {"b": [1, 2], "c": "x"}, "d": 1.5}


@pytest.mark.parametrize(
    ("old", "new"),
    [(1, True), (True, 1), (1, 1.0), (0, False), ("1", 1), ([1], [True]), ({"a": 1}, {"a": 1.0})],
)
def test_values_of_another_type_are_a_change(old, new):
    target = {"k": old}
    assert merge_into(target, {"k": new}) is True
    assert type(target["k"]) is type(new)
    assert values_equal(target["k"], new)


def test_mapping_and_scalar_replace_each_other():
    target = {"a": {"x": 1}, "b": 2, "c": [1]}
    assert merge_into(target, {"a": 3, "b": {"y": 2}, "c": {"z": 3}}) is True
    assert target == {"a": 3, "b": {"y": 2}, "c": {"z": 3}}


def test_merge_returns_a_copy_and_does_not_alias_changes():
    base = {"a": {"b": [1]}, "s": 0}
    changes = {"a": {"c": {"d": [2]}}, "s": {"t": [5]}}
    result = merge(base, changes)
    assert base == {"a": {"b": [1]}, "s": 0}
    assert result == {"a": {"b": [1], "c": {"d": [2]}}, "s": {"t": [5]}}
    result["a"]["c"]["d"].append(3)
    result["a"]["b"].append(4)
    result["s"]["t"].append(6)
    assert changes == {"a": {"c": {"d": [2]}}, "s": {"t": [5]}}
    assert base == {"a": {"b": [1]}, "s": 0}


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("replace", ["c", "a", "c"]),
        ("append_unique", ["a", "b", "a", "c"]),
        ("prepend_unique", ["c", "a", "b", "a"]),
    ],
)
def test_list_strategies(strategy, expected):
    target = {"mirrors": ["a", "b", "a"]}
    assert merge_into(target, {"mirrors": ["c", "a", "c"]}, strategy) is True
    assert target["mirrors"] == expected
    assert merge_into(target, {"mirrors": ["c", "a", "c"]}, strategy) is False, "a second application changes nothing"
    assert target["mirrors"] == expected


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("append_unique", ["x", "y", "a", "b", "c"]), ("prepend_unique", ["a", "b", "c", "x", "y"])],
)
def test_unique_strategies_keep_the_order_of_the_new_items(strategy, expected):
    target = {"l": ["x", "y"]}
    assert merge_into(target, {"l": ["a", "x", "b", "c", "b"]}, strategy) is True
    assert target["l"] == expected


@pytest.mark.parametrize("strategy", ["append_unique", "prepend_unique"])
def test_unique_strategies_compare_items_deeply_and_strictly(strategy):
    target = {"l": [{"a": 1}, 1]}
    assert merge_into(target, {"l": [{"a": 1}, 1]}, strategy) is False
    assert merge_into(target, {"l": [True]}, strategy) is True
    assert target["l"] == ([{"a": 1}, 1, True] if strategy == "append_unique" else [True, {"a": 1}, 1])
    assert type(target["l"][2 if strategy == "append_unique" else 0]) is bool


@pytest.mark.parametrize("strategy", ["append_unique", "prepend_unique"])
def test_unique_strategies_replace_a_non_list(strategy):
    target = {"l": "scalar", "t": (1, 2)}
    assert merge_into(target, {"l": [1], "t": [3]}, strategy) is True
    assert target["l"] == [1]
    assert target["t"] == ([1, 2, 3] if strategy == "append_unique" else [3, 1, 2])


def test_list_strategy_applies_at_every_depth():
    target = {"a": {"b": {"c": [1]}}}
    merge_into(target, {"a": {"b": {"c": [2]}}}, "append_unique")
    assert target == {"a": {"b": {"c": [1, 2]}}}


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match=r"unknown list strategy 'merge': use one of replace, append_unique"):
        merge_into({}, {}, "merge")
    with pytest.raises(ValueError, match="changes must be a mapping, got list"):
        merge_into({}, [1])
    with pytest.raises(TypeError, match="target must be a mutable mapping, got str"):
        merge_into("x", {})
    with pytest.raises(ValueError, match="unknown list strategy"):
        merge({}, {}, "bogus")


def test_list_strategies_constant():
    assert LIST_STRATEGIES == ("replace", "append_unique", "prepend_unique")


# ---------------------------------------------------------------- remove_paths / get_path


def test_remove_paths():
    target = {"a": {"b": {"c": 1, "d": 2}}, "e": 3, "f": [1]}
    assert remove_paths(target, [["a", "b", "c"], "e", ("f",)]) is True
    assert target == {"a": {"b": {"d": 2}}}
    assert remove_paths(target, [["a", "b", "d"]]) is True
    assert target == {"a": {"b": {}}}, "an emptied parent stays"


def test_remove_missing_paths_is_a_no_op():
    target = {"a": {"b": 1}, "s": "text"}
    assert remove_paths(target, [["x"], ["a", "x"], ["a", "b", "c"], ["s", "t"], "nope"]) is False
    assert remove_paths(target, []) is False
    assert target == {"a": {"b": 1}, "s": "text"}


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ("a", "paths must be a list of key paths, got str"),
        ([[]], "a key path must name at least one key, got an empty list"),
        ([5], "a key path must be a string or a list of keys, got int: 5"),
    ],
)
def test_remove_paths_rejects_bad_paths(paths, message):
    target = {"a": 1}
    with pytest.raises(ValueError, match=message):
        remove_paths(target, paths)
    assert target == {"a": 1}


def test_get_path():
    data = {"a": {"b": {"c": 0}}, "s": "x"}
    assert get_path(data, ["a", "b", "c"]) == 0
    assert get_path(data, "s") == "x"
    assert get_path(data, ("a", "b")) == {"c": 0}
    assert get_path(data, ["a", "x"], "dflt") == "dflt"
    assert get_path(data, ["s", "x"]) is None
    assert normalize_path("k") == ["k"]


# ---------------------------------------------------------------- tomlkit targets

CONTAINERD = """\
# containerd config, hand-edited
version = 2  # keep

[plugins."io.containerd.grpc.v1.cri"]
  # CRI plugin
  sandbox_image = "registry.k8s.io/pause:3.9"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true  # must match the kubelet

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ["/etc/containerd/certs.d"]  # mirrors
"""

CRI = ["plugins", "io.containerd.grpc.v1.cri"]


def test_merging_into_a_tomlkit_document_keeps_comments_and_layout():
    doc = tomlkit.parse(CONTAINERD)
    changes = {
        "plugins": {
            "io.containerd.grpc.v1.cri": {
                "enable_cdi": True,
                "containerd": {
                    "runtimes": {
                        "nvidia": {
                            "runtime_type": "io.containerd.runc.v2",
                            "options": {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True},
                        }
                    }
                },
                "registry": {"config_path": ["/etc/containerd/certs.d", "/etc/extra"]},
            }
        }
    }
    assert merge_into(doc, changes, "append_unique") is True
    text = tomlkit.dumps(doc)
    for comment in (
        "# containerd config, hand-edited",
        "# keep",
        "# CRI plugin",
        "# must match the kubelet",
        "# mirrors",
    ):
        assert comment in text
    assert 'sandbox_image = "registry.k8s.io/pause:3.9"' in text
    value = tomlkit.parse(text).unwrap()
    assert get_path(value, [*CRI, "enable_cdi"]) is True
    assert get_path(value, [*CRI, "containerd", "runtimes", "runc", "options", "SystemdCgroup"]) is True
    assert get_path(value, [*CRI, "containerd", "runtimes", "nvidia", "options", "BinaryName"]).endswith("runtime")
    assert get_path(value, [*CRI, "registry", "config_path"]) == ["/etc/containerd/certs.d", "/etc/extra"]
    # a second application is a no-op and leaves the text alone
    assert merge_into(doc, changes, "append_unique") is False
    assert tomlkit.dumps(doc) == text


def test_unchanged_tomlkit_document_is_byte_identical():
    doc = tomlkit.parse(CONTAINERD)
    same = {"version": 2, "plugins": {"io.containerd.grpc.v1.cri": {"containerd": {"default_runtime_name": "runc"}}}}
    assert merge_into(doc, same) is False
    assert tomlkit.dumps(doc) == CONTAINERD


def test_changed_scalar_in_tomlkit_keeps_its_neighbours_comments():
    doc = tomlkit.parse(CONTAINERD)
    assert merge_into(
        doc, {"plugins": {"io.containerd.grpc.v1.cri": {"containerd": {"default_runtime_name": "nvidia"}}}}
    )
    text = tomlkit.dumps(doc)
    assert text == CONTAINERD.replace('default_runtime_name = "runc"', 'default_runtime_name = "nvidia"')


def test_remove_paths_on_tomlkit_document():
    doc = tomlkit.parse(CONTAINERD)
    assert remove_paths(doc, [[*CRI, "sandbox_image"]]) is True
    text = tomlkit.dumps(doc)
    assert "sandbox_image" not in text
    assert "# must match the kubelet" in text


# ---------------------------------------------------------------- property tests

KEYS = st.text(alphabet="abcxyz-_. 1", min_size=1, max_size=4)
SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=6),
)
# Values that JSON and TOML can both hold: scalars, lists of scalars, nested tables.
VALUES = st.recursive(
    st.one_of(SCALARS, st.lists(SCALARS, max_size=4)),
    lambda children: st.dictionaries(KEYS, children, max_size=4),
    max_leaves=12,
)
MAPPINGS = st.dictionaries(KEYS, VALUES, max_size=5)
STRATEGY = st.sampled_from(LIST_STRATEGIES)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_preserved(base, changes, result):
    """Keys of `base` not named in `changes` keep their value; existing keys keep their order."""
    assert list(result)[: len(base)] == list(base)
    for key, old in base.items():
        if key not in changes:
            assert values_equal(result[key], old)
        elif isinstance(old, dict) and isinstance(changes[key], dict):
            _assert_preserved(old, changes[key], result[key])


@PROPERTY
@given(base=MAPPINGS, changes=MAPPINGS, strategy=STRATEGY)
def test_merging_twice_equals_merging_once(base, changes, strategy):
    once = merge(base, changes, strategy)
    twice = copy.deepcopy(once)
    assert merge_into(twice, changes, strategy) is False
    assert json.dumps(twice) == json.dumps(once)


@PROPERTY
@given(base=MAPPINGS, changes=MAPPINGS, strategy=STRATEGY)
def test_unnamed_keys_and_key_order_are_preserved(base, changes, strategy):
    original = copy.deepcopy(base)
    result = merge(base, changes, strategy)
    assert json.dumps(base) == json.dumps(original), "merge must not modify its input"
    _assert_preserved(base, changes, result)


@PROPERTY
@given(base=MAPPINGS, changes=MAPPINGS)
def test_replace_strategy_makes_every_named_leaf_equal_to_the_change(base, changes):
    result = merge(base, changes)

    def check(node, change):
        for key, value in change.items():
            if isinstance(value, dict):
                check(node[key], value)
            else:
                assert values_equal(node[key], value)

    check(result, changes)


@PROPERTY
@given(base=MAPPINGS, changes=MAPPINGS, strategy=STRATEGY)
def test_change_flag_matches_value_difference(base, changes, strategy):
    target = copy.deepcopy(base)
    assert merge_into(target, changes, strategy) is (not values_equal(base, target))


@PROPERTY
@given(base=MAPPINGS, changes=MAPPINGS, strategy=STRATEGY)
def test_merged_value_round_trips_through_json(base, changes, strategy):
    result = merge(base, changes, strategy)
    assert values_equal(json.loads(json.dumps(result)), result)


@PROPERTY
@given(base=MAPPINGS, changes=MAPPINGS, strategy=STRATEGY)
def test_merging_into_tomlkit_document_round_trips_through_toml(base, changes, strategy):
    doc = tomlkit.parse(tomlkit.dumps(base))
    changed = merge_into(doc, changes, strategy)
    expected = merge(base, changes, strategy)
    assert changed is (not values_equal(base, expected))
    assert values_equal(tomlkit.parse(tomlkit.dumps(doc)).unwrap(), expected)


@PROPERTY
@given(base=MAPPINGS, paths=st.lists(st.lists(KEYS, min_size=1, max_size=3), max_size=4))
def test_removed_paths_are_gone_and_others_stay(base, paths):
    target = copy.deepcopy(base)
    removed = remove_paths(target, paths)
    assert removed is (not values_equal(base, target))
    sentinel = object()
    for path in paths:
        assert get_path(target, path, sentinel) is sentinel
    assert remove_paths(target, paths) is False
