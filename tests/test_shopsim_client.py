"""ShopSimulator protocol (errors as HTTP 200, scores, actions) and the async client against the
real fake server process: slots released on every path, pool exhaustion, 200 concurrent episodes."""

from __future__ import annotations

import asyncio

import pytest
from fakes.procs import free_port, slots, start_fake_shopsim, stop
from fakes.shop_fixture import write_shop_fixture

from pyhelpers.shopsim import actions, protocol
from pyhelpers.shopsim.client import ShopSimClient

# ---------------------------------------------------------------------------- protocol (no transport)


def test_errors_arrive_as_http_200_results():
    with pytest.raises(protocol.NoSlotError):
        protocol.parse_reset({"result": {"error": protocol.NO_SLOT_ERROR}})
    with pytest.raises(protocol.ProbeOK):
        protocol.result_of({"result": {"error": protocol.PROBE_ERROR}}, "probe")
    with pytest.raises(protocol.ShopSimError, match="list index out of range") as exc:
        protocol.parse_interact({"result": {"error": "list index out of range"}})
    assert type(exc.value) is protocol.ShopSimError and exc.value.server_message == "list index out of range"
    with pytest.raises(protocol.ProtocolError):
        protocol.parse_reset({"oops": 1})
    with pytest.raises(protocol.ProtocolError):
        protocol.parse_reset({"result": {"env_idx": True, "idx": 1, "instruction": "x"}})
    assert protocol.parse_probe({"result": {"error": protocol.PROBE_ERROR}}) and not protocol.parse_probe({"result": {"message": "x"}})
    assert protocol.probe_payload() == {"action": "release_one"} and "env_idx" not in protocol.reset_payload(3)
    with pytest.raises(ValueError):
        protocol.interact_payload(True, "x")


def test_scores_from_reward_detail():
    detail = {"r_type": 1.0, "r_att": 1.0, "r_option": 1.0, "r_price": True}
    step = protocol.parse_interact({"result": {"done": True, "reward": 1.0, "instruction": "", "env_idx": 0,
                                        "reward_detail": detail, "over": True}})
    assert step.scores.success and step.scores.strict == 1.0 and step.over
    s = protocol.parse_scores(0.6, {**detail, "r_att": 0.5, "r_price": False})
    assert (s.loose, s.strict, s.success) == (0.6, 0.0, False) and s.value("success") == 0.0
    half = protocol.parse_scores(0.7, {**detail, "r_type": 0.5})
    assert half.value("strict") == 0.5 and half.value("loose") == 0.7
    assert protocol.parse_scores(0, {}) == protocol.ZERO_SCORES
    with pytest.raises(ValueError):
        s.value("bogus")


@pytest.mark.parametrize("text, server, wire", [
    ("Thought: x\nAction: search[红色 连衣裙]", "search[红色 连衣裙]", None),
    ("Thought: x\n\nAction: click[Buy Now]\nthanks", "click[buy now]", None),
    ("Action: search[abc]", None, "search[abc]"),            # no "\n" before Action: upstream no-op
    ("Thought: a\nAction:click[b0]", None, "click[b0]"),
    ("<think>maybe\nAction: search[q]</think>\nThought: ok\nAction: click[b0]", "search[q]", "click[b0]"),
    ("Thought: t\naction：click[123]", None, "click[123]"),
    ("Thought: nothing to do", None, None),
    ("Thought: t\nAction: buy[x]", None, None),
])
def test_actions_as_pack_api_parses_them(text, server, wire):
    got = actions.extract_action(text)
    assert (str(got) if got else None) == server
    sent = actions.wire_response(text)
    expected = wire or server
    assert (str(actions.extract_action(sent)) if actions.extract_action(sent) else None) == expected
    if wire is None:
        assert sent == text  # parseable (or hopeless) text goes raw
    assert actions.wire_response(text, normalize=False) == text


