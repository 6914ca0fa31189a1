"""The retrievers of ingestion_pipeline.integrations (docs/integrations.md) against the real
frameworks: a LlamaIndex RetrieverQueryEngine and a LangChain retrieval chain answer from
documents that `ingest` indexed (its enqueue, work and collection grant commands, in process),
with a fake model that echoes its prompt, so the answer shows what the model was given.
A reader granted one collection retrieves nothing of another, through the app-reader roles."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableParallel, RunnablePassthrough
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from ingestion_pipeline.api import Index, IngestError, Reader
from ingestion_pipeline.cli import main as ingest
from ingestion_pipeline.integrations import langchain as lc
from ingestion_pipeline.integrations import llama_index as li
from ingestion_pipeline.settings import load_settings

ALICE = UUID("00000000-0000-4000-8000-00000000a11c")
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
LEASES = (SAMPLES / "postgres-leases.md").resolve().as_uri()
TEA = (SAMPLES / "tea-notes.txt").resolve().as_uri()


@pytest.fixture
def index(db_url: str, capsys: pytest.CaptureFixture[str]) -> Iterator[Index]:
    """Leases in collection handbook, tea in kitchen, indexed by `ingest` (with the hash
    embedder's vectors, for the vector modes); alice reads handbook. The index searches
    without an embedder (lexical), whatever INGEST_EMBEDDER says."""
    for path, collection in (("postgres-leases.md", "handbook"), ("tea-notes.txt", "kitchen")):
        assert ingest(["enqueue", str(SAMPLES / path), "--collection", collection, "--database-url", db_url]) == 0
    assert ingest(["work", "--drain", "--embedder", "hash", "--database-url", db_url]) == 0
    assert ingest(["collection", "grant", "handbook", str(ALICE), "--database-url", db_url]) == 0
    capsys.readouterr()
    with Index.open(db_url, settings=load_settings(embedder="none")) as opened:
        yield opened


class EchoChatModel(BaseChatModel):
    """A chat model that answers with its prompt: what the chain gave it is the answer."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any) -> ChatResult:
        prompt = "\n".join(str(message.content) for message in messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=prompt))])


def test_a_llama_index_query_engine_answers_from_the_index(index: Index) -> None:
    retriever = li.IngestionRetriever(index=index, top_k=3)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())  # MockLLM echoes its prompt
    response = engine.query("What is fencing for a stale worker?")

    source = response.source_nodes[0]  # the best passage; others may be of the same page
    assert {s.node.metadata["source_uri"] for s in response.source_nodes} == {LEASES}
    metadata = source.node.metadata
    assert metadata["source_uri"] == LEASES
    assert metadata["title"] == "Leases and fencing in a PostgreSQL job queue"
    assert metadata["heading_path"].endswith("Why fencing matters")
    assert (metadata["collection"], metadata["page"]) == ("handbook", 1)
    assert source.score == metadata["score"] and source.score is not None and source.score > 0
    answer = str(response)
    assert "its late completion changes nothing. This is called fencing." in answer  # the whole passage
    assert f"source_uri: {LEASES}" in answer  # with its source, to cite
    assert "page: 1" in answer
    assert "document_id" not in answer and "score" not in answer  # for code, not for the model
    assert source.node.node_id == f"{metadata['document_id']}:{metadata['chunk_ordinal']}"


def test_the_async_paths_retrieve_the_same(index: Index) -> None:
    engine = RetrieverQueryEngine.from_args(li.IngestionRetriever(index=index), llm=MockLLM())
    response = asyncio.run(engine.aquery("What is fencing for a stale worker?"))
    assert {source.node.metadata["source_uri"] for source in response.source_nodes} == {LEASES}
    docs = asyncio.run(lc.IngestionRetriever(index=index).ainvoke("green tea"))
    assert {doc.metadata["source_uri"] for doc in docs} == {TEA}


def test_a_langchain_chain_answers_from_the_index(index: Index) -> None:
    retriever = lc.IngestionRetriever(index=index, top_k=3)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from these sources only:\n\n{context}"), ("human", "{question}")]
    )

    def sources(docs: list[Document]) -> str:
        return "\n\n".join(f"[{doc.metadata['source_uri']}]\n{doc.page_content}" for doc in docs)

    answer = (
        RunnablePassthrough.assign(context=lambda x: sources(x["docs"])) | prompt | EchoChatModel() | StrOutputParser()
    )
    chain = RunnableParallel(docs=retriever, question=RunnablePassthrough()).assign(answer=answer)
    result = chain.invoke("How long should green tea steep?")

    doc = result["docs"][0]
    assert {d.metadata["source_uri"] for d in result["docs"]} == {TEA}
    assert (doc.metadata["collection"], doc.metadata["title"]) == ("kitchen", "Notes on brewing green tea")
    assert doc.id == f"{doc.metadata['document_id']}:{doc.metadata['chunk_ordinal']}"
    assert f"[{TEA}]\n" in result["answer"] and "Steep it for one to three minutes" in result["answer"]
    assert result["answer"].endswith("How long should green tea steep?")


