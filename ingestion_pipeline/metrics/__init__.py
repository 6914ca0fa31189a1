"""Metrics for operators in Prometheus text format (`ingest metrics`, docs/metrics.md).

queue.py reads the queue from the database at each scrape (ingestion_queue_metrics), so the
numbers are every worker's, wherever it runs; searches.py keeps a histogram of the searches
of the process it runs in (a search's latency is known only to its client); exporter.py
serves both. Every module here imports prometheus_client, the `[metrics]` extra: nothing
below this package imports it (import-linter), and this file imports none of them.
"""