def test_format_helpers():
    assert actions.format_response("找鞋", "search", "白色 运动鞋") == "Thought: 找鞋\nAction: search[白色 运动鞋]"
    with pytest.raises(ValueError):
        actions.format_action("buy", "x")
    assert actions.clickables('x\n\n可点击的按钮: ["a", "b"]') == ["a", "b"]
    assert actions.persona_observation("Instruction: [SEP] full [SEP] rest", "vague") == "Instruction: [SEP] vague [SEP] rest"


# ---------------------------------------------------------------------------- client vs the fake process

@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    return write_shop_fixture(tmp_path_factory.mktemp("shop"), n_tasks=8, n_eval=4)


@pytest.fixture(scope="module")
def shop(fixture_dir):
    proc = start_fake_shopsim(fixture_dir["server_file"], slots=48, seed=1, retries=2, delay=0.05)
    yield proc
    stop(proc)


def _free(shop) -> int:
    return slots(shop)["free"]


def run(coro):
    return asyncio.run(coro)


@pytest.mark.heavy  # a fake ShopSimulator process
def test_reset_interact_release_and_probe(shop, fixture_dir):
    async def go():
        async with ShopSimClient(shop.url) as c:
            assert await c.probe()
            r = await c.reset(0)
            assert protocol.goal_instruction(r.instruction) == fixture_dir["tasks"][0]["instruction"] and r.idx == 0
            assert await c.release_one(r.env_idx)
            async with c.episode_slot(0) as slot:  # the only way to step a slot
                step = await slot.interact("Action: search[款式000]")  # repaired on the wire
                assert not step.done and "可点击的按钮" in step.observation and actions.clickables(step.observation)
    run(go())
    view = slots(shop)
    assert view["free"] == 48 and view["counts"]["probe"] >= 2


def test_probe_false_when_nothing_listens():
    async def go():
        async with ShopSimClient("http://127.0.0.1:9", connect_retries=0) as c:
            return await c.probe(timeout=1)
    assert run(go()) is False


@pytest.mark.heavy  # a fake ShopSimulator process
def test_slot_released_on_exception_timeout_and_cancellation(shop):
    async def go():
        async with ShopSimClient(shop.url) as c:
            with pytest.raises(RuntimeError):
                async with c.episode_slot(1):
                    raise RuntimeError("policy crashed")
            assert _free(shop) == 48

            async def slow_episode():
                async with c.episode_slot(2) as slot:
                    await slot.interact("Thought: t\nAction: search[款式001]")
                    await asyncio.sleep(30)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(slow_episode(), 0.3)
            task = asyncio.ensure_future(slow_episode())
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await c.drain() == 0
            assert _free(shop) == 48 and not c.held
    run(go())


@pytest.mark.heavy  # a fake ShopSimulator process
def test_no_double_release_after_over(shop, fixture_dir):
    t = fixture_dir["tasks"][0]
    before = slots(shop)["counts"]

    async def go():
        async with ShopSimClient(shop.url) as c:
            async with c.episode_slot(0) as slot:
                await slot.interact(actions.format_response("搜", "search", t["query"]))
                await slot.interact(actions.format_response("点", "click", t["asin"]))
                await slot.interact(actions.format_response("选", "click", t["options"][0]))
                step = await slot.interact(actions.format_response("买", "click", "buy now"))
                assert step.done and step.over and step.scores.success, step.reward_detail
            assert slot.over and not slot.released
    run(go())
    after = slots(shop)["counts"]
    assert after["release_one"] == before["release_one"] and after["auto_release"] == before["auto_release"] + 1
    assert _free(shop) == 48


