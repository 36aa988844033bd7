"""A stop (make stop's TERM, Ctrl-C) reaches the driver wherever its main thread is. The driver's
signal handler raises Stopped there (pyhelpers/loop/loop.py); a broad `except Exception` on the way
-- the job watch's "the dashboard may hiccup", the node list's "the head may be busy" -- took it for
one more failed call and went on: the stop was lost, further signals ignored (the handler ignores
them once it ran), the round trained on, and `make stop` SIGKILLed the driver when its wait ran out
(an FB check: no line of the driver's own stop in the 42 s it waited). The real handler, the real
signal, delivered inside the call."""

from __future__ import annotations

import os
import signal

import pytest

from pyhelpers.errors import Stopped
from pyhelpers.launch import ray_nodes, rayjob
from pyhelpers.loop import loop


@pytest.fixture
def driver_signals():
    """The driver's TERM/INT handlers in this process for the test; pytest's back afterwards."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    loop.install_signal_handlers()
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _term_inside_the_call(then: dict):
    """A call that receives the driver's TERM while it runs (the HTTP request in flight), and would
    answer `then` if it were not stopped."""
    calls = []

    def call(*_a, **_k):
        calls.append(1)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # (the handler runs between two bytecodes of this thread)
                pass
        return then
    return call, calls


def test_a_stop_during_a_job_api_call_ends_the_job_watch(driver_signals):
    info, calls = _term_inside_the_call({"status": "RUNNING"})
    with pytest.raises(Stopped):
        rayjob.watch("job", info=info, stop=lambda _j: None, started=lambda: True, start_timeout=1e9,
                     unreachable_timeout=1e9, sleep=lambda _s: None if len(calls) < 5 else pytest.fail(
                         "the watch went on after the stop"))


def test_a_stop_during_a_node_list_read_ends_the_wait_for_the_cluster(driver_signals):
    nodes, calls = _term_inside_the_call([])
    with pytest.raises(Stopped):
        ray_nodes.wait_for(2, 4, 1e9, nodes=nodes, poll=0,
                           sleep=lambda _s: None if len(calls) < 5 else pytest.fail("the wait went on after the stop"))


def test_no_handler_for_errors_can_take_a_stop_for_one():
    """Every `except Exception` of the driver's code, present and future: a stop is not an error."""
    assert not issubclass(Stopped, Exception)
    assert issubclass(Stopped, SystemExit)  # (what asyncio lets out of a task at once: the test below)


def test_a_stop_during_a_background_task_of_an_evaluation_ends_it_at_once(driver_signals):
    """Evaluation plays its episodes as asyncio tasks on the driver's main thread (bare val beside
    compile). A TERM that lands while a task that nobody awaits yet runs (the episode writer, a
    worker tokenizing its prompt) was kept in that task -- asyncio keeps any exception of a task but
    KeyboardInterrupt and SystemExit for whoever awaits it -- and the evaluation played on to its
    last episode before the stop surfaced."""
    import asyncio

    played = []

    async def writer():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # (the handler runs between two bytecodes of this thread)
            pass

    async def evaluation():
        task = asyncio.create_task(writer())
        for episode in range(50):  # the workers' episodes, each waiting on the servers
            played.append(episode)
            await asyncio.sleep(0)
        await task

    with pytest.raises(Stopped):
        asyncio.run(evaluation())
    assert len(played) < 5, f"{len(played)} episodes played after the stop"
