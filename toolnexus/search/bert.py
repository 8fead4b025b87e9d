"""A sentence-transformers BERT model directory, run with numpy: texts in, unit vectors out.

Why numpy and not sentence-transformers: that library needs torch, gigabytes to install for a
six-layer encoder whose forward pass is a dozen matrix products per layer. What runs here is
exactly what sentence-transformers runs for a BERT-family model with mean (or CLS) pooling:
token, position and type embeddings and a LayerNorm; per layer, self-attention over the
unpadded tokens, a residual LayerNorm, a GELU feed-forward and another; the pooling the
directory's `1_Pooling/config.json` names; then L2 normalisation. It reads only the files of
the directory (`config.json`, `tokenizer.json`, `model.safetensors`, the pooling and
`sentence_bert_config.json` files): nothing is ever downloaded.

The weights file is parsed as the safetensors format is specified (an 8-byte little-endian
header length, a JSON header of names, dtypes, shapes and offsets, then the raw tensors), so
only numpy and the `tokenizers` library (for `tokenizer.json`, the same tokenizer
sentence-transformers uses) are needed, both in the `semantic` extra. The word embedding table
(the largest tensor, 45 MB for MiniLM) stays memory-mapped: only the rows of the tokens seen
are read. The other weights are copied once, transposed for `x @ W`, with the query, key and
value projections of each layer fused into one matrix.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["BertModel", "load_bert"]

_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2", "I64": "<i8", "I32": "<i4"}
"""Safetensors dtypes we can read: bfloat16 is read as its 16 bits and widened to float32."""

_PREFIXES = ("bert.", "model.", "0.auto_model.")
"""What a BertModel's tensor names may start with when saved from a wrapper (BertForMaskedLM,
sentence-transformers' own save)."""


@dataclass(frozen=True, kw_only=True)
class _Layer:
    qkv: Any  # (3 * hidden, hidden): queries, keys and values side by side (see `_dense`)
    qkv_bias: Any
    out: Any
    out_bias: Any
    ln1: tuple[Any, Any]
    up: Any
    up_bias: Any
    down: Any
    down_bias: Any
    ln2: tuple[Any, Any]


