"""A per-test time limit: pytest-timeout when installed (method "thread": a test that hangs in
native code is stopped with its stacks dumped), otherwise a SIGALRM fallback. The limit sits on
each test as a `timeout` mark, so no ini option depends on the plugin being there."""

import signal

import pytest

TIMEOUT_S = 120


def pytest_configure(config):
    # Ctrl-C tests send SIGINT to this process and to the children it starts. A shell starts a
    # background job (`make test &`, nohup, a CI runner without job control) with SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler, which children inherit:
    # those tests would fail for how the suite was launched. Python's own default, always.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line("markers", "timeout(seconds, method=...): per-test time limit")
    config.addinivalue_line("markers", "ray: runs on a local Ray cluster (test_ray.py; `-m 'not ray'` leaves them out)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIMEOUT_S, method="thread"))


@pytest.fixture(autouse=True)
def _alarm_without_pytest_timeout(request):
    if request.config.pluginmanager.hasplugin("timeout") or not hasattr(signal, "SIGALRM"):
        yield
        return
    seconds = int(request.node.get_closest_marker("timeout").args[0])

    def on_alarm(signum, frame):
        pytest.fail(f"test ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
