-- Validate the widened state checks of 20261201000200_document_lifecycle.sql in a transaction
-- of their own: VALIDATE CONSTRAINT takes a SHARE UPDATE EXCLUSIVE lock, so reads and writes
-- of the queue go on while the existing rows are scanned.
alter table public.ingestion_jobs validate constraint ingestion_jobs_status_check;
alter table public.import_batches validate constraint import_batches_status_check;
alter table public.documents validate constraint documents_status_check;
