"""Test utilities shipped with the package, for this project's tests and benches and for
users' own tests of a pipeline: `openai_server.OpenAIServer`, a local OpenAI-compatible
embeddings server with injectable faults (no network, no model files)."""
