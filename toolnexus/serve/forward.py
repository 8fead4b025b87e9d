"""What `toolnexus serve` passes on to its own client while it runs a served call: the
progress of the call (when the client's request carried a progress token) and the questions the
toolkit's MCP servers ask (elicitation, sampling), sent as requests of the client's session.

A question can be forwarded only on a handshake-era connection that can carry server requests
and whose client declared the capability (for elicitation, the mode asked: URL mode only to a
client that declares `url`); otherwise the asking server gets an error it can
report (a 2026-07-28 connection has no mid-call back-channel: its questions travel as
`InputRequiredResult`s, which a question asked deep inside a running call cannot become).
For the served toolkit's servers to ask at all, it must have been built with handlers
(`toolnexus serve` builds its toolkits so): a capability is declared only with a handler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..base import Progress
    from ..mcp.callbacks import ServerRequest

__all__ = ["forwarding", "refuse_unforwarded"]


def forwarding(ctx: Any) -> dict[str, Any]:
    """`aexecute` keywords that forward this served request's progress and questions."""

    async def progress(report: Progress) -> None:
        # A no-op when the client's request had no progress token.
        await ctx.session.report_progress(report.progress, report.total, report.message)

    async def elicitation(request: ServerRequest) -> Any:
        params = request.params
        refusal = _cannot_ask(ctx, "elicitation") or _cannot_take_mode(ctx, params.mode)
        if refusal is not None:
            return refusal
        if params.mode == "url":
            return await ctx.session.elicit_url(
                params.message, params.url, params.elicitation_id, related_request_id=ctx.request_id
            )
        return await ctx.session.elicit_form(
            params.message, params.requested_schema, related_request_id=ctx.request_id
        )

    async def sampling(request: ServerRequest) -> Any:
        refusal = _cannot_ask(ctx, "sampling")
        if refusal is not None:
            return refusal
        import warnings

        from mcp.shared.exceptions import MCPDeprecationWarning

        p = request.params
        with warnings.catch_warnings():
            # Deprecated for 2026-07-28 only; this is a handshake-era connection.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            pending = ctx.session.create_message(
                p.messages,
                max_tokens=p.max_tokens,
                system_prompt=p.system_prompt,
                include_context=p.include_context,
                temperature=p.temperature,
                stop_sequences=p.stop_sequences,
                metadata=p.metadata,
                model_preferences=p.model_preferences,
                tools=p.tools,
                tool_choice=p.tool_choice,
                related_request_id=ctx.request_id,
            )
        return await pending

    return {"progress": progress, "elicitation": elicitation, "sampling": sampling}


def refuse_unforwarded(request: ServerRequest) -> Any:
    """The toolkit-wide handler of served toolkits: it declares the capabilities to their
    servers; a question outside a served call (none should come) is refused."""
    from mcp_types import INVALID_REQUEST, ErrorData

    return ErrorData(
        code=INVALID_REQUEST, message="no client of toolnexus serve is waiting on this call"
    )


def _cannot_take_mode(ctx: Any, mode: str) -> Any:
    """A refusal when the client's elicitation capability lacks `mode` (an empty one means
    form only, as before URL mode existed): the spec forbids sending it that mode."""
    from mcp import types

    params = ctx.session.client_params
    declared = params.capabilities.elicitation if params is not None else None
    if declared is None:
        return None  # `_cannot_ask` refused already
    takes = declared.url is not None if mode == "url" else declared.form is not None
    if takes or (mode == "form" and declared.url is None):
        return None
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message="the elicitation request cannot be forwarded to the client of toolnexus serve: "
        f"it does not accept {'URL' if mode == 'url' else 'form'} mode",
    )


def _cannot_ask(ctx: Any, kind: str) -> Any:
    from mcp import types
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    why = None
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or not ctx.session.can_send_request:
        why = "its connection cannot carry a request back mid-call"
    else:
        capability = (
            types.ClientCapabilities(elicitation=types.ElicitationCapability())
            if kind == "elicitation"
            else types.ClientCapabilities(sampling=types.SamplingCapability())
        )
        if not ctx.session.check_client_capability(capability):
            why = f"it did not declare {kind}"
    if why is None:
        return None
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"the {kind} request cannot be forwarded to the client of toolnexus serve: {why}",
    )
