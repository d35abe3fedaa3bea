"""The CRI log reader of the tests (tests/cri/client.py): each stream on its own, whatever the interleaving."""

from __future__ import annotations

import pytest

from tests.cri.client import log_streams

# what containerd wrote for the kubelet scenario's FUSE pod under load: the shell's stderr line came first
UNDER_LOAD = """\
2026-11-24T10:00:00.000000001Z stderr F sh: can't create /proc/sys/kernel/threads-max: Permission denied
2026-11-24T10:00:00.000000002Z stdout F hello-through-fuse
2026-11-24T10:00:00.000000003Z stdout F bindfs /mnt/b fuse rw 0 0
2026-11-24T10:00:00.000000004Z stderr F umount: can't unmount /proc/sys: Permission denied
2026-11-24T10:00:00.000000005Z stdout F DONE
"""


def test_each_stream_keeps_its_own_order_whatever_came_first():
    streams = log_streams(UNDER_LOAD)
    assert streams["stdout"] == ["hello-through-fuse", "bindfs /mnt/b fuse rw 0 0", "DONE"]
    assert streams["stderr"] == [
        "sh: can't create /proc/sys/kernel/threads-max: Permission denied",
        "umount: can't unmount /proc/sys: Permission denied",
    ]
    # the same entries in the other order give the same streams
    calm = "\n".join(sorted(UNDER_LOAD.splitlines(), key=lambda line: line.split()[1] != "stdout"))
    assert log_streams(calm) == streams


def test_partial_entries_join_within_their_stream_only():
    text = (
        "t stdout P hello-\n"
        "t stderr F an error between the halves\n"
        "t stdout F through-fuse\n"
        "t stdout F \n"
        "t stderr P unfinished"
    )
    assert log_streams(text) == {
        "stdout": ["hello-through-fuse", ""],
        "stderr": ["an error between the halves", "unfinished"],
    }


def test_a_line_that_is_no_cri_entry_is_refused():
    with pytest.raises(ValueError, match="not a CRI log entry"):
        log_streams("hello-through-fuse\n")
