"""Static embeddings: one learned vector per token, averaged over a text's tokens and scaled
to unit length. No network, no GPU, about 0.07 ms per chunk on one core.

Two sources, one format (a `safetensors` file holding a vocabulary x dimensions matrix, and a
Hugging Face `tokenizer.json`):

- `wordllama` (the default embedder): the 256-dimension `l2_supercat` weights and tokenizer
  that the `wordllama` package (MIT) carries inside its wheel. Its files are read directly:
  importing the package would configure the root logger (its `inference` module calls
  `logging.basicConfig`), and its own loader looks for the tokenizer in a folder the wheel
  does not have and then tries to download it.
- `static`: a folder in the same format from a path (INGEST_STATIC_MODEL_PATH): a Model2Vec
  model (`model.safetensors` with `embeddings`, as `potion-base-8M` or `potion-retrieval-32M`
  are saved), or a sentence-transformers `StaticEmbedding` module folder.

The arithmetic is WordLlama's own (tokens without special tokens, no truncation, mean, L2
norm): tests/embedding/test_static_embedder.py checks our vectors against the package's.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingestion_pipeline.errors import ConfigError
from ingestion_pipeline.processing.word_pieces import WordPieces, word_pieces

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

_WEIGHTS = ("model.safetensors", "embeddings.safetensors")
# Loaded models, per process: every task sends the parsing child a new (unpickled) embedder,
# and the child loads its model once, when it starts (`warm`, from worker/isolation.py).
_LOADED: dict[StaticModel, Loaded] = {}
_TENSORS = ("embeddings", "embedding.weight")
DEFAULT_MODEL_NAME = "wordllama-l2-supercat-256"


@dataclass(frozen=True)
class Loaded:
    matrix: np.ndarray[Any, Any]  # as the file stores it (WordLlama: float16), or float32 once warmed
    tokenizer: Tokenizer
    words: WordPieces | None  # word-at-a-time ids, for the tokenizers that allow it
    ids_fit: bool  # every id the tokenizer gives is a row of the matrix (else ids are clipped)


@dataclass(frozen=True)
class StaticModel:
    """Where a static model's files are, and what to call it."""

    name: str
    weights: Path
    tokenizer: Path
    version: str | None  # None: the weights' digest, computed when first asked for (`StaticEmbedder.version`)


