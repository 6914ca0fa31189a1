"""Thin layers over the Python API (`Index`) for the tools RAG code and agents already use:
`integrations.llama_index` and `integrations.langchain`, retrievers over the search RPC
(docs/integrations.md), and `integrations.mcp_server`, the MCP server of `ingest mcp`
(docs/mcp.md); each needs its extra (llama-index, langchain, mcp: docs/integrations.md says how
to install one), and without it says so in one line (extras.py).

This package imports no framework itself: each lives in its own module, imported only by
code that asks for it, so `import ingestion_pipeline` and `ingest` never load one
(tests/unit/test_optional_extras.py)."""