@pytest.mark.heavy  # a fake ShopSimulator process
@pytest.mark.parametrize("fence", [True, False], ids=["fenced", "unfenced"])
def test_a_500_after_over_never_frees_the_slot_another_episode_took_since(fixture_dir, fence):
    """Issue 40 item 16: pack_api frees the slot of an episode-ending interact (pack_api.py:112-113)
    before it serialises the answer (:120, outside its try); when that fails Flask answers 500 and
    the client never sees the `over`. Another episode may take the freed slot before this one
    exits: the exit must not release it (seen against the real server: another episode's slot
    freed). Behind the launcher's fence the simulator tells (the slot's lease); without
    it the client cannot, so it leaves the slot to free_unknown()."""
    t = fixture_dir["tasks"][0]
    small = start_fake_shopsim(fixture_dir["server_file"], slots=1, seed=1, retries=2, delay=0.05,
                               args=["--fail-over-once", str(t["idx"])], fence=fence)
    try:
        async def go():
            async with ShopSimClient(small.url, pool_size=1) as c:
                async with c.episode_slot(t["idx"]) as mine:
                    for kind, arg in (("search", t["query"]), ("click", t["asin"]), ("click", t["options"][0])):
                        await mine.interact(actions.format_response("t", kind, arg))
                    with pytest.raises(protocol.HTTPStatusError, match="HTTP 500"):
                        await mine.interact(actions.format_response("买", "click", "buy now"))
                    theirs = await c.reset(1)  # another episode takes the slot the server freed
                    assert theirs.env_idx == mine.env_idx
                return c.unknown_slots, mine.released
        unknown, released = run(go())
        view = slots(small)
        assert view["taken"] == [0] and view["counts"]["release_one"] == 0, view  # theirs, still held
        assert not released and unknown == (0 if fence else 1)
    finally:
        stop(small)


@pytest.mark.heavy  # a fake ShopSimulator process
def test_a_slot_once_freed_cannot_be_stepped_again(shop):
    """Issue 40 item 18: pack_api steps whatever env_idx it is given, held or free (pack_api.py:109):
    an interact on a slot that was freed acts in the episode that holds it next, and answers a real
    step. Only an EpisodeSlot steps a slot, and it refuses once its slot is gone; the fence refuses
    a lease pack_api no longer holds even to a raw request."""
    before = slots(shop)["counts"]["interact"]

    async def go():
        async with ShopSimClient(shop.url) as c:
            async with c.episode_slot(0) as slot:
                pass
            assert slot.released
            with pytest.raises(protocol.ShopSimError, match="episode slot is closed"):
                await slot.interact("Thought: t\nAction: search[x]")
            assert not hasattr(c, "interact"), "ShopSimClient.interact steps any slot number, freed or not"
            with pytest.raises(protocol.FreedSlotError):  # the private request, with the slot's old lease
                await c._interact(slot.env_idx, "Thought: t\nAction: search[x]", instance=slot.reset.instance,
                                  lease=slot.lease)
    run(go())
    assert slots(shop)["counts"]["interact"] == before


@pytest.mark.heavy  # fake ShopSimulator processes
def test_pool_exhaustion_gives_no_slot_error_and_cancelled_reset_still_releases(fixture_dir):
    small = start_fake_shopsim(fixture_dir["server_file"], slots=1, seed=1, retries=3, delay=0.05)
    # The same pool, waiting for a slot longer than any test runs: the cancelled reset below must
    # still be waiting when the holder's release arrives, however late a loaded machine sends it.
    patient = start_fake_shopsim(fixture_dir["server_file"], slots=1, seed=1, retries=100_000, delay=0.05)
    try:
        async def go():
            async with ShopSimClient(small.url) as c:
                async with c.episode_slot(0):
                    with pytest.raises(protocol.NoSlotError):
                        await c.reset(1)  # server waited retries x delay, then refused
                    assert _free(small) == 0
                assert _free(small) == 1
            # A reset cancelled while the server waits for a slot may still get one later.
            async with ShopSimClient(patient.url) as c:
                holder = await c.reset(0)
                waiting = asyncio.ensure_future(c.episode_slot(1).__aenter__())
                await _until(lambda: slots(patient)["waiting"] == 1, "the second reset waits for a slot, server-side")
                waiting.cancel()
                await c.release_one(holder.env_idx)  # the waiting reset now pops it, server-side
                assert await c.drain() == 0  # its release, once the server's answer came
            assert _free(patient) == 1
            assert slots(patient)["counts"]["reset"] == 2  # the cancelled reset did get a slot
        run(go())
    finally:
        stop(small)
        stop(patient)


