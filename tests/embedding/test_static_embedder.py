"""The default embedder (`wordllama`) and static model folders (`static`): real weights from
the wordllama package, no network."""

from __future__ import annotations

import json
import math
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.cli.demo import PARAPHRASE
from ingestion_pipeline.errors import ConfigError
from ingestion_pipeline.processing import embedder_from_settings
from ingestion_pipeline.processing.static_embedder import StaticEmbedder, folder_model, wordllama_model
from ingestion_pipeline.settings import load_settings
from tests.settings_env import clean_env  # noqa: F401 - an autouse fixture

TEXTS = [
    "Stop a job that is still in progress and give its worker back.",
    "The bakery sells sourdough bread and croissants every morning.",
    "PostgreSQL builds a GIN index over the tsvector column.",
    "",
]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_the_default_embedder_is_wordllama_and_needs_no_network():
    embedder = embedder_from_settings(load_settings())
    assert isinstance(embedder, StaticEmbedder)
    assert (embedder.name, embedder.dimensions) == ("wordllama-l2-supercat-256", 256)
    vectors = embedder.embed(TEXTS)
    assert vectors is not None and len(vectors) == 4
    assert all(len(v) == 256 for v in vectors)
    assert all(math.isclose(_cosine(v, v), 1.0, rel_tol=1e-5) for v in vectors[:3])
    assert vectors[3] == [0.0] * 256  # no tokens: a zero vector, not NaN


def test_a_paraphrase_is_nearer_than_an_unrelated_text():
    embedder = embedder_from_settings(load_settings())
    query, answer, unrelated, _ = embedder.embed(["How can I cancel a running task?", *TEXTS[:2], "x"]) or []
    assert _cosine(query, answer) > _cosine(query, unrelated) + 0.1