def wordllama_model() -> StaticModel:
    """The weights inside the installed `wordllama` package (found without importing it)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("bad setting INGEST_EMBEDDER: wordllama is not installed (pip install wordllama)")
    root = Path(next(iter(spec.submodule_search_locations)))
    model = StaticModel(
        name=DEFAULT_MODEL_NAME,
        weights=root / "weights" / "l2_supercat_256.safetensors",
        tokenizer=root / "tokenizers" / "l2_supercat_tokenizer_config.json",
        version=_package_version("wordllama"),
    )
    for path in (model.weights, model.tokenizer):
        if not path.is_file():
            raise ConfigError(f"bad setting INGEST_EMBEDDER: the wordllama package has no {path.name} (reinstall it)")
    return model


def folder_model(path: str | Path) -> StaticModel:
    """A Model2Vec or sentence-transformers StaticEmbedding folder; its version is the
    weights' digest (so a changed model is a different model), read only when asked for: a
    query's embedder needs none, and a large model's weights take a while to hash."""
    folder = Path(path).expanduser()
    if (folder / "0_StaticEmbedding").is_dir():  # a whole sentence-transformers model
        folder = folder / "0_StaticEmbedding"
    if not folder.is_dir():
        raise ConfigError(f"bad setting INGEST_STATIC_MODEL_PATH: {str(folder)!r} is not a folder")
    weights = next((folder / name for name in _WEIGHTS if (folder / name).is_file()), None)
    tokenizer = folder / "tokenizer.json"
    if weights is None or not tokenizer.is_file():
        raise ConfigError(
            f"bad setting INGEST_STATIC_MODEL_PATH: {str(folder)!r} needs model.safetensors and tokenizer.json "
            "(a Model2Vec or sentence-transformers StaticEmbedding folder)"
        )
    return StaticModel(f"static:{folder.resolve().name}", weights, tokenizer, None)


class StaticEmbedder:
    """Mean of the tokens' vectors, unit length. Loads its files on first use, once per
    process (`_LOADED`), in the process that embeds (the worker's parsing children): what is
    pickled to them is the paths only."""

    runs_in_child = True  # CPU work: the parsing children have the cores
    batch_size = 256

    def __init__(self, model: StaticModel) -> None:
        self.model = model
        self.name = model.name
        self.dimensions: int | None = _read_dimensions(model.weights)

    @property
    def child_modules(self) -> tuple[str, ...]:
        """What the worker's fork server imports for every parsing child: the libraries (0.4 s
        of CPU a child otherwise), and for the default model the model itself
        (processing/default_model.py), which each child would load again (0.2 s of CPU, and
        a child is replaced every INGEST_PARSE_TASKS_PER_CHILD tasks)."""
        libraries = ("numpy", "safetensors", "tokenizers", "tokenizers.models")
        if self.model.name == DEFAULT_MODEL_NAME:
            return (*libraries, "ingestion_pipeline.processing.default_model")
        return libraries

    @property
    def version(self) -> str:
        return self.model.version or _digest(self.model.weights)

    def embed(self, texts: list[str]) -> list[list[float]] | None:
        return self.embed_array(texts).tolist()  # type: ignore[no-any-return]

    def embed_array(self, texts: list[str]) -> NDArray[np.float32]:
        """The vectors of `embed`, as one float32 array (a row per text): what the worker
        embeds with (processing.embedding.embed_chunks), so that no vector becomes a list of
        Python floats on its way to COPY."""
        import numpy as np

        loaded = self._load()
        matrix = loaded.matrix
        vectors = np.zeros((len(texts), matrix.shape[1]), dtype=np.float32)
        for row, token_ids in enumerate(_token_ids(texts, loaded)):
            if token_ids:
                ids = token_ids if loaded.ids_fit else np.clip(token_ids, 0, matrix.shape[0] - 1)
                # The sum, in the row: the mean's direction, and the row is scaled to length 1 below.
                np.add.reduce(matrix.take(ids, axis=0), axis=0, dtype=np.float32, out=vectors[row])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors

    def warm(self) -> None:
        """Load the model now, its matrix as float32: a parsing child, before it takes a task
        (not on a parse's clock), the fork server for the children it forks, or the resident
        search process. A chunk's rows then need no conversion from the file's float16: the
        whole of WordLlama's takes ~15 ms and 33 MB, and converting each chunk's rows instead
        took half of embedding it (bench/results/ingest_corpus.md, "Issue 60: the drain at
        1,500 files, session 9"). A one-off query embeds from the matrix as stored."""
        import numpy as np

        loaded = self._load()
        if loaded.matrix.dtype != np.float32:
            _LOADED[self.model] = replace(loaded, matrix=loaded.matrix.astype(np.float32))

    def _load(self) -> Loaded:
        if self.model not in _LOADED:
            _LOADED[self.model] = _read_model(self.model)
        return _LOADED[self.model]


def _token_ids(texts: list[str], loaded: Loaded) -> list[list[int]]:
    """Each text's ids without special tokens: word at a time where the tokenizer allows it
    (processing/word_pieces.py: 5.4 -> 1.3 ms for a job's 23 chunks), else the tokenizer's."""
    found = [None if loaded.words is None else loaded.words.ids(text) for text in texts]
    rest = [at for at, ids in enumerate(found) if ids is None]
    if rest:
        # encode_batch_fast: the same ids without the character offsets (a quarter of the time)
        encodings = loaded.tokenizer.encode_batch_fast([texts[at] for at in rest], add_special_tokens=False)
        for at, encoding in zip(rest, encodings, strict=True):
            found[at] = encoding.ids
    return [ids or [] for ids in found]


def _read_model(model: StaticModel) -> Loaded:
    import numpy as np
    from tokenizers import Tokenizer

    # Kept as stored (WordLlama's: float16, half the memory): `embed` makes float32 of the
    # rows a text uses, the same numbers a float32 copy of the whole matrix held, without
    # converting 8 million of them for a one-word query (30-100 ms).
    matrix = np.ascontiguousarray(_read_matrix(model.weights))
    tokenizer = Tokenizer.from_file(str(model.tokenizer))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    ids_fit = max(tokenizer.get_vocab(with_added_tokens=True).values(), default=0) < matrix.shape[0]
    return Loaded(matrix, tokenizer, word_pieces(tokenizer), ids_fit)


def _read_matrix(path: Path) -> np.ndarray[Any, Any]:
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as tensors:
        name = _tensor_name(path, list(tensors.keys()))
        matrix: np.ndarray[Any, Any] = tensors.get_tensor(name)
    return matrix


def _read_dimensions(path: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as tensors:
        shape = tensors.get_slice(_tensor_name(path, list(tensors.keys()))).get_shape()
    if len(shape) != 2 or shape[1] < 1:
        raise ConfigError(f"bad static model {str(path)!r}: expected a vocabulary x dimensions matrix, got {shape}")
    return int(shape[1])


def _tensor_name(path: Path, names: list[str]) -> str:
    for name in (*_TENSORS, *(names if len(names) == 1 else ())):
        if name in names:
            return str(name)
    raise ConfigError(f"bad static model {str(path)!r}: no tensor named {' or '.join(_TENSORS)} (found {names})")


def _package_version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


@functools.cache
def _digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()[:16]
