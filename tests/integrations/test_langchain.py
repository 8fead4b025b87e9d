"""LangChain / LangGraph integration: real agents (`create_agent`, a StateGraph with a ToolNode)
driven by a scripted fake chat model, calling builtin, shell, HTTP and MCP (stdio) tools."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "langchain", reason="the `langchain` extra is not installed (the test extra installs it)"
)

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from pydantic import Field

from toolnexus import ApprovalRequest, Toolkit, create_toolkit
from toolnexus.integrations.langchain import (
    ToolnexusMiddleware,
    langchain_tools,
    toolnexus_tool_node,
)

from ..conftest import QuietHandler, start_http_server, stop_http_server

MCP_SERVER = Path(__file__).resolve().parents[1] / "mcp_servers" / "everything.py"

Turn = list[dict[str, Any]] | str | Callable[[list[BaseMessage]], list[dict[str, Any]] | str]


class ScriptedModel(BaseChatModel):
    """A chat model that plays `turns` in order: a list of tool calls, a final text, or a
    function of the conversation returning either (a model reacting to what it read)."""

    turns: list[Any]
    bound: list[list[dict[str, Any]]] = Field(default_factory=list)
    """The tool definitions of each `bind_tools`, as OpenAI would receive them."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        answered = sum(isinstance(m, AIMessage) for m in messages)
        turn: Turn = self.turns[answered] if answered < len(self.turns) else "done"
        if callable(turn):
            turn = turn(messages)
        if isinstance(turn, str):
            message = AIMessage(content=turn)
        else:
            calls = [{"id": c.get("id") or f"call_{uuid.uuid4().hex[:8]}", **c} for c in turn]
            message = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound.append([convert_to_openai_tool(t) for t in tools])
        return self


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def manifest(http_url: str, extra: str = "") -> str:
    return f"""
version: 1
tools:
  - name: greet
    command: [printf, "hello %s", "{{who}}"]
    parameters: {{type: object, properties: {{who: {{type: string}}}}, required: [who]}}
  - name: make
    description: create a file
    command: [touch, "--", "{{path}}"]
    parameters: {{type: object, properties: {{path: {{type: string}}}}, required: [path]}}
    approval: ask
  - name: wipe
    command: [rm, -f, "--", "{{path}}"]
    parameters: {{type: object, properties: {{path: {{type: string}}}}, required: [path]}}
    approval: deny
  - name: nap
    command: [sleep, "{{seconds}}"]
    parameters: {{type: object, properties: {{seconds: {{type: string}}}}, required: [seconds]}}
    timeout: 300ms
  - name: fetch_echo
    http: {{method: GET, url: "{http_url}/echo/{{word}}"}}
    parameters: {{type: object, properties: {{word: {{type: string}}}}, required: [word]}}
{extra}
mcp_servers:
  ev: {{command: {sys.executable}, args: ["{MCP_SERVER}"]}}
"""


class Approvals:
    """The toolkit's own approver: records what it was asked, answers `answer`."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.asked.append(request.tool.name)
        return self.answer


class EchoHandler(QuietHandler):
    def do_GET(self) -> None:
        self.send(200, "text/plain", f"echo {self.path}".encode())


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 answering `echo <path>`."""
    httpd = start_http_server(EchoHandler)
    yield f"http://127.0.0.1:{httpd.server_port}"
    stop_http_server(httpd)


def _toolkit(folder: Path, http_url: str, approvals: Approvals) -> Toolkit:
    (folder / "notes.txt").write_text("the notes\n")
    (folder / "tools.yaml").write_text(manifest(http_url))
    return create_toolkit(folder / "tools.yaml", builtins=["read"], approver=approvals)


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, http_url: str
) -> Iterator[tuple[Toolkit, Approvals]]:
    """One toolkit (and its MCP server) for the tests that do not change its manifest."""
    approvals = Approvals(answer=False)
    with _toolkit(tmp_path_factory.mktemp("toolkit"), http_url, approvals) as toolkit:
        yield toolkit, approvals


@pytest.fixture
def toolkit(shared: tuple[Toolkit, Approvals]) -> Toolkit:
    return shared[0]


@pytest.fixture
def approvals(shared: tuple[Toolkit, Approvals]) -> Approvals:
    approvals = shared[1]
    approvals.answer, approvals.asked = False, []
    return approvals


