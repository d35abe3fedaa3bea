"""plugins/filter/validate.py and fleet_report.py: the filters that replaced the gpu_validate role's Jinja programs
(issue 40), and those that decide whether its reports are written.

OLD_* are the programs as the role had them (the YAML values as loaded), kept here to prove each filter renders the
same on the same inputs."""

from __future__ import annotations

import hashlib
import itertools

import pytest
import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import families
from conftest import ROOT, load_module, render_role_value

validate = load_module("validate", subdir="plugins/filter")
fleet_report = load_module("fleet_report", subdir="plugins/filter")
outcome = load_module("gpu_validate_outcome", subdir="plugins/action")

ROLE = ROOT / "roles" / "gpu_validate"

OLD_SUMMARY_MSG = (
    "{{ gpu_validate_results | gpunode.provisioning.gpu_validate_table(inventory_hostname) }}\n"
    "{%- if __gpu_validate_failing %}\n"
    "{{ __gpu_validate_failure }}\n{%- endif %}"
)
OLD_FAILURE = (
    "{{ gpu_validate_summary.fail }} check(s) failed on {{ inventory_hostname }}: {% for c in gpu_validate_results | "
    "selectattr('status', 'equalto', 'fail') %}{{ c.check }}: {{ c.detail }} (fix: {{ c.fix or '-' }}){{ '' if "
    "loop.last else '; ' }}{% endfor %}. The table above and {{ gpu_validate_report_dir }}/validate.txt show every "
    "check. gpu_validate_fail_on_error: false reports without failing."
)
OLD_RUNTIMES = (
    "{{ (gpu_validate_runtimes if gpu_validate_runtimes | length > 0 else __gpu_validate_node.runtimes_installed\n"
    "    + (['containerd'] if __gpu_validate_node.installer.containerd.config_regenerated | default('') == "
    "'agent start'\n       and __gpu_validate_node.installer.containerd.binary | default('', true) | length > 0 "
    "else []))\n   | unique | list }}"
)
OLD_FAMILIES = (
    "{{ ['driver', 'toolkit', 'docker', 'containerd', 'crio', 'isolation', 'doors', 'cdi', 'mig', 'fabric', 'health']\n"
    "   + (['fuse', 'confinement'] if gpu_validate_check_fuse | bool else [])\n"
    "   + (['security'] if gpu_validate_check_security | bool else []) + (['kubelet', 'dra'] if "
    "gpu_validate_check_kubelet | bool else []) }}"
)

OK = {"check": "NVIDIA driver", "status": "ok", "detail": "580.95.05 loaded", "fix": ""}
WARN = {"check": "container runtime", "status": "warn", "detail": "none installed", "fix": "Install one"}
FAIL = {"check": "docker: nvidia runtime", "status": "fail", "detail": "not registered", "fix": "Run site.yml"}
FAIL_NO_FIX = {"check": "nvidia-smi", "status": "fail", "detail": "exit 9", "fix": ""}
RESULTS = {
    "all ok": [OK],
    "one failed": [OK, FAIL],
    "two failed, one without a fix": [FAIL, WARN, FAIL_NO_FIX],
    "nothing": [],
}


def _role_value(path: str, key: str):
    return yaml.safe_load((ROLE / path).read_text())[key]


def _summary_task():
    (task,) = yaml.safe_load((ROLE / "tasks" / "report.yml").read_text())
    return task


@pytest.mark.parametrize(("case", "failing"), list(itertools.product(RESULTS, (True, False))))
def test_the_summary_says_what_the_jinja_program_said(case, failing):
    results = RESULTS[case]
    variables = {
        "gpu_validate_results": results,
        "gpu_validate_summary": validate.gpu_validate_summary(results),
        "inventory_hostname": "node-1",
        "gpu_validate_report_dir": "/var/lib/gpu-node-provisioning",
        "__gpu_validate_failing": failing,
    }
    old = render_role_value(OLD_SUMMARY_MSG, {**variables, "__gpu_validate_failure": OLD_FAILURE})
    # the doctor's last task (plugins/action/gpu_validate_outcome.py) joins its table and failure into its message
    args = _summary_task()["gpunode.provisioning.gpu_validate_outcome"]
    args_vars = variables  # __gpu_validate_failing as the task's own vars would render it
    fail = render_role_value(args["fail"], args_vars)
    assert fail is failing
    table, failure = render_role_value(args["table"], args_vars), render_role_value(args["failure"], args_vars)
    assert outcome.outcome_message(table, None, failure if fail else None) == old