async def _until(cond, what: str, bound_s: float = 120.0) -> None:
    """Wait for cond() (a blocking call: asked off the event loop, which must go on serving the
    client); the bound only stops a test that would otherwise hang."""
    loop = asyncio.get_running_loop()
    end = loop.time() + bound_s
    while not await asyncio.to_thread(cond):
        assert loop.time() < end, f"never happened: {what}"
        await asyncio.sleep(0.01)


@pytest.mark.heavy  # a fake ShopSimulator process
def test_200_concurrent_episodes_share_one_client_without_leaking(shop, fixture_dir):
    tasks = fixture_dir["tasks"]

    cancelled = [n for n in range(200) if n % 7 == 0 and n % 5]
    parked: list[int] = []  # episodes holding a slot, mid-episode, until cancelled
    all_parked = asyncio.Event()

    async def episode(c, n):
        t = tasks[n % len(tasks)]
        async with c.episode_slot(t["idx"]) as slot:
            await slot.interact(actions.format_response("搜", "search", t["query"]))
            if n % 5 == 0:
                raise ValueError("injected policy error")
            if n % 7 == 0:
                parked.append(n)
                if len(parked) == len(cancelled):
                    all_parked.set()
                await asyncio.Event().wait()  # until cancelled below
            await slot.interact(actions.format_response("点", "click", t["asin"]))
            await slot.interact(actions.format_response("选", "click", t["options"][0]))
            return (await slot.interact(actions.format_response("买", "click", "buy now"))).scores.success

    async def go():
        async with ShopSimClient(shop.url, max_slots=48) as c:
            jobs = [asyncio.ensure_future(episode(c, n)) for n in range(200)]
            await all_parked.wait()  # each one to be cancelled holds its slot, mid-episode
            for n in cancelled:
                jobs[n].cancel()
            results = await asyncio.gather(*jobs, return_exceptions=True)
            assert await c.drain() == 0
            return results
    results = run(go())
    assert sum(r is True for r in results) == len([n for n in range(200) if n % 5 and n % 7])
    assert sum(isinstance(r, ValueError) for r in results) == 40
    view = slots(shop)
    assert view["free"] == 48 and view["taken"] == [], view


# ---------------------------------------------------------------------------- slots a failed reset takes (issue 17 §4)

@pytest.mark.heavy  # a fake ShopSimulator process
def test_reset_answers_the_instruction_as_the_server_page_shows_it(shop, fixture_dir):
    """pack_api's reset `instruction` is the index page's `#instruction-text h4` text (shop_agent.py:38,
    search_page.html:18): "Instruction: " then the goal's text. goal_instruction() takes the prefix off."""
    async def go():
        async with ShopSimClient(shop.url) as c:
            async with c.episode_slot(0) as slot:
                return slot.reset.instruction
    got = run(go())
    assert got == "Instruction: " + fixture_dir["tasks"][0]["instruction"]
    assert protocol.goal_instruction(got) == fixture_dir["tasks"][0]["instruction"]


