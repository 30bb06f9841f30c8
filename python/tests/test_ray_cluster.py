"""remote_map on a real two-node Ray cluster (``ray.cluster_utils.Cluster`` on loopback): a node
removed mid-epoch takes its actor with it, and the epoch still yields every element once, in
order. Marked ``ray``; skipped with a reason where Ray is not installed (``make test`` installs
it). One test: starting a second node costs tens of seconds, so the other Ray tests share one
``ray.init`` node in ``test_ray.py``."""

import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="ray[data] is not installed (make test installs it)")
cluster_utils = pytest.importorskip("ray.cluster_utils")
shray = pytest.importorskip("stokehold.ray")

import stokehold  # noqa: E402

pytestmark = [
    pytest.mark.ray,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.timeout(300, method="thread"),
]


def _work(e):
    v = np.float64(e["x"]) + np.arange(64, dtype=np.float64)
    for _ in range(20):
        v = np.sin(v) * 1.5 + 0.1
    return {"x": e["x"], "y": v}


def test_a_node_removed_mid_epoch_loses_and_duplicates_nothing():
    if ray.is_initialized():
        ray.shutdown()
    # One CPU per node and one per actor: the two actors must live on different nodes, so
    # removing the second node kills one of them.
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        second = cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, log_to_driver=False)
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        cluster.wait_for_nodes()
        ds = stokehold.from_arrays({"x": np.arange(300, dtype=np.int64)})
        want = [int(e["x"]) for e in ds.map(_work)]
        remote = ds.remote_map(_work, num_actors=2, num_cpus_per_actor=1)
        it = iter(remote)
        got = [int(next(it)["x"]) for _ in range(60)]
        assert len(shray.actors(remote)) == 2
        cluster.remove_node(second, allow_graceful=False)
        cluster.add_node(num_cpus=1)  # room for the replacement actor, as an autoscaler gives
        got += [int(e["x"]) for e in it]
        assert got == want
        assert shray._pools[remote].restarts >= 1
    finally:
        ray.shutdown()
        cluster.shutdown()