@pytest.fixture
def own_toolkit(workspace: Path, http_url: str) -> Iterator[Toolkit]:
    """A toolkit of its own, in `workspace`, for tests that rewrite its manifest."""
    with _toolkit(workspace, http_url, Approvals(answer=False)) as toolkit:
        yield toolkit


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh folder for the files a test's calls create (absolute paths)."""
    (tmp_path / "notes.txt").write_text("the notes\n")
    return tmp_path


def agent_of(toolkit: Toolkit, turns: list[Any]) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(turns=turns)
    agent = create_agent(
        model, middleware=[ToolnexusMiddleware(toolkit)], checkpointer=InMemorySaver()
    )
    return agent, model


def run(agent: Any, value: Any, thread: str, mode: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    if mode == "sync":
        return agent.invoke(value, config)
    return asyncio.run(agent.ainvoke(value, config))


def ask(text: str) -> Any:
    return {"messages": [{"role": "user", "content": text}]}


def tool_messages(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def test_the_tools_are_the_toolkits_with_its_json_schemas(toolkit: Toolkit) -> None:
    tools = langchain_tools(toolkit)
    assert [t.name for t in tools] == toolkit.names()
    greet = next(t for t in tools if t.name == "greet")
    definition = convert_to_openai_tool(greet)["function"]
    assert definition["parameters"] == toolkit.get("greet").parameters  # type: ignore[union-attr]
    assert definition["description"] == toolkit.get("greet").description  # type: ignore[union-attr]


@MODES
def test_an_agent_calls_builtin_shell_http_and_mcp_tools(toolkit: Toolkit, mode: str) -> None:
    agent, model = agent_of(
        toolkit,
        [
            [
                call("read", "c-read", path="notes.txt"),
                call("greet", "c-shell", who="ada"),
                call("fetch_echo", "c-http", word="hi"),
                call("add", "c-mcp", a=2, b=3),
            ],
            "all done",
        ],
    )
    state = run(agent, ask("go"), "t1", mode)
    results = tool_messages(state)
    assert {k: m.status for k, m in results.items()} == dict.fromkeys(
        ["c-read", "c-shell", "c-http", "c-mcp"], "success"
    )
    assert "the notes" in results["c-read"].content
    assert results["c-shell"].content == "hello ada"
    assert "/echo/hi" in results["c-http"].content
    assert results["c-mcp"].content == "5"
    assert results["c-mcp"].artifact["structured"] == {"result": 5}
    assert state["messages"][-1].content == "all done"
    offered = {d["function"]["name"] for d in model.bound[0]}
    assert offered == set(toolkit.names())


@MODES
def test_a_denied_call_is_an_error_message_and_does_not_run(
    toolkit: Toolkit, workspace: Path, mode: str
) -> None:
    target = workspace / "notes.txt"
    agent, _ = agent_of(toolkit, [[call("wipe", "c1", path=str(target))], "ok"])
    message = tool_messages(run(agent, ask("wipe"), "t", mode))["c1"]
    assert message.status == "error"
    assert "denied" in message.content and "Do not retry" in message.content
    assert message.artifact["metadata"]["decision"] == "deny"
    assert target.exists()


@MODES
def test_ask_interrupts_the_run_and_approve_resumes_it(
    toolkit: Toolkit, workspace: Path, approvals: Approvals, mode: str
) -> None:
    target = workspace / "made.txt"
    agent, _ = agent_of(toolkit, [[call("make", "c1", path=str(target))], "made it"])
    paused = run(agent, ask("make it"), "t", mode)
    (pending,) = paused["__interrupt__"]
    assert pending.value["type"] == "tool_approval"
    assert pending.value["tool_call_id"] == "c1"
    assert pending.value["name"] == "make"
    assert pending.value["args"] == {"path": str(target)}
    assert pending.value["origin"] and "tools.yaml" in pending.value["origin"]
    assert "ask" in pending.value["description"]
    approve = {"type": "object", "properties": {"type": {"const": "approve"}}, "required": ["type"]}
    assert approve in pending.response_schema["oneOf"]  # published for clients' forms
    assert not target.exists()

    state = run(agent, Command(resume={"type": "approve"}), "t", mode)
    assert tool_messages(state)["c1"].status == "success"
    assert target.exists()
    assert state["messages"][-1].content == "made it"
    assert approvals.asked == []  # the interrupt decided, not the fallback approver


@MODES
@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"decisions": [{"type": "reject", "message": "not today"}]}, "not today"),
        ({"type": "reject"}, "declined"),
        (False, "declined"),
        ({"type": "maybe"}, "not an approval decision"),
        ({"type": "edit", "edited_action": {"name": "wipe", "args": {}}}, "not a call of"),
    ],
)
def test_a_refused_ask_is_an_error_message_and_does_not_run(
    toolkit: Toolkit, workspace: Path, mode: str, answer: Any, said: str
) -> None:
    target = workspace / "made.txt"
    agent, _ = agent_of(toolkit, [[call("make", "c1", path=str(target))], "fine"])
    assert "__interrupt__" in run(agent, ask("make it"), "t", mode)
    message = tool_messages(run(agent, Command(resume=answer), "t", mode))["c1"]
    assert message.status == "error"
    assert said in message.content and "denied" in message.content
    assert not target.exists()