@pytest.mark.heavy  # a fake ShopSimulator process
def test_a_bad_task_index_pops_a_slot_first_and_the_client_counts_it_unknown(fixture_dir):
    """Upstream pops a slot (pack_api.py:98), then the reset raises IndexError (SimServer.receive's
    self.goals[idx]) and the slot stays taken (pack_api.py:116-118). The fake does the same; the
    client calls it a BadTaskIndex (a task error, not an infra one) and counts one unknown slot,
    which free_unknown() gives back once nothing of the client is in flight."""
    small = start_fake_shopsim(fixture_dir["server_file"], slots=3, seed=1, retries=2, delay=0.05)
    try:
        async def go():
            async with ShopSimClient(small.url, pool_size=3) as c:
                with pytest.raises(protocol.BadTaskIndex, match="list index out of range"):
                    async with c.episode_slot(999):
                        pass
                # two resets (the second tells a bad task from a bad slot), each popped one
                assert c.unknown_slots == 2 and not c.held
                assert slots(small)["taken"] != [] and _free(small) == 1  # popped, then failed
                with pytest.raises(protocol.NoSlotError):  # a refusal takes nothing
                    async with c.episode_slot(0), c.episode_slot(1):
                        pass
                assert c.unknown_slots == 2
                async with c.episode_slot(0):
                    assert await c.free_unknown() == 0  # an episode is in flight: not now
                assert await c.free_unknown() == 2 and c.unknown_slots == 0
            assert _free(small) == 3
        run(go())
    finally:
        stop(small)


@pytest.mark.heavy  # a fake ShopSimulator process
def test_release_one_refuses_an_index_beyond_the_pool(fixture_dir):
    """pack_api.py:81-83 adds ANY int to the free set; a later reset can pop it and fail on
    envs[idx] (pack_api.py:109), taking it again. The client never sends one."""
    small = start_fake_shopsim(fixture_dir["server_file"], slots=2, seed=1, retries=2, delay=0.05)
    try:
        async def go():
            async with ShopSimClient(small.url, pool_size=2) as c:
                with pytest.raises(ValueError, match="beyond the pool"):
                    await c.release_one(2)
                assert await c.release_one(1)  # in the pool: fine ("already free")
        run(go())
        assert slots(small)["counts"]["release_one"] == 1
    finally:
        stop(small)


def test_probe_answered_by_another_http_server_says_so_at_once():
    """Something that is not ShopSimulator on the port (HTTP 404 for /api/shop_agent) is not a
    simulator still building its envs: the probe says so instead of waiting."""
    from fakes.other_http import other_http_server

    async def go(url):
        async with ShopSimClient(url) as c:
            await c.probe(timeout=2)
    with other_http_server() as url, pytest.raises(protocol.NotShopSim, match="HTTP 404.*not ShopSimulator"):
        run(go(url))


def test_service_probe_and_cli_name_a_server_that_is_not_shopsimulator(toolkit_env):
    from conftest import run_pyhelpers
    from fakes.other_http import other_http_server

    from pyhelpers.errors import ToolkitError
    from pyhelpers.launch import services

    with other_http_server() as url:
        with pytest.raises(ToolkitError, match="not ShopSimulator.*SHOPSIM_PORT"):
            services._shopsim_probe(url)()  # raised: the readiness wait stops at once
        r = run_pyhelpers(["shopsim", "probe", "--url", url], toolkit_env)
        assert r.returncode == 1 and "not ShopSimulator" in r.stderr and "Traceback" not in r.stderr


def test_check_reset_compares_instruction_then_goal_options():
    from pyhelpers.shopsim.taskcheck import TaskError, check_reset

    task = {"task_id": "t1", "shopsim_idx": 4, "instruction": "买红色连衣裙", "goal_options": ["红色"]}

    def reset(text, options):
        return protocol.ResetResult(env_idx=0, idx=4, instruction=text, goal_options=options)

    check_reset(task, reset("Instruction: 买红色连衣裙", ["红色"]))
    check_reset({k: v for k, v in task.items() if k != "goal_options"}, reset("Instruction: 买红色连衣裙", ["蓝色"]))
    with pytest.raises(TaskError, match=r"t1 \(shopsim_idx 4\).*'买蓝色连衣裙'.*'买红色连衣裙'.*--server-file"):
        check_reset(task, reset("Instruction: 买蓝色连衣裙", ["红色"]))
    with pytest.raises(TaskError, match="goal options.*蓝色.*红色"):  # same text, another goal
        check_reset(task, reset("Instruction: 买红色连衣裙", ["蓝色"]))