NODES = {
    "installed ones": {"runtimes_installed": ["docker", "containerd"]},
    "none": {"runtimes_installed": []},
    "an agent's containerd": {
        "runtimes_installed": ["docker"],
        "installer": {"containerd": {"config_regenerated": "agent start", "binary": "/var/lib/rancher/containerd"}},
    },
    "an agent's containerd that is also on PATH": {
        "runtimes_installed": ["containerd"],
        "installer": {"containerd": {"config_regenerated": "agent start", "binary": "/x/containerd"}},
    },
    "an agent without its binary": {
        "runtimes_installed": ["crio"],
        "installer": {"containerd": {"config_regenerated": "agent start", "binary": None}},
    },
    "a containerd the agent does not rewrite": {
        "runtimes_installed": [],
        "installer": {"containerd": {"config_regenerated": "never", "binary": "/x/containerd"}},
    },
    "an installer without containerd": {"runtimes_installed": ["docker"], "installer": {}},
}


@pytest.mark.parametrize(("node", "asked"), list(itertools.product(NODES, ([], ["crio", "docker", "crio"]))))
def test_the_runtimes_are_those_the_jinja_program_chose(node, asked):
    variables = {"__gpu_validate_node": NODES[node], "gpu_validate_runtimes": asked}
    old = render_role_value(OLD_RUNTIMES, variables)
    assert render_role_value(_role_value("vars/main.yml", "__gpu_validate_runtimes"), variables) == old


@pytest.mark.parametrize("switches", list(itertools.product((True, False), repeat=3)))
def test_the_families_are_those_the_jinja_program_listed(switches):
    variables = dict(
        zip(
            ("gpu_validate_check_fuse", "gpu_validate_check_security", "gpu_validate_check_kubelet"),
            switches,
            strict=True,
        )
    )
    old = render_role_value(OLD_FAMILIES, variables)
    new = render_role_value(_role_value("vars/main.yml", "__gpu_validate_families"), variables)
    # the same families, in the registry's order (the module runs them in that order whatever it is asked), and the
    # runtime family (issue 51: the "container runtime" row moved from the role's vars into the module)
    assert new == [family for family in families.NAMES if family in [*old, "runtime"]]


def _state(content: str, mode="0644", uid=0, gid=0):
    return {"sha1": hashlib.sha1(content.encode()).hexdigest(), "mode": mode, "uid": uid, "gid": gid}


FILES = [{"path": "/r/validate.txt", "content": "table\n"}, {"path": "/r/validate.json", "content": "{}\n"}]


@pytest.mark.parametrize(
    ("states", "pending"),
    [
        ({"/r/validate.txt": _state("table\n"), "/r/validate.json": _state("{}\n")}, False),
        # each way a file can differ from the report
        ({"/r/validate.txt": _state("table\n"), "/r/validate.json": None}, True),
        ({"/r/validate.txt": _state("old table\n"), "/r/validate.json": _state("{}\n")}, True),
        ({"/r/validate.txt": _state("table\n", mode="0600"), "/r/validate.json": _state("{}\n")}, True),
        ({"/r/validate.txt": _state("table\n"), "/r/validate.json": _state("{}\n", uid=1000)}, True),
        ({"/r/validate.txt": _state("table\n"), "/r/validate.json": _state("{}\n", gid=4)}, True),
        ({"/r/validate.txt": _state("table\n")}, True),
    ],
)
def test_the_node_report_is_written_only_when_a_file_differs(states, pending):
    assert validate.gpu_validate_files_pending(states, FILES) is pending