def test_our_vectors_are_the_packages_own():
    """WordLlama's inference, run apart: importing it configures the root logger."""
    script = (
        "import json, sys, numpy as np\n"
        "from pathlib import Path\n"
        "from safetensors import safe_open\n"
        "from tokenizers import Tokenizer\n"
        "from wordllama.inference import WordLlamaInference\n"
        "w, t = sys.argv[1:3]\n"
        "with safe_open(w, framework='np') as f: m = f.get_tensor('embedding.weight')\n"
        "out = WordLlamaInference(m, Tokenizer.from_file(t)).embed(json.loads(sys.argv[3]), norm=True)\n"
        "print(json.dumps(out.tolist()))\n"
    )
    model = wordllama_model()
    # a word at a time, and (holding "<s>", which the tokenizer matches whole) by the tokenizer
    texts = [*TEXTS[:3], _word_salad(1, 300), "The <s> and </s> of a chunk"]
    theirs = json.loads(
        subprocess.run(
            [sys.executable, "-c", script, str(model.weights), str(model.tokenizer), json.dumps(texts)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    ours = StaticEmbedder(model).embed(texts) or []
    assert max(abs(a - b) for x, y in zip(ours, theirs, strict=True) for a, b in zip(x, y, strict=True)) < 1e-5


def _word_salad(seed: int, words: int) -> str:
    """Text with what a tokenizer trips on: runs of spaces, tabs and newlines, accents,
    scripts without spaces, emoji (byte fallback), a "▁", a zero-width space."""
    import random

    rng = random.Random(seed)
    vocabulary = [
        *"the index of a document page section chunk PostgreSQL's ORDER BY tsvector".split(),
        "naïve",
        "café",
        "日本語の文書",
        "Привет",
        "🎉",
        "x\u200by",
        "<s",
        "/s>",
        "▁",
        "1234567",
        "e.g.,",
    ]
    spaces = [" ", " ", " ", "  ", "   ", "\n", "\n\n", "\t", " \n ", ""]
    return "".join(rng.choice(vocabulary) + rng.choice(spaces) for _ in range(words))


def test_word_at_a_time_ids_are_the_tokenizers():
    """The default model's ids come a word at a time (processing/word_pieces.py): they must be
    the ids of the tokenizer as the package ships it, text for text."""
    from tokenizers import Tokenizer

    from ingestion_pipeline.processing.word_pieces import word_pieces

    shipped = Tokenizer.from_file(str(wordllama_model().tokenizer))
    words = word_pieces(shipped)
    assert words is not None
    texts = [*TEXTS, " leading", "trailing  ", "   ", "\n", "▁", *(_word_salad(seed, 400) for seed in range(50))]
    # and texts whose words are their parts between single spaces (no "▁", no run of spaces)
    texts += [re.sub(" +", " ", _word_salad(seed, 400).replace("▁", "")).strip(" ") for seed in range(50)]
    for text in texts:
        assert words.ids(text) == shipped.encode(text, add_special_tokens=False).ids, text
    assert words.ids("a <s> b") is None  # an added token's spelling: the tokenizer's to read


@pytest.mark.parametrize(("vocabulary", "cut"), [(["▁", "a", "▁a"], True), (["▁", "a", "a▁"], False)])
def test_words_are_cut_only_where_no_token_spans_a_word_start(vocabulary, cut):
    """A token with "▁" after another character could join two words: then the tokenizer reads."""
    from tokenizers import Tokenizer, normalizers
    from tokenizers.models import BPE

    from ingestion_pipeline.processing.word_pieces import word_pieces

    merges = [("▁", "a")] if cut else [("a", "▁")]
    tokenizer = Tokenizer(BPE({t: i for i, t in enumerate(vocabulary)}, merges))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    assert (word_pieces(tokenizer) is not None) is cut


def test_the_fork_server_loads_the_default_model_once_for_every_child(tmp_path):
    """The worker's fork server imports an embedder's child_modules before it forks the
    parsing children: for the default model, one of them loads it."""
    modules = StaticEmbedder(wordllama_model()).child_modules
    assert "ingestion_pipeline.processing.default_model" in modules
    script = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]: importlib.import_module(name)\n"
        "from ingestion_pipeline.processing.static_embedder import _LOADED\n"
        "print([model.name for model in _LOADED])\n"
    )
    run = subprocess.run([sys.executable, "-c", script, *modules], check=True, capture_output=True, text=True)
    assert json.loads(run.stdout.replace("'", '"')) == ["wordllama-l2-supercat-256"]
    other = StaticEmbedder(folder_model(_model2vec_folder(tmp_path)))
    assert "ingestion_pipeline.processing.default_model" not in other.child_modules  # its children load it


def test_pickling_sends_the_paths_not_the_matrix():
    embedder = StaticEmbedder(wordllama_model())
    before = embedder.embed(TEXTS[:1])
    blob = pickle.dumps(embedder)
    assert len(blob) < 10_000  # the loaded 32,000 x 256 matrix stays behind
    assert pickle.loads(blob).embed(TEXTS[:1]) == before  # noqa: S301 - our own bytes


def _model2vec_folder(tmp_path: Path, rows: int | None = None) -> Path:
    """The package's weights saved as a Model2Vec model is saved (its first `rows` only)."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    model = wordllama_model()
    with safe_open(str(model.weights), framework="np") as tensors:
        matrix = tensors.get_tensor("embedding.weight")
    folder = tmp_path / "potion-like"
    folder.mkdir()
    save_file({"embeddings": matrix[:rows].copy()}, str(folder / "model.safetensors"))
    shutil.copy(model.tokenizer, folder / "tokenizer.json")
    return folder


def test_warming_makes_the_matrix_float32_and_changes_no_vector(tmp_path):
    """The worker's children warm the model (its matrix as float32, once) and embed with
    embed_array: the vectors a query's embed() makes from the matrix as stored, bit for bit.
    (A model of its own: the default model is shared by the whole process.)"""
    import numpy as np

    embedder = StaticEmbedder(folder_model(_model2vec_folder(tmp_path)))
    texts = [*TEXTS, _word_salad(2, 300)]
    stored = embedder.embed(texts)
    assert embedder._load().matrix.dtype == np.float16
    embedder.warm()
    assert embedder._load().matrix.dtype == np.float32
    warmed = embedder.embed_array(texts)
    assert (warmed.dtype, warmed.shape) == (np.float32, (len(texts), 256))
    assert warmed.tolist() == stored


def test_chunks_keep_the_float32_rows():
    """embed_chunks keeps embed_array's rows as they are (worker/copy_rows.py writes their
    bytes): the vectors of embed()."""
    import numpy as np

    from ingestion_pipeline.processing import embed_chunks
    from ingestion_pipeline.processing.model import Chunk

    embedder = StaticEmbedder(wordllama_model())
    chunks = [Chunk(n, None, None, text, len(text.split())) for n, text in enumerate(TEXTS)]
    embedded = embed_chunks(chunks, embedder)
    assert all(isinstance(c.embedding, np.ndarray) and c.embedding.dtype == np.float32 for c in embedded)
    assert [np.asarray(c.embedding).tolist() for c in embedded] == embedder.embed(TEXTS)


def test_ids_beyond_a_smaller_matrix_are_clipped(tmp_path):
    """A tokenizer with more ids than the matrix has rows: its ids are clipped to the last row."""
    embedder = StaticEmbedder(folder_model(_model2vec_folder(tmp_path, rows=1000)))
    assert not embedder._load().ids_fit
    vectors = embedder.embed(TEXTS) or []
    assert all(math.isclose(_cosine(v, v), 1.0, rel_tol=1e-5) for v in vectors[:3])
    assert StaticEmbedder(wordllama_model())._load().ids_fit


def test_a_model2vec_folder_loads_and_is_named_by_its_weights(tmp_path):
    folder = _model2vec_folder(tmp_path)
    embedder = embedder_from_settings(load_settings(embedder="static", static_model_path=str(folder)))
    assert isinstance(embedder, StaticEmbedder)
    assert (embedder.name, embedder.dimensions, len(embedder.version)) == ("static:potion-like", 256, 16)
    assert embedder.embed(TEXTS[:2]) == StaticEmbedder(wordllama_model()).embed(TEXTS[:2])


def test_a_sentence_transformers_static_module_loads(tmp_path):
    inner = _model2vec_folder(tmp_path)
    outer = tmp_path / "st-model"
    outer.mkdir()
    inner.rename(outer / "0_StaticEmbedding")
    assert folder_model(outer).weights.parent.name == "0_StaticEmbedding"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", r"is not a folder"),
        ("empty", r"needs model\.safetensors and tokenizer\.json"),
    ],
)
def test_a_bad_folder_is_one_clear_line(tmp_path, setup, message):
    folder = tmp_path / "model"
    if setup == "empty":
        folder.mkdir()
    with pytest.raises(ConfigError, match=rf"^bad setting INGEST_STATIC_MODEL_PATH: .*{message}"):
        folder_model(folder)


def test_static_without_a_path_is_refused():
    with pytest.raises(ConfigError, match=r"^bad settings: INGEST_STATIC_MODEL_PATH must be set when INGEST_EMB"):
        load_settings(embedder="static")


def test_the_samples_indexed_by_default_answer_a_paraphrase_by_vector(db_url, capsys):
    """What `make demo` shows: the default embedder indexes vectors, offline, and vector
    search finds the page for words it does not contain."""
    samples = Path(__file__).resolve().parents[2] / "samples"
    assert ingest(["enqueue", str(samples), "--database-url", db_url]) == 0
    assert ingest(["work", "--drain", "--parse-processes", "1", "--database-url", db_url]) == 0
    words = set(PARAPHRASE.split())
    page = (samples / "river-otters.html").read_text().lower()
    assert not {w for w in words if re.search(rf"\b{w}", page)}, "the paraphrase must share no word with its page"
    capsys.readouterr()
    assert ingest(["search", PARAPHRASE, "--mode", "vector", "--json", "--database-url", db_url]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["source_name"] == "river-otters.html", hits
    assert ingest(["search", PARAPHRASE, "--mode", "lexical", "--json", "--database-url", db_url]) == 0
    assert json.loads(capsys.readouterr().out) == []  # no word of it is there to find


@pytest.mark.parametrize("name", ["wordllama", "hash", "none"])
def test_ingest_work_takes_every_embedder_by_name(db_url, name):
    """`ingest work --embedder` offers every INGEST_EMBEDDER value, the default included
    (it offered none, hash and openai only)."""
    assert ingest(["work", "--drain", "--embedder", name, "--database-url", db_url]) == 0


def test_ingest_work_refuses_static_without_its_folder_in_one_line(db_url, capsys):
    assert ingest(["work", "--drain", "--embedder", "static", "--database-url", db_url]) != 0
    assert "INGEST_STATIC_MODEL_PATH" in capsys.readouterr().err
