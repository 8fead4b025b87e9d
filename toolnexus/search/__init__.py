"""Tool search: deferred tool definitions, found by a search when the model needs them.

A toolkit of a thousand tools cannot send every definition on every request. Tools marked
deferred (`defer:` in the manifest, or a `tool_search:` budget) are held back; the model sees
the others plus one search tool, and what a search finds is loaded for the rest of that
conversation. The modules, one job each:

- `index`: ranking (BM25F over names, descriptions and parameter names; a regex mode);
- `semantic`: ranking by meaning (an embedder the application passes, wordllama's bundled
  model, or a BERT sentence model directory such as MiniLM), fused with `index`'s; vectors
  cached by content hash;
- `bert`: a sentence-transformers BERT model directory run with numpy (no torch);
- `state`: `SearchState`, the loaded tools of one conversation (the application keeps it);
- `tool`: the provider-neutral `tool_search` tool;
- `plan`: which tools of a generation are deferred (`ToolSearchSettings`, `apply_search`);
- `provider`: what adapters send and read back, native (Anthropic, OpenAI Responses) or not.

Deferral only changes which definitions are sent. A call of a deferred tool that was never
searched is decided, validated and run like any other: approval and sandboxes never depend on
search state.
"""

from __future__ import annotations

from .index import SearchIndex
from .plan import ToolSearchSettings, apply_search, definition_bytes, is_deferred, is_search_tool
from .semantic import (
    Embedder,
    EmbeddingCache,
    bert_embedder,
    minilm_embedder,
    wordllama_embedder,
)
from .state import SearchState
from .tool import SEARCH_TOOL

__all__ = [
    "SEARCH_TOOL",
    "Embedder",
    "EmbeddingCache",
    "SearchIndex",
    "SearchState",
    "ToolSearchSettings",
    "apply_search",
    "bert_embedder",
    "definition_bytes",
    "is_deferred",
    "is_search_tool",
    "minilm_embedder",
    "wordllama_embedder",
]
