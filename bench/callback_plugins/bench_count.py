# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Counts what a playbook run did, for bench/provision.py.

Writes one JSON document to the file named by BENCH_STATS_FILE when the run ends:
tasks and handlers started (each counted once, however many hosts ran it), task
results by outcome over all hosts, and the recap per host.
"""

from __future__ import annotations

import json
import os
from collections import Counter

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: bench_count
type: aggregate
short_description: Counts the tasks and results of a playbook run for the benchmark
description:
  - Counts tasks and handlers started and task results by outcome, and writes them with the per-host recap
    as JSON to the file named by E(BENCH_STATS_FILE) at the end of the run.
requirements:
  - enabled in C(callbacks_enabled) (bench/provision.py does this through the environment)
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_count"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.tasks = 0
        self.handlers = 0
        self.results: Counter[str] = Counter()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.tasks += 1

    def v2_playbook_on_handler_task_start(self, task):
        self.handlers += 1

    def v2_runner_on_ok(self, result):
        self.results["changed" if result._result.get("changed") else "ok"] += 1

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self.results["ignored" if ignore_errors else "failed"] += 1

    def v2_runner_on_skipped(self, result):
        self.results["skipped"] += 1

    def v2_runner_on_unreachable(self, result):
        self.results["unreachable"] += 1

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("BENCH_STATS_FILE")
        if not path:
            return
        hosts = sorted(stats.processed)
        document = {
            "tasks_started": self.tasks,
            "handlers_started": self.handlers,
            "results": dict(sorted(self.results.items())),
            "recap": {host: stats.summarize(host) for host in hosts},
        }
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2, sort_keys=True)
            handle.write("\n")