class BertModel:
    """A loaded model: `encode(texts)` gives one L2-normalised float32 vector per text.

    Thread-safe: the weights are read-only after loading, and each call has its own buffers.
    """

    def __init__(self, directory: Path, *, setting: str = "embedder") -> None:
        self.directory = directory
        self._setting = setting
        self._np: Any = _numpy(setting)
        config = self._json("config.json", required=True)
        self._check(config)
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        sbert = self._json("sentence_bert_config.json", required=False)
        positions = int(config.get("max_position_embeddings", 512))
        self.max_tokens = min(int(sbert.get("max_seq_length", positions)), positions)
        pooling = self._json("1_Pooling/config.json", required=False)
        self.pooling = "cls" if pooling.get("pooling_mode_cls_token") else "mean"
        if pooling and not (pooling.get("pooling_mode_mean_tokens") or self.pooling == "cls"):
            raise self._error("only mean or CLS pooling is supported (1_Pooling/config.json)")
        self._tokenizer = self._load_tokenizer()
        tensors = self._tensors(directory / "model.safetensors")
        self._load_weights(tensors, int(config["num_hidden_layers"]))

    def _error(self, what: str) -> ConfigError:
        return ConfigError(
            f"{self.directory} is not a sentence-transformers BERT model directory: {what}",
            field=self._setting,
        )

    def _json(self, name: str, *, required: bool) -> dict[str, Any]:
        path = self.directory / name
        if not path.is_file():
            if required:
                raise self._error(f"no {name}")
            return {}
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise self._error(f"cannot read {name}: {exc}") from None
        if not isinstance(value, dict):
            raise self._error(f"{name} is not a JSON object")
        return value

    def _check(self, config: dict[str, Any]) -> None:
        kind = config.get("model_type")
        if kind != "bert":
            raise self._error(f"config.json says model_type {kind!r}, expected 'bert'")
        if config.get("hidden_act", "gelu") != "gelu":
            raise self._error(f"hidden_act {config.get('hidden_act')!r}, expected 'gelu'")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise self._error("only absolute position embeddings are supported")
        for key in ("num_attention_heads", "hidden_size", "num_hidden_layers"):
            if not isinstance(config.get(key), int):
                raise self._error(f"config.json has no whole number {key!r}")

    def _load_tokenizer(self) -> Any:
        path = self.directory / "tokenizer.json"
        if not path.is_file():
            raise self._error("no tokenizer.json (the fast tokenizer's file)")
        try:
            tokenizers: Any = importlib.import_module("tokenizers")
        except ImportError:
            raise ConfigError(
                "a BERT model embedder needs the tokenizers package: "
                "pip install 'toolnexus[semantic]'",
                field=self._setting,
            ) from None
        try:
            tokenizer = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 - the Rust library raises bare Exception
            raise self._error(f"cannot read tokenizer.json: {exc}") from None
        # The file's own padding (to 128 for MiniLM) and truncation are not what
        # sentence-transformers does: it truncates to max_seq_length and pads to the longest.
        tokenizer.no_padding()
        tokenizer.enable_truncation(self.max_tokens)
        return tokenizer

    def _tensors(self, path: Path) -> dict[str, Any]:
        """The safetensors file as memory-mapped arrays, by name (prefixes stripped)."""
        np = self._np
        if not path.is_file():
            raise self._error("no model.safetensors (a pytorch_model.bin must be converted)")
        try:
            with path.open("rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(size))
            data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
        except (OSError, ValueError) as exc:
            raise self._error(f"cannot read model.safetensors: {exc}") from None
        out: dict[str, Any] = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype = _DTYPES.get(info["dtype"])
            if dtype is None:
                continue  # a tensor we never use (e.g. bool masks)
            start, end = info["data_offsets"]
            array = data[start:end].view(dtype).reshape(info["shape"])
            if info["dtype"] == "BF16":
                array = (array.astype(np.uint32) << 16).view(np.float32)
            for prefix in _PREFIXES:
                if name.startswith(prefix):
                    name = name.removeprefix(prefix)
                    break
            out[name] = array
        return out

    def _load_weights(self, t: dict[str, Any], layers: int) -> None:
        np = self._np

        def get(name: str) -> Any:
            if name not in t:
                raise self._error(f"model.safetensors has no tensor {name!r}")
            return t[name]

        def dense(prefix: str) -> tuple[Any, Any]:
            # (out, in) as stored: a float32 file's weights stay memory-mapped (a copy only if
            # the file leaves them unaligned, which BLAS would not take).
            w = np.require(get(f"{prefix}.weight"), dtype=np.float32, requirements="CA")
            return w, np.asarray(get(f"{prefix}.bias"), dtype=np.float32)

        def norm(prefix: str) -> tuple[Any, Any]:
            weight = np.asarray(get(f"{prefix}.weight"), dtype=np.float32)
            return weight, np.asarray(get(f"{prefix}.bias"), dtype=np.float32)

        words = get("embeddings.word_embeddings.weight")
        # float32 stays mapped (rows read on demand); other dtypes are widened once.
        self._words = words if words.dtype == np.float32 else words.astype(np.float32)
        self._positions = np.asarray(get("embeddings.position_embeddings.weight"), np.float32)
        self._type0 = np.asarray(get("embeddings.token_type_embeddings.weight")[0], np.float32)
        self._ln0 = norm("embeddings.LayerNorm")
        if self._words.shape[1] != self.hidden or self.hidden % self.heads:
            raise self._error("the embedding width does not match hidden_size and the heads")
        self._layers: list[_Layer] = []
        for i in range(layers):
            p = f"encoder.layer.{i}"
            q, k, v = (dense(f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
            self._layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(np.concatenate([q[0], k[0], v[0]], axis=0)),
                    qkv_bias=np.concatenate([q[1], k[1], v[1]]),
                    out=dense(f"{p}.attention.output.dense")[0],
                    out_bias=dense(f"{p}.attention.output.dense")[1],
                    ln1=norm(f"{p}.attention.output.LayerNorm"),
                    up=dense(f"{p}.intermediate.dense")[0],
                    up_bias=dense(f"{p}.intermediate.dense")[1],
                    down=dense(f"{p}.output.dense")[0],
                    down_bias=dense(f"{p}.output.dense")[1],
                    ln2=norm(f"{p}.output.LayerNorm"),
                )
            )

    def tokenize(self, texts: list[str]) -> tuple[Any, Any]:
        """Token ids and the attention mask, padded to the longest text: (batch, tokens)."""
        np = self._np
        encoded = self._tokenizer.encode_batch(texts)
        longest = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(texts), longest), dtype=np.int64)
        mask = np.zeros((len(texts), longest), dtype=np.float32)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1.0
        return ids, mask

    def encode(self, texts: list[str], *, batch: int = 32) -> Any:
        """One unit vector per text (float32, `(len(texts), hidden)`), in order. Texts are
        grouped by length so that a batch pads little. Runs with one BLAS thread (see
        `_one_blas_thread`)."""
        np = self._np
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with _one_blas_thread(self._setting):
            for start in range(0, len(order), batch):
                chosen = order[start : start + batch]
                ids, mask = self.tokenize([texts[i] for i in chosen])
                out[chosen] = self.forward(ids, mask)
        return out

    def forward(self, ids: Any, mask: Any) -> Any:
        """The pooled, normalised vectors of a padded batch of token ids."""
        np = self._np
        n, length = ids.shape
        heads, size = self.heads, self.hidden // self.heads
        x = self._words[ids] + self._positions[:length] + self._type0
        x = _layer_norm(np, x, *self._ln0, self.eps)
        # Padding gets the most negative float: its softmax weight is exactly 0 (as in BERT).
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(size))
        for layer in self._layers:
            qkv = _dense(x, layer.qkv, layer.qkv_bias)  # (n, length, 3 * hidden)
            qkv = qkv.reshape(n, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (n, heads, length, size)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, self.hidden)
            x = _layer_norm(
                np, _dense(context, layer.out, layer.out_bias) + x, *layer.ln1, self.eps
            )
            h = _gelu(np, _dense(x, layer.up, layer.up_bias))
            x = _layer_norm(np, _dense(h, layer.down, layer.down_bias) + x, *layer.ln2, self.eps)
        if self.pooling == "cls":
            pooled = x[:, 0]
        else:
            pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(
                mask.sum(axis=1, keepdims=True), 1e-9
            )
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _dense(x: Any, weight: Any, bias: Any) -> Any:
    """`x @ weight.T + bias` over the last axis, with the weight kept as the model stores it,
    (out, in), and multiplied from the left. Why: a query is a few tokens, so its products are
    bound by reading the weights; OpenBLAS reads a row-major weight on the left a third faster
    than on the right (a 384x1536 layer for 10 tokens: 0.21 ms against 0.29 ms, one thread)."""
    flat = x.reshape(-1, x.shape[-1])
    return (weight @ flat.T).T.reshape(*x.shape[:-1], weight.shape[0]) + bias


