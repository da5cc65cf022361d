"""The Ray executor's tests run on a real local Ray cluster, one per test module (``support.ray_cluster``).

Skipped where Ray is not installed (``pip install 'autodev[ray]'``); ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

# Ray reads its authentication settings once, when it is imported: the cluster's token is this process's
# before anything imports it. Token authentication, since Ray's servers listen on every interface.
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(16)
pytest.importorskip("ray")

from support.ray_cluster import RayCluster, local_ray_cluster


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    """Stopped when the module's tests are done: an idle cluster's processes would take processor time from
    every test after them."""
    with local_ray_cluster() as cluster:
        yield cluster
