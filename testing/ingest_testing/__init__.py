"""The project's test tooling, for its tests and benches and for users' own tests of a
pipeline: `openai_server.OpenAIServer`, a local OpenAI-compatible embeddings server with
injectable faults (no network, no model files), and `converted`, a corpus made by the
converters people's files come from. A distribution of its own (testing/pyproject.toml),
installed by the `[test]` extra: `pip install ingestion-pipeline` carries none of it."""