def test_an_edit_runs_the_edited_call_under_the_rules(toolkit: Toolkit, workspace: Path) -> None:
    asked, edited = workspace / "asked.txt", workspace / "edited.txt"
    agent, _ = agent_of(toolkit, [[call("make", "c1", path=str(asked))], "fine"])
    run(agent, ask("make it"), "t", "sync")
    decision = {"type": "edit", "edited_action": {"name": "make", "args": {"path": str(edited)}}}
    message = tool_messages(run(agent, Command(resume=decision), "t", "sync"))["c1"]
    assert message.status == "success"
    assert edited.exists() and not asked.exists()


def test_two_asks_in_one_turn_are_resumed_by_interrupt_id(
    toolkit: Toolkit, workspace: Path
) -> None:
    a, b = workspace / "a.txt", workspace / "b.txt"
    agent, _ = agent_of(
        toolkit, [[call("make", "ca", path=str(a)), call("make", "cb", path=str(b))], "fine"]
    )
    paused = run(agent, ask("make both"), "t", "async")
    by_call = {i.value["tool_call_id"]: i.id for i in paused["__interrupt__"]}
    assert set(by_call) == {"ca", "cb"}
    resume = {by_call["ca"]: {"type": "approve"}, by_call["cb"]: {"type": "reject"}}
    results = tool_messages(run(agent, Command(resume=resume), "t", "async"))
    assert (results["ca"].status, results["cb"].status) == ("success", "error")
    assert a.exists() and not b.exists()


def test_the_plain_tool_list_works_as_create_agent_tools(toolkit: Toolkit, workspace: Path) -> None:
    target = workspace / "made.txt"
    model = ScriptedModel(turns=[[call("make", "c1", path=str(target))], "ok"])
    agent = create_agent(model, tools=langchain_tools(toolkit), checkpointer=InMemorySaver())
    assert "__interrupt__" in run(agent, ask("make"), "t", "sync")
    state = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), "t", "sync")
    assert tool_messages(state)["c1"].status == "success"
    assert target.exists()


def test_outside_a_resumable_run_the_toolkits_approver_decides(
    toolkit: Toolkit, workspace: Path, approvals: Approvals
) -> None:
    make = next(t for t in langchain_tools(toolkit) if t.name == "make")
    target = workspace / "made.txt"
    tool_call = {"type": "tool_call", "id": "c1", "name": "make", "args": {"path": str(target)}}
    refused = make.invoke(tool_call)
    assert (refused.status, approvals.asked) == ("error", ["make"])
    approvals.answer = True
    assert asyncio.run(make.ainvoke(tool_call)).status == "success"
    assert target.exists()
    # A graph without a checkpointer cannot resume: the approver decides there too.
    agent = create_agent(
        ScriptedModel(turns=[[call("make", "c2", path=str(target))], "ok"]),
        middleware=[ToolnexusMiddleware(toolkit)],
    )
    state = agent.invoke(ask("make"))
    assert "__interrupt__" not in state
    assert tool_messages(state)["c2"].status == "success"
    assert approvals.asked == ["make", "make", "make"]


def test_plain_invocation_returns_the_content(toolkit: Toolkit) -> None:
    greet = next(t for t in langchain_tools(toolkit) if t.name == "greet")
    assert greet.invoke({"who": "bob"}) == "hello bob"
    assert greet.invoke({"whom": "bob"}).startswith("Error: invalid arguments for 'greet'")


@MODES
def test_the_model_fixes_an_invalid_call_after_reading_the_error(
    toolkit: Toolkit, mode: str
) -> None:
    def fix(messages: list[BaseMessage]) -> list[dict[str, Any]]:
        error = messages[-1]
        assert isinstance(error, ToolMessage) and error.status == "error"
        assert "'who' is a required property" in str(error.content)
        return [call("greet", "c2", who="bob")]

    agent, _ = agent_of(toolkit, [[call("greet", "c1", whom="bob")], fix, "done"])
    results = tool_messages(run(agent, ask("greet bob"), "t", mode))
    assert results["c1"].status == "error"
    assert results["c1"].artifact["metadata"]["call_id"] == "c1"  # the id reached the executor
    assert (results["c2"].status, results["c2"].content) == ("success", "hello bob")