@pytest.mark.heavy  # a fake ShopSimulator process
def test_a_stage_frees_every_slot_a_killed_client_left_and_records_it(toolkit_env, tmp_path, fixture_dir):
    """The train and evaluate stages free the pool before anything plays: a killed job or a reset
    that failed after the pop leaves slots taken that nobody can name (issue 17 §4)."""
    from pyhelpers.config.load import load
    from pyhelpers.launch import services
    from pyhelpers.run import events
    from pyhelpers.run.layout import RunLayout

    small = start_fake_shopsim(fixture_dir["server_file"], slots=3, seed=1, retries=1, delay=0.05)
    try:
        async def leak():
            async with ShopSimClient(small.url) as c:
                await c.reset(0)  # never released: as a killed client leaves it
                with pytest.raises(protocol.BadTaskIndex):
                    await c.reset(999)
        run(leak())
        assert _free(small) == 0  # one held, two popped by the two resets of 999
        cfg = load({**toolkit_env, "SHOPSIM_HOST": "127.0.0.1", "SHOPSIM_PORT": str(small.port)})
        lay = RunLayout(tmp_path / "run", tmp_path / "save", 2)
        lay.run_dir.mkdir(parents=True)
        said = services.free_all_slots(cfg, lay, "train", 3)
        assert "All environments" in said and _free(small) == 3
        got = [e for e in events.read(lay.run_dir) if e["kind"] == "shopsim-slots-freed"]
        assert [(e["stage"], e["round"]) for e in got] == [("train", 3)]
    finally:
        stop(small)


@pytest.mark.heavy  # a fake ShopSimulator process
def test_a_slot_from_before_a_restart_never_reaches_the_new_simulators_env(fixture_dir):
    """An episode whose slot came from the simulator before a restart must not act in the restarted
    simulator's env of the same number, which another episode may hold by then: however late the
    client learns of the restart (a busy machine), the interact is refused before it acts."""
    port = free_port()
    old = start_fake_shopsim(fixture_dir["server_file"], slots=4, seed=1, retries=2, delay=0.05, port=port)

    async def go():
        async with ShopSimClient(old.url) as c:
            async with c.episode_slot(0) as mine:
                stop(old)  # the simulator restarts while this episode is generating ...
                new = start_fake_shopsim(fixture_dir["server_file"], slots=4, seed=1, retries=2, delay=0.05,
                                         port=port)
                try:
                    theirs = await c.reset(1)  # ... and another episode takes the same number
                    assert theirs.env_idx == mine.env_idx
                    with pytest.raises(protocol.StaleSlotError):
                        await mine.interact("Thought: t\nAction: click[buy now]")
                    assert mine.over  # the number is the other episode's now: never released by us
                    return slots(new)
                finally:
                    stop(new)
    view = run(go())
    assert view["counts"]["interact"] == 0, "the old episode acted in the other episode's env"
    assert view["counts"]["release_one"] == 0 and len(view["taken"]) == 1  # only the other episode's


FLASK_400 = ("<!doctype html>\n<html lang=en>\n<title>400 Bad Request</title>\n<h1>Bad Request</h1>\n<p>The browser "
             "(or proxy) sent a request that this server could not understand.</p>\n")
FLASK_415 = ("<!doctype html>\n<html lang=en>\n<title>415 Unsupported Media Type</title>\n<h1>Unsupported Media "
             "Type</h1>\n<p>Did not attempt to load JSON data because the request Content-Type was not "
             "&#39;application/json&#39;.</p>\n")
FLASK_500 = ("<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n<h1>Internal Server Error"
             "</h1>\n<p>The server encountered an internal error and was unable to complete your request.</p>\n")


