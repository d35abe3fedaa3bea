"""One line that says why a stage of the test command failed: the scenario, the node, the step and the reason.

The test command's output ends with pytest's summary; the full molecule and demo logs sit in .ci-logs/. A user
who sees a red run reads its last lines first, so each failed stage puts this line first in its failure message,
and tests/conftest.py repeats it, unshortened, just above pytest's summary.

Read from the output of `molecule test` (its step: "An error occurred during the test sequence action:
'prepare'"), of ansible-playbook (the first `fatal:`/`failed:` result and the task above it, with
callback_result_format yaml or json) and of testinfra/pytest (its `FAILED` lines), whichever the log holds.
"""

from __future__ import annotations

import json
import re

_ACTION = re.compile(r"sequence action: '([\w-]+)'")
# molecule 26's step lines: "INFO     [fuse_security > converge] Executing" ... "Executed: Successful"
_STEP = re.compile(r"\[[^\]>]+ > ([\w-]+)\] (Executing|Executed: \w+)")
_TASK = re.compile(r"^TASK \[(?P<task>.*?)\] \**\s*$")
_RESULT = re.compile(
    r"^(?:fatal|failed): \[(?P<node>[^\]]+)\](?: \(item=(?P<item>.*?)\))?: (?:FAILED|UNREACHABLE)! =>\s*(?P<rest>.*)$"
)
_NOT_IDEMPOTENT = re.compile(r"^\*\s*\[(?P<node>[^\]]+)\]\s*=>\s*(?P<task>.+)$")
_PYTEST_FAILED = re.compile(r"^FAILED (?P<test>\S+?)(?:\[(?:ansible|docker)://(?P<node>[^\]]+)\])?(?: - (?P<why>.*))?$")
_MAX = 400


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX else text[: _MAX - 3] + "..."


def _result_reason(block: list[str]) -> str:
    """The reason of an Ansible result printed after `=>`: msg, or stderr when msg only says the rc."""
    text = "\n".join(block).strip()
    fields: dict[str, str] = {}
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict):
            fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in parsed.items()}
    except ValueError:
        # callback_result_format yaml: top-level "key: value" or "key: |-" followed by an indented block
        key, lines, indent = None, [], None
        for line in block:
            top = re.match(r"^(\s*)([A-Za-z_][\w]*):(?: (.*))?$", line)
            if top and (indent is None or len(top.group(1)) <= indent):
                if key:
                    fields[key] = "\n".join(lines)
                indent = len(top.group(1))
                key, value = top.group(2), (top.group(3) or "").strip()
                lines = [] if value in ("|", "|-", ">", ">-", "") else [value.strip("'\"")]
            elif key:
                lines.append(line.strip())
        if key:
            fields[key] = "\n".join(lines)
    msg = fields.get("msg", "")
    stderr = fields.get("stderr", "")
    if stderr and (not msg or msg.startswith("non-zero return code") or msg == "MODULE FAILURE"):
        lines = [line for line in stderr.splitlines() if line.strip()]
        return lines[-1] if lines else msg
    if msg:
        return msg
    return text.splitlines()[0] if text else "no message"


def _results(section: str) -> list[tuple[str, str, str]]:
    """(node, task, reason) of every failed result of one playbook run that was not ignored, in order."""
    lines = section.splitlines()
    task, found_all = "", []
    for number, line in enumerate(lines):
        found = _TASK.match(line)
        if found:
            task = found.group("task")
            continue
        found = _RESULT.match(line)
        if not found:
            continue
        block = [found.group("rest")] if found.group("rest") else []
        ignored = False
        for following in lines[number + 1 :]:
            if following.startswith("...ignoring"):
                ignored = True
                break
            if not following.startswith(" ") or not following.strip():
                break
            block.append(following)
        if ignored:
            continue
        reason = _result_reason(block)
        if found.group("item"):
            reason = f"(item {found.group('item')}) {reason}"
        found_all.append((found.group("node"), task, reason))
    return found_all


def ansible_failure(output: str) -> tuple[str, str, str] | None:
    """(node, task, reason) of the run that failed last in ansible-playbook output (one or several runs): the
    first node its PLAY RECAP counts as failed or unreachable, and that node's last failed result (a failure a
    block rescued comes before it). None when no run failed."""
    sections = output.split("PLAY RECAP")
    for number in range(len(sections) - 1, 0, -1):
        recap = sections[number].split("\n\n", 1)[0]
        failed = re.findall(r"^(\S+)\s*:.*?(?:failed=[1-9]|unreachable=[1-9])", recap, re.M)
        if not failed:
            continue
        results = _results(sections[number - 1])
        mine = [result for result in results if result[0] == failed[0]]
        if mine or results:
            return (mine or results)[-1]
        return failed[0], "", "failed (no result printed)"
    results = _results(output)
    return results[-1] if results else None


def molecule_failure(scenario: str, output: str) -> str:
    """The one line for a failed `molecule test -s <scenario>`, from its log."""
    actions = _ACTION.findall(output)
    # without molecule's error line: the last step it began and did not finish successfully
    began = [m.group(1) for m in _STEP.finditer(output) if not m.group(2).endswith("Successful")]
    step = actions[-1] if actions else began[-1] if began else "an unknown step"
    where = f"molecule {scenario}: {step} failed"
    if step == "idempotence":
        tasks = [m.groupdict() for m in map(_NOT_IDEMPOTENT.match, output.splitlines()) if m]
        if tasks:
            shown = "; ".join(f"{t['node']}: {t['task'].strip()}" for t in tasks[:5])
            more = f" and {len(tasks) - 5} more" if len(tasks) > 5 else ""
            return _one_line(f"{where}: tasks changed on the second converge: {shown}{more}")
    if step == "verify":
        failed = [m for m in map(_PYTEST_FAILED.match, output.splitlines()) if m]
        if failed:
            first = failed[0]
            node = f" on {first.group('node')}" if first.group("node") else ""
            why = f": {first.group('why')}" if first.group("why") else ""
            more = f" (and {len(failed) - 1} more failed tests)" if len(failed) > 1 else ""
            return _one_line(f"{where}{node}, {first.group('test').split('::')[-1]}{why}{more}")
    failure = ansible_failure(output)
    if failure:
        node, task, reason = failure
        return _one_line(f"{where} on {node}, task '{task}': {reason}")
    # the last line before molecule's own "An error occurred ..." and its clean-up
    before = output[: output.rfind("\n", 0, m.start()) + 1] if (m := _ACTION.search(output)) else output
    lines = [line for line in before.splitlines() if line.strip()]
    return _one_line(f"{where}: {lines[-1] if lines else 'no output'}")
