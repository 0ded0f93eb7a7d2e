"""The backends the facade contract runs against, and how a test opens a system on one.

Test modules import these from here, not from ``conftest.py``: with more than one test
folder on pytest's command line, ``from conftest import ...`` finds whichever folder's
``conftest`` was imported first (``tests/server`` has one too).
"""

from __future__ import annotations

from typing import Any

import pytest
from localhost import LocalCluster

#: Every backend the facade contract runs against: the in-process system, the sharded
#: facade with shards in this process, and the sharded facade with shards as Ray actors.
BACKENDS = ["inprocess", "local-shards", "ray"]


#: Shards of a Ray system that ``open_mem`` (conftest.py) opens for one test (see there).
OWN_RAY_SHARDS = 1


def own_shards(backend: str) -> int:
    """The shards of a system that ``open_mem`` (conftest.py) opens on ``backend``."""
    return OWN_RAY_SHARDS if backend == "ray" else 2


def make_cluster(backend: str, request: pytest.FixtureRequest, shards: int = 2) -> Any:
    """The ``cluster=`` argument of ``MemoryOS.open`` for ``backend``."""
    if backend == "inprocess":
        return None
    if backend == "local-shards":
        return LocalCluster(shards=shards)
    request.getfixturevalue("ray_cluster")
    from memoryos_actors.cluster import RayCluster

    return RayCluster(shards=shards, retry_seconds=60.0)