@pytest.mark.parametrize("status, page, names", [
    (400, FLASK_400, "did not read the request body as JSON"),
    (415, FLASK_415, "did not read the request body as JSON"),
    (500, FLASK_500, "JSON that is not an object"),
])
def test_the_client_names_what_flask_answers_for_a_body_it_cannot_use(status, page, names):
    """What pack_api's Flask answers when the body is not a JSON object reaches the user as what
    it means, not as "HTTP 400 from …: <!doctype html>"."""
    import httpx

    def answer(request):
        return httpx.Response(status, text=page, headers={"Content-Type": "text/html; charset=utf-8"})

    async def go():
        async with ShopSimClient("http://127.0.0.1:9", transport=httpx.MockTransport(answer)) as c:
            with pytest.raises(protocol.HTTPStatusError) as err:
                await c.reset(3)
            return str(err.value)
    msg = run(go())
    assert f"HTTP {status}" in msg and names in msg and "<!doctype" not in msg, msg


def test_the_client_names_no_json_data_provided():
    """Werkzeug 2.0.3 (wrappers/request.py:580-581) hands pack_api None for a body without a JSON
    Content-Type: pack_api.py:61-64 answers 200 "No JSON data provided"."""
    import httpx

    def answer(request):
        return httpx.Response(200, json={"result": {"error": "No JSON data provided"}})

    async def go():
        async with ShopSimClient("http://127.0.0.1:9", transport=httpx.MockTransport(answer)) as c:
            with pytest.raises(protocol.ShopSimError) as err:
                await c.reset(3)
            return str(err.value)
    msg = run(go())
    assert "No JSON data provided" in msg and "Content-Type" in msg, msg


# Werkzeug 2.0.3's page (exceptions.py:176-181 get_body): the same title, another doctype
FLASK_500_WZ203 = ('<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN">\n<title>500 Internal Server Error</title>'
                   "\n<h1>Internal Server Error</h1>\n<p>The server encountered an internal error and was unable to "
                   "complete your request.</p>\n")
FIX_OF_STATUS = {400: "SHOPSIM_LAUNCHER", 415: "SHOPSIM_LAUNCHER", 500: "shopsim.log"}


@pytest.mark.parametrize("status, page, fenced", [
    (400, FLASK_400, False), (415, FLASK_415, False), (500, FLASK_500, False), (500, FLASK_500_WZ203, False),
    (500, FLASK_500, True),  # through the launcher's fence: its header names the instance
], ids=["400", "415", "500", "500-werkzeug-2.0.3", "500-fenced"])
def test_a_probe_answered_by_shopsimulators_flask_with_an_error_says_so_at_once(status, page, fenced, toolkit_env):
    """Issue 40 item 15: ShopSimulator's own Flask answering its 400/415/500 page is ShopSimulator
    answering with an error, not "another program": the readiness probe, the launcher's wait and
    `pyhelpers shopsim probe` say what it answered and point at its cause, and stop at once."""
    from conftest import run_pyhelpers
    from fakes.other_http import answering_server

    from pyhelpers.errors import ToolkitError
    from pyhelpers.launch import services

    headers = ((protocol.INSTANCE_HEADER, "f00d"),) if fenced else ()
    with answering_server(status, page, "text/html; charset=utf-8", headers) as url:
        with pytest.raises(ToolkitError) as err:
            services._shopsim_probe(url)()  # raised: the readiness wait stops at once
        cli = run_pyhelpers(["shopsim", "probe", "--url", url], toolkit_env)
    for said in (str(err.value), cli.stderr):
        assert f"HTTP {status}" in said and "ShopSimulator answered" in said, said
        assert "not ShopSimulator" not in said and "another program" not in said, said
        assert FIX_OF_STATUS[status] in said and "<title>" not in said, said
    assert cli.returncode == 1 and "Traceback" not in cli.stderr