def test_a_timeout_is_an_error_the_model_reads(toolkit: Toolkit) -> None:
    agent, _ = agent_of(toolkit, [[call("nap", "c1", seconds="5")], "ok"])
    started = time.monotonic()
    message = tool_messages(run(agent, ask("nap"), "t", "async"))["c1"]
    assert time.monotonic() - started < 4
    assert message.status == "error" and "timed out" in message.content


def test_images_come_back_as_content_blocks(toolkit: Toolkit) -> None:
    agent, _ = agent_of(toolkit, [[call("media", "c1")], "seen"])
    message = tool_messages(run(agent, ask("show"), "t", "sync"))["c1"]
    blocks = message.content
    assert isinstance(blocks, list)
    # in the order the server sent them: text, image, audio (a note), then the later text
    assert [b["type"] for b in blocks[:4]] == ["text", "image", "text", "text"]
    assert blocks[0] == {"type": "text", "text": "first"}
    image = blocks[1]
    assert image["mime_type"] == "image/png" and image["base64"].startswith("iVBOR")
    assert blocks[2] == {
        "type": "text",
        "text": "[audio (audio/wav, 16 bytes) not shown: LangChain tool "
        "messages carry text, images and files]",
    }
    assert blocks[3] == {"type": "text", "text": "second"}


def test_a_reload_between_two_turns_shows_through(
    own_toolkit: Toolkit, workspace: Path, http_url: str
) -> None:
    toolkit = own_toolkit
    agent, model = agent_of(
        toolkit,
        [
            [call("greet", "c1", who="x")],
            "first done",
            [call("shout", "c2", word="hey"), call("nap", "c3", seconds="0")],
            "second done",
        ],
    )
    run(agent, ask("one"), "t", "sync")
    assert "shout" not in {d["function"]["name"] for d in model.bound[-1]}
    extra = """  - name: shout
    command: [printf, "%s!", "{word}"]
    parameters: {type: object, properties: {word: {type: string}}, required: [word]}
"""
    text = manifest(http_url, extra)
    (workspace / "tools.yaml").write_text(text.replace("  - name: nap\n", "  - name: napx\n"))
    assert toolkit.reload().ok
    state = run(agent, ask("two"), "t", "sync")
    offered = {d["function"]["name"] for d in model.bound[-1]}
    assert "shout" in offered and "nap" not in offered
    results = tool_messages(state)
    assert (results["c2"].status, results["c2"].content) == ("success", "hey!")
    assert results["c3"].status == "error" and "napx" in results["c3"].content


@MODES
def test_a_reload_between_the_ask_and_the_resume_decides_by_the_new_rules(
    own_toolkit: Toolkit, workspace: Path, http_url: str, mode: str
) -> None:
    """An approval given under the old rules does not run a call the new rules deny, and an
    edit that a deny rule catches is denied: the executor decides again on what it runs."""
    toolkit, target = own_toolkit, workspace / "made.txt"
    agent, _ = agent_of(toolkit, [[call("make", "c1", path=str(target))], "done"])
    assert "__interrupt__" in run(agent, ask("make"), "t", mode)
    denying = manifest(http_url).replace(
        "    approval: ask\n",
        "    approval:\n      default: ask\n"
        '      rules: [{decision: deny, when: {path: {glob: "**/made.txt"}}, reason: no}]\n',
    )
    (workspace / "tools.yaml").write_text(denying)
    assert toolkit.reload().ok
    state = run(agent, Command(resume={"type": "approve"}), "t", mode)
    assert tool_messages(state)["c1"].status == "error" and not target.exists()
    # The same rules catch an edit into a denied call after a fresh ask.
    other = workspace / "other.txt"
    agent, _ = agent_of(toolkit, [[call("make", "c2", path=str(other))], "done"])
    assert "__interrupt__" in run(agent, ask("make"), "t2", mode)
    edit = {"type": "edit", "edited_action": {"name": "make", "args": {"path": str(target)}}}
    state = run(agent, Command(resume=edit), "t2", mode)
    message = tool_messages(state)["c2"]
    assert message.status == "error" and "no" in message.content
    assert not target.exists() and not other.exists()


