"""Agent frameworks: a `Toolkit` dropped into pydantic-ai or the OpenAI Agents SDK, in process.

Each module is a thin layer over the toolkit's public API (`tools`, `check`, `aexecute`), so
validation, approval, sandboxing, middleware and reload stay the toolkit's own. Each imports its
framework when it is imported itself: install the matching extra (`toolnexus[pydantic-ai]`,
`toolnexus[openai-agents]`). The core never imports this package.
"""