def _layer_norm(np: Any, x: Any, weight: Any, bias: Any, eps: float) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + np.float32(eps)) * weight + bias


def _gelu(np: Any, x: Any) -> Any:
    """BERT's exact GELU, `x * Phi(x)`, with erf by Abramowitz and Stegun 7.1.26 (absolute
    error below 1.5e-7, under float32's resolution near 1; numpy has no erf). Computed in
    place in three buffers: for a query's few tokens, allocating each step's result cost more
    than the step (74 -> 51 us a layer for 10 tokens)."""
    z = x * np.float32(1 / math.sqrt(2))
    a = np.abs(z)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    a *= a
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # 1 - erf(|z|)
    np.subtract(1.0, poly, out=poly)
    np.copysign(poly, z, out=poly)  # erf(z)
    poly += 1.0
    poly *= x
    poly *= np.float32(0.5)
    return poly


def _numpy(setting: str) -> Any:
    try:
        return importlib.import_module("numpy")
    except ImportError:
        raise ConfigError(
            "semantic tool search needs numpy: pip install 'toolnexus[semantic]'", field=setting
        ) from None


_blas: list[Any] = []
_blas_lock = threading.Lock()


@contextmanager
def _one_blas_thread(setting: str) -> Iterator[None]:
    """Encode with one BLAS thread, one encoding at a time.

    Why: a query is a few tokens, so each matrix product is small, and OpenBLAS's threads
    wait for each other by spinning; on a shared 2-core machine under load, its default two
    threads made a query 135-195 ms against 12-20 ms with one, and the build no faster
    (`benchmarks/RESULTS.md`). The limit is process-wide while it holds (BLAS has no
    per-thread setting), so encodings take turns under a lock, which also makes sure the
    setting is restored to what it was: two overlapping limits could otherwise leave the
    application's BLAS at one thread for good.
    """
    with _blas_lock:
        if not _blas:
            try:
                threadpoolctl: Any = importlib.import_module("threadpoolctl")
            except ImportError:
                raise ConfigError(
                    "a BERT model embedder needs threadpoolctl: pip install 'toolnexus[semantic]'",
                    field=setting,
                ) from None
            _blas.append(threadpoolctl.ThreadpoolController())
        with _blas[0].limit(limits=1, user_api="blas"):
            yield


def fingerprint(directory: Path) -> str:
    """What the model's vectors depend on, cheaply: the SHA-256 of its configuration and
    tokenizer files and of the weights file's header, size and modification time. Hashing the
    whole weights file would take 0.25 s for MiniLM at every toolkit start; a weights file
    rewritten in place changes its modification time, so its cached vectors are not reused."""
    digest = hashlib.sha256()
    for name in (
        "config.json",
        "tokenizer.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ):
        path = directory / name
        digest.update(name.encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
    weights = directory / "model.safetensors"
    if weights.is_file():
        stat = weights.stat()
        with weights.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            digest.update(f.read(min(size, 1 << 24)))
        digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


_loaded: dict[tuple[Path, str], BertModel] = {}
_loading = threading.Lock()


def load_bert(directory: Path, *, setting: str = "embedder", version: str = "") -> BertModel:
    """The model in `directory`, loaded once per process and `version` (its `fingerprint`,
    so that files replaced in place are loaded anew, never cached under the new name with the
    old model's vectors). A reload's new generation, or a second toolkit, shares it: it is
    read-only.

    Raises:
        ConfigError: the directory is missing, or is not a BERT model sentence-transformers
            would load (naming `setting`).
    """
    directory = directory.expanduser().resolve()
    with _loading:
        model = _loaded.get((directory, version))
        if model is None:
            if not directory.is_dir():
                raise ConfigError(f"no model directory {directory}", field=setting)
            model = _loaded[directory, version] = BertModel(directory, setting=setting)
        return model
