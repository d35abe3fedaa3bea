"""plugins/filter/validate.py: the gpu_validate summary table, the status summary and the inputs it reads."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from conftest import load_module

validate = load_module("validate", subdir="plugins/filter")


CHECKS = [
    {"check": "NVIDIA driver", "status": "ok", "detail": "580.95.05 loaded (pin: version 580.95.05)", "fix": ""},
    {
        "check": "docker: default runtime",
        "status": "fail",
        "detail": "nvidia is the default runtime",
        "fix": "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime",
    },
    {"check": "nvidia-smi", "status": "skipped", "detail": "no GPU", "fix": ""},
    {
        "check": "AppArmor profile fuse",
        "status": "warn",
        "detail": "installed, not loaded",
        "fix": "Boot with AppArmor",
    },
]


# --- summary -------------------------------------------------------------------------------------


def test_summary_counts_every_status_and_fails_on_a_fail():
    assert validate.gpu_validate_summary(CHECKS) == {
        "ok": 1,
        "warn": 1,
        "fail": 1,
        "skipped": 1,
        "total": 4,
        "status": "fail",
    }


@pytest.mark.parametrize(
    ("statuses", "overall"),
    [
        (["ok", "warn", "skipped"], "warn"),
        (["ok", "ok"], "ok"),
        (["skipped", "skipped"], "ok"),
        ([], "ok"),
        (["warn", "fail", "ok"], "fail"),
    ],
)
def test_overall_status_is_the_worst_one_and_skipped_does_not_count(statuses, overall):
    checks = [{"check": f"c{i}", "status": s, "detail": "", "fix": ""} for i, s in enumerate(statuses)]
    assert validate.gpu_validate_summary(checks)["status"] == overall


def test_status_is_case_insensitive_and_normalised():
    summary = validate.gpu_validate_summary([{"check": "x", "status": " OK ", "detail": "d"}])
    assert summary["ok"] == 1 and summary["status"] == "ok"


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ([{"check": "x", "status": "passed"}], "has status 'passed'; use one of ok, warn, fail, skipped"),
        ([{"status": "ok"}], "check #0 has no name"),
        (["ok"], "check #0 is a str, not a mapping"),
        ("ok", "must be a list of checks, got str"),
        ({"check": "x"}, "must be a list of checks, got dict"),
    ],
)
def test_bad_results_are_refused_with_a_clear_message(results, message):
    with pytest.raises(AnsibleFilterError, match="gpu_validate: ") as err:
        validate.gpu_validate_summary(results)
    assert message in str(err.value)


# --- table ---------------------------------------------------------------------------------------


def test_table_renders_headline_columns_and_fix_column_exactly():
    table = validate.gpu_validate_table(CHECKS, "gpu-1")
    assert table == (
        "gpu-1: FAIL - 4 checks (1 ok, 1 warn, 1 fail, 1 skipped)\n"
        "CHECK                    STATUS   DETAIL                                     FIX\n"
        "-----------------------  -------  -----------------------------------------  "
        "--------------------------------------------------\n"
        "NVIDIA driver            ok       580.95.05 loaded (pin: version 580.95.05)  -\n"
        "docker: default runtime  fail     nvidia is the default runtime              "
        "Set nvidia_container_toolkit_set_as_default: false\n"
        "                                                                             and run site.yml --tags runtime\n"
        "nvidia-smi               skipped  no GPU                                     -\n"
        "AppArmor profile fuse    warn     installed, not loaded                      Boot with AppArmor\n"
    )


def test_table_without_host_has_a_bare_headline():
    first = validate.gpu_validate_table(CHECKS[:1]).splitlines()[0]
    assert first == "OK - 1 checks (1 ok, 0 warn, 0 fail, 0 skipped)"


def test_empty_fix_shows_a_dash_and_a_given_fix_shows_as_written():
    rows = validate.gpu_validate_table(CHECKS).splitlines()[3:]
    assert rows[0].endswith("  -")
    assert rows[-1].endswith("  Boot with AppArmor")


def test_long_cells_wrap_under_their_column_and_lines_have_no_trailing_spaces():
    detail = " ".join(["word"] * 40)
    table = validate.gpu_validate_table([{"check": "long", "status": "ok", "detail": detail, "fix": ""}], "h")
    lines = table.splitlines()
    body = lines[3:]
    assert len(body) > 1
    start = lines[1].index("DETAIL")
    assert all(line[start:].startswith("word") for line in body)
    assert all(len(line[start:]) <= validate.DETAIL_WIDTH for line in body[1:])
    assert " ".join(line[start:].strip() for line in body).replace("  -", "").strip() == detail
    assert all(line == line.rstrip() for line in lines)
    assert table.endswith("\n")


def test_whitespace_and_newlines_in_cells_are_collapsed():
    table = validate.gpu_validate_table([{"check": "x", "status": "fail", "detail": "a\n  b", "fix": "run\tit"}])
    assert table.splitlines()[3].split() == ["x", "fail", "a", "b", "run", "it"]


def test_table_is_deterministic():
    assert validate.gpu_validate_table(CHECKS, "h") == validate.gpu_validate_table(list(CHECKS), "h")


def test_table_refuses_a_bad_status():
    with pytest.raises(AnsibleFilterError, match="status 'broken'"):
        validate.gpu_validate_table([{"check": "x", "status": "broken"}])


def test_report_is_json_with_host_summary_and_normalised_checks():
    report = validate.gpu_validate_report(CHECKS, "gpu-1")
    assert json.loads(json.dumps(report)) == report
    assert report["host"] == "gpu-1"
    assert report["summary"]["status"] == "fail"
    assert [c["check"] for c in report["checks"]] == [c["check"] for c in CHECKS]
    assert set(report["checks"][0]) == {"check", "status", "detail", "fix"}


def test_filter_module_exposes_every_filter():
    filters = validate.FilterModule().filters()
    assert set(filters) == {
        "gpu_validate_table",
        "gpu_validate_summary",
        "gpu_validate_report",
        "gpu_validate_failure",
        "gpu_validate_files_pending",
        "gpu_validate_families",
        "gpu_validate_runtimes",
    }


# --- what user-namespaced FUSE pods need --------------------------------------------------------------


def _userns_node(kernel="6.12.48", containerd="2.1.4", runc="1.3.0", crun=None, kubelet="1.33.1", max_userns=63413):
    def tool(version):
        return {"installed": version is not None, "version": version}

    return {
        "kernel": {
            "release": f"{kernel}-amd64" if kernel else None,
            "version": kernel,
            "max_user_namespaces": max_userns,
        },
        "runtimes": {"docker": tool("28.5.1"), "containerd": tool(containerd), "crio": tool(None)},
        "oci_runtimes": {"runc": tool(runc), "crun": tool(crun)},
        "kubelet": tool(kubelet),
    }


def test_userns_nothing_missing_on_a_new_stack():
    assert validate.gpu_validate_userns_missing(_userns_node()) == []


def test_userns_the_debian12_node_names_every_missing_requirement():
    node = _userns_node(kernel="6.1.0", containerd="1.6.20", runc="1.1.5", kubelet=None)
    assert validate.gpu_validate_userns_missing(node) == [
        "Linux >= 6.3 (has 6.1.0-amd64)",
        "containerd >= 2.0 or CRI-O >= 1.25 (has containerd 1.6.20)",
        "runc >= 1.2 or crun >= 1.9 (has runc 1.1.5)",
        "a kubelet >= 1.30 (none installed)",
    ]


@pytest.mark.parametrize(
    ("kubelet", "gates", "expected"),
    [
        ("1.29.5", {}, ["a kubelet >= 1.30 (has 1.29.5)"]),
        ("1.31.2", {}, ["the kubelet feature gate UserNamespacesSupport: true (off by default in kubelet 1.31.2)"]),
        ("1.31.2", {"UserNamespacesSupport": True}, []),
        ("1.33.0", {}, []),
        ("1.34.1", {"UserNamespacesSupport": False}, ["the kubelet feature gate UserNamespacesSupport (set to false)"]),
        ("1.36.0", {"UserNamespacesSupport": False}, []),
    ],
)
def test_userns_kubelet_version_and_feature_gate(kubelet, gates, expected):
    assert validate.gpu_validate_userns_missing(_userns_node(kubelet=kubelet), gates) == expected


def test_userns_crun_or_crio_are_enough():
    node = _userns_node(containerd=None, runc="1.1.5", crun="1.9.2")
    node["runtimes"]["crio"] = {"installed": True, "version": "1.25.0"}
    assert validate.gpu_validate_userns_missing(node) == []


def test_userns_off_in_the_kernel_and_an_unknown_kernel():
    node = _userns_node(kernel=None, max_userns=0)
    assert validate.gpu_validate_userns_missing(node) == [
        "Linux >= 6.3 (has unknown)",
        "user namespaces on (sysctl user.max_user_namespaces is 0)",
    ]