def test_the_fleet_report_is_written_only_when_a_file_differs(tmp_path):
    files = [{"path": str(tmp_path / f"fleet.{ext}"), "content": f"<{ext}>\n"} for ext in ("json", "html")]
    assert fleet_report.gpu_fleet_files_pending(files) is True  # none there
    (tmp_path / "fleet.json").write_text("<json>\n")
    assert fleet_report.gpu_fleet_files_pending(files) is True  # the HTML page is missing
    (tmp_path / "fleet.html").write_text("<html>\n")
    assert fleet_report.gpu_fleet_files_pending(files) is False
    (tmp_path / "fleet.html").write_text("<html>\r\n")
    assert fleet_report.gpu_fleet_files_pending(files) is True
    (tmp_path / "fleet.html").write_bytes(b"\xff")
    assert fleet_report.gpu_fleet_files_pending(files) is True


class _Unrendered(dict):
    """An item whose content must not be read (it would render the whole page)."""

    def __getitem__(self, key):
        assert key != "content", "the page was rendered to compare it"
        return super().__getitem__(key)


def test_the_fleet_page_that_carries_its_key_is_not_rendered_to_compare_it(tmp_path):
    template = tmp_path / "page.j2"
    template.write_text("<page {{ key }}>\n")
    key = fleet_report.gpu_fleet_report_key('{"nodes": []}\n', template)
    # the key follows the JSON's text and the template's bytes
    assert key != fleet_report.gpu_fleet_report_key('{"nodes": [1]}\n', template)
    template.write_text("<other page {{ key }}>\n")
    assert key != fleet_report.gpu_fleet_report_key('{"nodes": []}\n', template)
    page = tmp_path / "fleet.html"
    files = [_Unrendered(path=str(page), key=key, content="never read")]
    assert fleet_report.gpu_fleet_files_pending(files) is True  # no page yet
    page.write_text(f"<html>\n{fleet_report.key_marker(key)}\n</html>\n")
    assert fleet_report.gpu_fleet_files_pending(files) is False
    page.write_text(f"<html>\n{fleet_report.key_marker('0' * 64)}\n</html>\n")  # another JSON or template
    assert fleet_report.gpu_fleet_files_pending(files) is True


class _Once(str):
    """A JSON text that counts how often the filter turns it into text (a lazy value renders at each use)."""

    uses = 0

    def __str__(self):
        type(self).uses += 1
        return str.__str__(self)


def test_the_roles_condition_renders_the_fleet_json_once_and_compares_both_files(tmp_path):
    template = tmp_path / "page.j2"
    template.write_text("<page>\n")
    path = tmp_path / "fleet"
    json_text = '{"nodes": []}\n'
    assert fleet_report.gpu_fleet_report_pending(json_text, path, template) is True  # none there
    (tmp_path / "fleet.json").write_text(json_text)
    assert fleet_report.gpu_fleet_report_pending(json_text, path, template) is True  # no page
    key = fleet_report.gpu_fleet_report_key(json_text, template)
    (tmp_path / "fleet.html").write_text(f"<html>\n{fleet_report.key_marker(key)}\n")
    once = _Once(json_text)
    assert fleet_report.gpu_fleet_report_pending(once, path, template) is False
    assert _Once.uses == 1
    assert fleet_report.gpu_fleet_report_pending('{"nodes": [1]}\n', path, template) is True  # the JSON changed
    template.write_text("<new page>\n")
    assert fleet_report.gpu_fleet_report_pending(json_text, path, template) is True  # the template changed
    # the role's condition is this filter on the one JSON text
    role_vars = (ROOT / "roles" / "gpu_validate" / "vars" / "main.yml").read_text()
    assert "__gpu_validate_fleet_json | gpunode.provisioning.gpu_fleet_report_pending(" in role_vars


def test_the_page_writes_the_marker_the_comparison_looks_for():
    text = (ROOT / "roles" / "gpu_validate" / "templates" / "fleet_report.html.j2").read_text()
    assert fleet_report.key_marker("{{ __gpu_validate_fleet_key }}") in text