@pytest.mark.usefixtures("index")
@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
@pytest.mark.parametrize("framework", ["llama_index", "langchain"])
def test_a_reader_granted_one_collection_retrieves_nothing_of_another(db_url: str, framework: str, mode: str) -> None:
    def retrieved(query: str, **scope: Any) -> list[tuple[str, str]]:
        """The documents of the passages retrieved (several passages may be of one)."""
        if framework == "llama_index":
            nodes = li.IngestionRetriever(index=hashed, mode=mode, **scope).retrieve(query)
            found = [(n.node.metadata["collection"], n.node.metadata["source_uri"]) for n in nodes]
        else:
            docs = lc.IngestionRetriever(index=hashed, mode=mode, **scope).invoke(query)
            found = [(d.metadata["collection"], d.metadata["source_uri"]) for d in docs]
        return sorted(set(found))

    alice = Reader(ALICE)
    kitchen, handbook = ("kitchen", TEA), ("handbook", LEASES)
    with Index.open(db_url, settings=load_settings(embedder="hash")) as hashed:
        assert kitchen in retrieved("green tea steep")  # the owner reads every collection
        # alice: her collection only, whatever the query; with a vector list every document she
        # may read is near enough to be found, and only those
        assert retrieved("green tea steep", reader=alice) == ([] if mode == "lexical" else [handbook])
        # a collection she may not read is refused in the words for one that does not exist
        for name in ("kitchen", "nosuch"):
            with pytest.raises(IngestError) as refused:
                retrieved("green tea steep", reader=alice, collections=name)
            assert str(refused.value) == f"no collection {name!r}"
        assert retrieved("fencing", reader=alice) == [handbook]
        assert retrieved("fencing", reader=Reader()) == []  # anon: no collection is public
        assert retrieved("fencing", collections=["kitchen"]) == ([] if mode == "lexical" else [kitchen])
        assert retrieved("fencing", top_k=1) == [handbook]


def test_no_arguments_open_the_configured_database_and_close_it(
    db_url: str, index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    for opened in (li.IngestionRetriever(), lc.IngestionRetriever()):
        with opened as retriever:
            assert retriever.index.url == db_url
            assert retriever.index is not index
        with pytest.raises(IngestError, match="this index is closed"):
            retriever.index.search("fencing")
    with lc.IngestionRetriever(index=index), li.IngestionRetriever(index=index):
        pass
    assert index.search("fencing")  # an index given stays open


@pytest.mark.parametrize("framework", [li.IngestionRetriever, lc.IngestionRetriever])
def test_bad_arguments_fail_at_construction(framework: Any, index: Index) -> None:
    # LangChain's retriever is a pydantic model: its own ValidationError (a ValueError) names the modes
    with pytest.raises((IngestError, ValueError), match=r"unknown search mode 'fuzzy'|'lexical', 'vector' or 'hybrid'"):
        framework(index=index, mode="fuzzy")
    with pytest.raises(IngestError, match="top_k must be a whole number from 1 to 200, not 0"):
        framework(index=index, top_k=0)


def test_passages_are_the_best_chunks_as_the_reader_may_read_them(index: Index, db_url: str) -> None:
    """Index.passages, what the retrievers' text is: the hit's whole chunk, never more than the
    reader may read (a reader handed another's hits gets their snippets back, nothing more)."""
    [tea] = index.search("green tea steep")
    [passage] = index.passages([tea])
    assert tea.snippet.endswith("longer [steeping]")  # a few words around the terms, highlighted
    assert passage.startswith("Notes on brewing green tea\n\nGreen tea is best brewed with water well below boiling")
    assert "each infusion tastes a little different" in passage
    assert index.passages([tea], reader=Reader(ALICE)) == [tea.snippet]  # kitchen is not alice's
    assert index.passages([]) == []
    assert ingest(["delete", str(SAMPLES / "tea-notes.txt"), "--collection", "kitchen", "--database-url", db_url]) == 0
    assert index.passages([tea]) == [tea.snippet]  # gone since the search
