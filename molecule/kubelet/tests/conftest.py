"""The kubelet tests run test by test on both nodes (each test on kl-debian12, then on kl-debian13) instead of node by
node: each node still sees the same tests in the same order, and a rerun of converge.yml that a test makes on both
nodes at once (test_kubelet.py's shared runs) happens where each node's own test would have made it."""

from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)  # after pytest grouped the tests by node (testinfra's module-scoped host parameter)
def pytest_collection_modifyitems(items):
    first = {}

    def test_without_node(item) -> tuple:
        params = getattr(item, "callspec", None)
        others = (
            tuple(sorted((k, str(v)) for k, v in params.params.items() if k != "_testinfra_host")) if params else ()
        )
        return (item.path, item.originalname, others)

    for index, item in enumerate(items):
        first.setdefault(test_without_node(item), index)
    items.sort(key=lambda item: first[test_without_node(item)])  # stable: the nodes in their order within a test
