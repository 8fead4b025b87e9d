"""Agent frameworks: a `Toolkit` dropped into pydantic-ai, the OpenAI Agents SDK or LangChain,
in process.

Each module is a thin layer over the toolkit's public API (`tools`, `check`, `aexecute`), so
validation, approval, sandboxing, middleware and reload stay the toolkit's own. Each imports its
framework when it is imported itself: install the matching extra (`toolnexus[pydantic-ai]`,
`toolnexus[openai-agents]`, `toolnexus[langchain]`). The core never imports this package.
"""