def test_a_probe_answered_no_json_data_provided_fails_at_once_instead_of_waiting(toolkit_env):
    """Issue 40 item 17: Werkzeug 2.0.3 hands pack_api None for a body it did not read as JSON and
    pack_api answers 200 "No JSON data provided" (pack_api.py:61-64): ShopSimulator is up and will
    answer every probe so, so the readiness wait must stop at once, not run SHOPSIM_START_TIMEOUT."""
    import json

    from conftest import run_pyhelpers
    from fakes.other_http import answering_server

    from pyhelpers.errors import ToolkitError
    from pyhelpers.launch import services

    body = json.dumps({"result": {"error": protocol.NO_JSON_ERROR}})
    with answering_server(200, body, "application/json") as url:
        with pytest.raises(ToolkitError) as err:
            services._shopsim_probe(url)()
        cli = run_pyhelpers(["shopsim", "probe", "--url", url], toolkit_env)
    for said in (str(err.value), cli.stderr):
        assert "ShopSimulator answered" in said and protocol.NO_JSON_ERROR in said and "SHOPSIM_LAUNCHER" in said, said
    assert cli.returncode == 1 and "Traceback" not in cli.stderr


def test_a_poisoned_free_list_is_named_as_the_pools_not_the_tasks(fixture_dir):
    """Another client's release_one of 99 puts 99 in pack_api's free set (pack_api.py:81-83); the
    reset that pops it fails on envs[99] (:109) with the same 'list index out of range' a task
    index beyond the goal list gives. Task 1 exists: the client must not call it a bad task."""
    from fakes.procs import _post

    shop = start_fake_shopsim(fixture_dir["server_file"], slots=2, seed=1, retries=100_000, delay=0.05)
    api = shop.url + protocol.API_PATH
    try:
        held = [_post(api, {"action": "reset", "idx": 0})["result"]["env_idx"] for _ in range(2)]  # another user
        _post(api, {"action": "release_one", "env_idx": 99})  # ... poisons the free list

        async def go():
            async with ShopSimClient(shop.url, pool_size=2) as c:
                async def free_one_after_the_pop():
                    while slots(shop)["counts"]["bad_slot"] < 1:
                        await asyncio.sleep(0.02)
                    await asyncio.to_thread(_post, api, {"action": "release_one", "env_idx": held[0]})
                helper = asyncio.ensure_future(free_one_after_the_pop())
                async with c.episode_slot(1) as slot:
                    assert slot.reset.idx == 1 and slot.env_idx == held[0]
                await helper
                return c.pool_errors, c.unknown_slots
        assert run(go()) == (1, 0)  # the popped 99 was no real slot: nothing unknown to free
    finally:
        stop(shop)


def _scripted(*answers):
    import httpx

    queue = list(answers)

    def answer(request):
        return httpx.Response(200, json={"result": queue.pop(0)})
    return httpx.MockTransport(answer)


RESET_OK = {"instruction": "Instruction: x", "env_idx": 1, "idx": 6, "message": "Task 6 started"}
INDEX_ERROR = {"error": "list index out of range"}


def test_an_index_error_that_repeats_names_both_causes():
    async def go():
        async with ShopSimClient("http://127.0.0.1:9", transport=_scripted(INDEX_ERROR, INDEX_ERROR)) as c:
            with pytest.raises(protocol.BadTaskIndex) as err:
                await c.reset(6)
            return str(err.value), c.unknown_slots
    msg, unknown = run(go())
    assert "task index 6" in msg and "beyond its pool" in msg and "release_one" in msg, msg
    assert unknown == 1  # the first reset's slot; the caller counts the second's


def test_an_index_error_then_no_slot_counts_the_first_pop():
    """Not a NoSlotError (which means "nothing taken"): the first reset may have popped a real slot."""
    async def go():
        no_slot = {"error": protocol.NO_SLOT_ERROR}
        async with ShopSimClient("http://127.0.0.1:9", transport=_scripted(INDEX_ERROR, no_slot)) as c:
            with pytest.raises(protocol.ShopSimError) as err:
                async with c.episode_slot(6):
                    pass
            return err.value, c.unknown_slots
    err, unknown = run(go())
    assert not isinstance(err, protocol.NoSlotError) and "no free slot for a second reset" in str(err)
    assert unknown == 1
