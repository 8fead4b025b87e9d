"""Client-side protocol features against a real MCP server (stdio, both eras, and HTTP):
progress, elicitation, sampling, logging, roots, content order and annotations, clientInfo."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from toolnexus import Progress, ServerRequest, ToolContext, acreate_toolkit, tool
from toolnexus.base import ImagePart, TextPart
from toolnexus.errors import ManifestError

from .conftest import manifest, stdio_entry

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["legacy", "modern", "http"])
def entry(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "http":
        return {"url": request.getfixturevalue("http_url")}
    return stdio_entry(legacy=request.param == "legacy")


async def test_progress_reaches_the_call_callback(entry: dict[str, Any]) -> None:
    seen: list[Progress] = []
    async with await acreate_toolkit(manifest(f=entry)) as tk:
        result = await tk.aexecute("work", {"steps": 3}, progress=seen.append, call_id="c1")
    assert result.content == "did 3 steps"
    assert [(p.progress, p.total, p.message) for p in seen] == [
        (1, 3, "step 1"),
        (2, 3, "step 2"),
        (3, 3, "step 3"),
    ]
    assert {(p.call_id, p.tool_name) for p in seen} == {("c1", "work")}


async def test_progress_callback_that_raises_does_not_break_the_call() -> None:
    def broken(progress: Progress) -> None:
        raise RuntimeError("boom")

    async with await acreate_toolkit(manifest(f=stdio_entry())) as tk:
        result = await tk.aexecute("work", {"steps": 2}, progress=broken)
    assert not result.is_error and result.content == "did 2 steps"


async def test_reset_timeout_on_progress_keeps_a_progressing_call_alive() -> None:
    slow = {"steps": 4, "pause": 0.4}
    plain = stdio_entry(timeout=1.0)
    resetting = stdio_entry(timeout=1.0, reset_timeout_on_progress=True)
    async with await acreate_toolkit(manifest(a=plain, b={**resetting, "prefix": "b_"})) as tk:
        timed_out = await tk.aexecute("work", slow)
        kept = await tk.aexecute("b_work", slow)
    assert timed_out.is_error and "1 s" in timed_out.content
    assert not kept.is_error and kept.content == "did 4 steps"


async def test_max_total_timeout_bounds_a_progressing_call() -> None:
    bounded = stdio_entry(timeout=1.0, reset_timeout_on_progress=True, max_total_timeout=1.0)
    async with await acreate_toolkit(manifest(f=bounded)) as tk:
        result = await tk.aexecute("work", {"steps": 6, "pause": 0.4})
        after = await tk.aexecute("work", {"steps": 1})
    assert result.is_error and result.metadata["error_type"] == "ToolTimeout"
    assert after.content == "did 1 steps"  # the session survived the cancelled call


@pytest.mark.parametrize("legacy", [True])
async def test_elicitation_form_and_url_reach_the_handler(legacy: bool) -> None:
    asked: list[ServerRequest] = []

    async def elicit(request: ServerRequest) -> dict[str, str]:
        asked.append(request)
        return {"name": "Ada"}

    async with await acreate_toolkit(manifest(f=stdio_entry(legacy)), elicitation=elicit) as tk:
        form = await tk.aexecute("ask_name", {}, call_id="q1")
        url = await tk.aexecute("ask_url", {}, call_id="q2")
    assert form.content == "hello Ada"
    assert url.content == "url answer: accept"
    assert [(r.server, r.call_id, r.tool_name, r.params.mode) for r in asked] == [
        ("f", "q1", "ask_name", "form"),
        ("f", "q2", "ask_url", "url"),
    ]
    assert asked[1].params.url == "https://example.test/login"


async def test_an_accepted_form_gets_the_schema_defaults_of_the_fields_it_left_out() -> None:
    async with await acreate_toolkit(
        manifest(f=stdio_entry()), elicitation=lambda r: {"name": "Ada", "count": 5}
    ) as tk:
        filled = await tk.aexecute("ask_prefs", {})
        empty = await tk.aexecute("ask_prefs", {}, elicitation=lambda r: {})
        declined = await tk.aexecute("ask_prefs", {}, elicitation=lambda r: None)
    # Given fields are kept as given; omitted ones with a default get it; others stay out.
    assert filled.content == "accept: [('color', 'blue'), ('count', 5), ('name', 'Ada'), " \
        "('notify', False)]"  # fmt: skip
    assert empty.content == "accept: [('color', 'blue'), ('count', 3), ('notify', False)]"
    assert declined.content == "decline: []"


async def test_a_url_elicitation_required_error_is_offered_and_the_call_sent_again() -> None:
    asked: list[ServerRequest] = []

    def accept(request: ServerRequest) -> dict[str, str]:
        asked.append(request)
        return {}

    async with await acreate_toolkit(manifest(f=stdio_entry()), elicitation=accept) as tk:
        done = await tk.aexecute("needs_url", {"key": "k1"}, call_id="c1")
        refused = await tk.aexecute("needs_url", {"key": "k2"}, elicitation=lambda r: None)
    assert done.content == "connected k1" and not done.is_error
    assert [(r.params.mode, r.params.url, r.call_id) for r in asked] == [
        ("url", "https://example.test/connect", "c1")
    ]
    assert refused.is_error and "open a page first" in refused.content


async def test_per_call_handler_overrides_the_toolkit_one() -> None:
    async with await acreate_toolkit(
        manifest(f=stdio_entry()), elicitation=lambda r: {"name": "toolkit"}
    ) as tk:
        mine = await tk.aexecute("ask_name", {}, elicitation=lambda r: {"name": "call"})
        theirs = await tk.aexecute("ask_name", {})
        declined = await tk.aexecute("ask_name", {}, elicitation=lambda r: None)
    assert (mine.content, theirs.content) == ("hello call", "hello toolkit")
    assert declined.content == "no name: decline"


async def test_without_a_handler_the_capability_is_not_declared_and_the_call_is_refused() -> None:
    async with await acreate_toolkit(manifest(f=stdio_entry())) as tk:
        asked = await tk.aexecute("ask_name", {})
        sampled = await tk.aexecute("summarize", {"text": "x"})
        still = await tk.aexecute("work", {"steps": 1})
    assert asked.is_error and "elicitation" in asked.content.lower()
    assert sampled.is_error and "sampling" in sampled.content.lower()
    assert still.content == "did 1 steps"


async def test_capabilities_are_declared_only_for_the_handlers_given(
    entry: dict[str, Any],
) -> None:
    async with await acreate_toolkit(manifest(f=entry)) as bare:
        none = await bare.aexecute("capabilities", {})
    async with await acreate_toolkit(manifest(f=entry), sampling=lambda r: "x") as some:
        sampling = await some.aexecute("capabilities", {})
    async with await acreate_toolkit(
        manifest(f=entry), sampling=lambda r: "x", elicitation=lambda r: None
    ) as both:
        everything = await both.aexecute("capabilities", {})
    assert none.content == "roots"
    assert sampling.content == "sampling,roots"
    assert everything.content == "elicitation,sampling,roots"


async def test_a_handler_that_raises_gives_an_error_result_and_the_toolkit_keeps_serving() -> None:
    def broken(request: ServerRequest) -> Any:
        raise ValueError("no user here")

    async with await acreate_toolkit(
        manifest(f=stdio_entry()), elicitation=broken, sampling=broken
    ) as tk:
        asked = await tk.aexecute("ask_name", {})
        sampled = await tk.aexecute("summarize", {"text": "x"})
        after = await tk.aexecute("work", {"steps": 1})
    assert asked.is_error and "no user here" in asked.content
    assert sampled.is_error and "no user here" in sampled.content
    assert after.content == "did 1 steps"


async def test_sampling_reaches_the_handler() -> None:
    seen: list[ServerRequest] = []

    async def sample(request: ServerRequest) -> str:
        seen.append(request)
        await asyncio.sleep(0)
        return "a short summary"

    async with await acreate_toolkit(manifest(f=stdio_entry()), sampling=sample) as tk:
        result = await tk.aexecute("summarize", {"text": "long text"})
    assert result.content == "model toolnexus-sampling said: a short summary"
    assert seen[0].params.max_tokens == 50
    assert seen[0].params.messages[0].content.text == "Summarize: long text"


async def test_server_logs_go_to_python_logging(
    entry: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="toolnexus.mcp.f")
    async with await acreate_toolkit(manifest(f={**entry, "log_level": "debug"})) as tk:
        await tk.aexecute("chatty", {})
    records = [
        (r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name == "toolnexus.mcp.f"
    ]
    assert ("toolnexus.mcp.f", logging.INFO, "an info line") in records
    assert ("toolnexus.mcp.f", logging.WARNING, "a warning line") in records
    assert ("toolnexus.mcp.f", logging.ERROR, '{"code": 7}') in records


async def test_roots_are_the_workspace_and_the_manifest_roots(tmp_path: Any) -> None:
    extra = tmp_path / "data"
    extra.mkdir()
    spec = {**manifest(f=stdio_entry()), "roots": [str(extra)], "workspace": str(tmp_path)}
    async with await acreate_toolkit(spec) as tk:
        result = await tk.aexecute("my_roots", {})
    assert result.content.splitlines() == [tmp_path.resolve().as_uri(), extra.resolve().as_uri()]


async def test_a_reload_that_changes_roots_tells_the_kept_session(tmp_path: Any) -> None:
    import json

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    path = tmp_path / "tools.json"

    def write(*roots: Any) -> None:
        spec = {**manifest(f=stdio_entry()), "roots": [str(r) for r in roots]}
        path.write_text(json.dumps(spec))

    write(first)
    async with await acreate_toolkit(path) as tk:
        before = await tk.aexecute("my_roots", {})
        write(first, second)
        await tk.areload()
        after = await tk.aexecute("my_roots", {})
        told = await tk.aexecute("roots_changed", {})
        for _ in range(100):  # the notification and the next call race on the server
            told = await tk.aexecute("roots_changed", {})
            if told.content != "0":
                break
            await asyncio.sleep(0.05)
        assert tk.status()["f"]["restarts"] == 0  # the same session, kept
    assert before.content.splitlines()[1:] == [first.resolve().as_uri()]
    assert after.content.splitlines()[1:] == [first.resolve().as_uri(), second.resolve().as_uri()]
    assert told.content == "1"


async def test_content_keeps_its_order_and_annotations(entry: dict[str, Any]) -> None:
    async with await acreate_toolkit(manifest(f=entry)) as tk:
        result = await tk.aexecute("mixed", {})
    assert result.content == "before"
    image, text = result.parts
    assert isinstance(image, ImagePart) and image.annotations == {
        "audience": ["user"],
        "priority": 0.9,
    }
    assert isinstance(text, TextPart) and text.text == "the image above"
    assert text.annotations == {"audience": ["assistant"]}


async def test_client_info_names_toolnexus_and_its_version(entry: dict[str, Any]) -> None:
    from importlib.metadata import version

    async with await acreate_toolkit(manifest(f=entry)) as tk:
        result = await tk.aexecute("whoami", {})
    assert result.content == f"toolnexus {version('toolnexus')}"


@pytest.mark.parametrize(
    ("key", "value"),
    [("log_level", "loud"), ("reset_timeout_on_progress", "yes"), ("max_total_timeout", -1)],
)
async def test_bad_options_are_located_errors(key: str, value: object, tmp_path: Any) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(
        f"version: 1\nmcp_servers:\n  f:\n    command: python\n    {key}: {value!r}\n".replace(
            "'", '"'
        )
    )
    with pytest.raises(ManifestError) as err:
        await acreate_toolkit(path)
    assert "tools.yaml:5" in str(err.value) and key in str(err.value)


@pytest.mark.parametrize("where", ["modern", "http"])
async def test_modern_questions_find_their_call_among_concurrent_calls(
    where: str, request: pytest.FixtureRequest
) -> None:
    server = {"url": request.getfixturevalue("http_url")} if where == "http" else stdio_entry(False)

    def answer_for(name: str) -> Any:
        async def handler(asked: ServerRequest) -> dict[str, str]:
            await asyncio.sleep(0.2)  # the calls overlap
            return {"name": f"{name}/{asked.call_id}"}

        return handler

    async with await acreate_toolkit(manifest(f=server), elicitation=answer_for("toolkit")) as tk:
        results = await asyncio.gather(
            *(
                tk.aexecute("ask_by_input", {}, call_id=f"c{i}", elicitation=answer_for(f"n{i}"))
                for i in range(3)
            )
        )
    assert [r.content for r in results] == ["hello n0/c0", "hello n1/c1", "hello n2/c2"]


async def test_legacy_questions_with_several_calls_in_flight() -> None:
    async with await acreate_toolkit(
        manifest(f=stdio_entry()), elicitation=lambda r: {"name": f"toolkit/{r.call_id}"}
    ) as tk:
        busy = asyncio.create_task(tk.aexecute("work", {"steps": 1, "pause": 3}))
        await asyncio.sleep(0.5)
        shared = await tk.aexecute("ask_name", {})
        own = await tk.aexecute("ask_name", {}, elicitation=lambda r: {"name": "mine"})
        await busy
    # the toolkit's handler answers when no running call has its own (the call is unknown)
    assert shared.content == "hello toolkit/None"
    # a per-call handler with another call running: nobody can tell who asked, so refused
    assert own.is_error and "cannot tell which of its running calls" in own.content


async def test_python_tools_report_progress_through_their_context() -> None:
    @tool
    async def crunch(n: int, ctx: ToolContext) -> str:
        """Counts to n."""
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"item {i + 1}")
        return "done"

    seen: list[Progress] = []

    async def record(p: Progress) -> None:
        seen.append(p)

    async with await acreate_toolkit(extra_tools=[crunch]) as tk:
        result = await tk.aexecute("crunch", {"n": 2}, progress=record, call_id="p1")
        quiet = await tk.aexecute("crunch", {"n": 2})  # no callback: report_progress is a no-op
    assert result.content == quiet.content == "done"
    assert [(p.progress, p.total, p.message, p.call_id) for p in seen] == [
        (1, 2, "item 1", "p1"),
        (2, 2, "item 2", "p1"),
    ]


def test_sync_execute_runs_the_progress_callback_on_the_toolkit_loop_thread() -> None:
    import threading

    from toolnexus import create_toolkit

    threads: list[str] = []
    with create_toolkit(manifest(f=stdio_entry())) as tk:
        result = tk.execute(
            "work", {"steps": 2}, progress=lambda p: threads.append(threading.current_thread().name)
        )
    assert result.content == "did 2 steps"
    assert len(threads) == 2 and threading.main_thread().name not in threads


async def test_a_hanging_progress_callback_runs_once_at_a_time_and_not_after_the_call() -> None:
    running = peak = calls = 0

    async def hang(progress: Progress) -> None:
        nonlocal running, peak, calls
        calls += 1
        running += 1
        peak = max(peak, running)
        try:
            await asyncio.sleep(3600)
        finally:
            running -= 1

    async with await acreate_toolkit(manifest(f=stdio_entry(timeout=30))) as tk:
        result = await tk.aexecute("work", {"steps": 50}, progress=hang)
        after_call = running
        await asyncio.sleep(0.2)  # any report still on its way
        later = (running, calls)
    assert result.content == "did 50 steps"
    assert peak == 1  # one task per notification used to run them all at once (50)
    assert after_call == 0 and later == (0, 1)


async def test_a_slow_progress_callback_still_gets_every_report_in_order() -> None:
    seen: list[float] = []

    async def slow(progress: Progress) -> None:
        await asyncio.sleep(0.01)
        seen.append(progress.progress)

    async with await acreate_toolkit(manifest(f=stdio_entry())) as tk:
        result = await tk.aexecute("work", {"steps": 20}, progress=slow)
    assert result.content == "did 20 steps"
    assert seen == [float(i) for i in range(1, 21)]


async def test_a_question_handler_does_not_outlive_the_call_that_asked() -> None:
    """A server that asks and returns without waiting (and never cancels its question):
    the handler still waiting for a user is cancelled when the call ends."""
    started = asyncio.Event()
    ended = asyncio.Event()

    async def wait_for_user(request: ServerRequest) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            ended.set()

    async with await acreate_toolkit(manifest(f=stdio_entry()), elicitation=wait_for_user) as tk:
        result = await tk.aexecute("ask_and_leave", {})
        assert result.content == "left" and started.is_set()
        await asyncio.wait_for(ended.wait(), 5)
        after = await tk.aexecute("work", {"steps": 1})
    assert after.content == "did 1 steps"


async def test_a_sync_handler_waiting_on_a_person_does_not_stall_other_calls() -> None:
    """A sync handler (a terminal prompt, say) runs on a worker thread, not the loop thread."""
    import threading

    entered, release = threading.Event(), threading.Event()
    released_by_the_test: list[bool] = []

    def elicit(request: ServerRequest) -> dict[str, str]:
        entered.set()
        released_by_the_test.append(release.wait(5))  # False: nobody could run meanwhile
        return {"name": "Ada"}

    @tool
    def ping() -> str:
        """Answer at once."""
        return "pong"

    async with await acreate_toolkit(
        manifest(f=stdio_entry()), extra_tools=[ping], elicitation=elicit
    ) as tk:
        asking = asyncio.ensure_future(tk.aexecute("ask_name", {}))
        assert await asyncio.to_thread(entered.wait, 10)
        other = await tk.aexecute("ping", {})
        release.set()
        answered = await asking
    assert other.content == "pong"
    assert answered.content == "hello Ada"
    assert released_by_the_test == [True]