def tool_node_graph(toolkit: Toolkit, model: ScriptedModel) -> Any:
    """agent -> tools -> agent, the tools node being `toolnexus_tool_node(toolkit)`."""

    def agent_node(state: MessagesState) -> dict[str, Any]:
        bound = model.bind_tools(langchain_tools(toolkit))  # this turn's tools
        return {"messages": [bound.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent_node)
    graph.add_node("tools", toolnexus_tool_node(toolkit))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver())


@MODES
@pytest.mark.parametrize("slow", ["a.txt", "b.txt"])
def test_two_asks_in_one_tool_node_step_never_swap_approvals(
    toolkit: Toolkit, workspace: Path, mode: str, slow: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph hands resume values to a node's interrupts by the order they are reached. The
    calls of one ToolNode step run at once (threads on the sync path), so without an order of
    our own a slow first call let the second take the approval shown for the first (and a
    slow second one must not be left waiting for the first)."""
    a, b = workspace / "a.txt", workspace / "b.txt"
    check = toolkit.check

    def slow_for_one(name: str, arguments: Any = None) -> Any:
        if isinstance(arguments, dict) and str(arguments.get("path", "")).endswith(slow):
            time.sleep(0.3)
        return check(name, arguments)

    monkeypatch.setattr(toolkit, "check", slow_for_one)
    model = ScriptedModel(
        turns=[[call("make", "ca", path=str(a)), call("make", "cb", path=str(b))], "done"]
    )
    app = tool_node_graph(toolkit, model)
    state = run(app, ask("go"), "t", mode)
    answered: dict[str, bool] = {}
    while state.get("__interrupt__"):
        (pending,) = state["__interrupt__"]
        approve = pending.value["tool_call_id"] == "cb"  # approve b only, whatever comes first
        answered[pending.value["tool_call_id"]] = approve
        state = run(app, Command(resume={"type": "approve" if approve else "reject"}), "t", mode)
    assert answered == {"ca": False, "cb": True}
    results = tool_messages(state)
    assert (results["ca"].status, results["cb"].status) == ("error", "success")
    assert b.exists() and not a.exists()


@MODES
def test_a_hand_built_graph_with_the_tool_node(
    toolkit: Toolkit, workspace: Path, mode: str
) -> None:
    model = ScriptedModel(
        turns=[
            [call("greet", "c1", who="ada"), call("make", "c2", path=str(workspace / "made.txt"))],
            "done",
        ]
    )
    app = tool_node_graph(toolkit, model)

    paused = run(app, ask("go"), "t", mode)
    (pending,) = paused["__interrupt__"]
    assert pending.value["name"] == "make"
    state = run(app, Command(resume=True), "t", mode)
    results = tool_messages(state)
    assert results["c1"].content == "hello ada"
    assert results["c2"].status == "success"
    assert (workspace / "made.txt").exists()


def test_cancelling_the_agent_stops_the_tools_process(
    own_toolkit: Toolkit, workspace: Path
) -> None:
    toolkit = own_toolkit
    pid_file = workspace / "pid"
    script = f"echo $$ > {pid_file}; exec sleep 30"
    agent, _ = agent_of(toolkit, [[call("bash_like", "c1")], "never"])
    extra = f"""  - name: bash_like
    command: "{script}"
    shell: true
"""
    (workspace / "tools.yaml").write_text(manifest("http://127.0.0.1:9", extra))
    assert toolkit.reload().ok

    async def cancelled() -> None:
        task = asyncio.ensure_future(agent.ainvoke(ask("go"), {"configurable": {"thread_id": "t"}}))
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)  # polling a file the tool writes: no event to wait on
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, "the tool's process outlived the cancelled run"
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_import_toolnexus_does_not_import_langchain() -> None:
    code = (
        "import sys, toolnexus, toolnexus.integrations; "
        "print(any(m.split('.')[0] in ('langchain', 'langchain_core', 'langgraph') "
        "for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_readme_example_pauses_on_ask_and_resumes(
    toolkit: Toolkit, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "frameworks.md").read_text("utf-8")
    start = page.index("\n## LangChain and LangGraph\n")
    end = page.find("\n## ", start + 1)
    (example,) = re.findall(r"```python\n(.*?)```", page[start : end if end != -1 else None], re.S)
    target = workspace / "made.txt"
    model = ScriptedModel(turns=[[call("make", "c1", path=str(target))], "tidy"])
    namespace: dict[str, Any] = {"model": model, "toolkit": toolkit}
    exec(compile(example, "docs/frameworks.md", "exec"), namespace)
    assert capsys.readouterr().out.startswith(f"make {{'path': '{target}'}} ")
    assert target.exists()
    assert namespace["state"]["messages"][-1].content == "tidy"
