-- GenAI events of OpenTelemetry log records the OTLP receiver got on `/v1/logs` are kept with the
-- spans of their trace (`kind` 1; a span is `kind` 0), so that they join their spans when the
-- trace becomes cases, as `casebook capture traces.json logs.json` joins them. A record's
-- `span_id` is its span's id, `/` and a digest of the record (a record sent twice is kept once);
-- `span` holds the record (JSON of `casebook_formats::capture::logs::Record`).
ALTER TABLE pending_spans ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;

-- Warnings of the receiver's background captures, per dataset, the most recent kept (see
-- `casebook_store::CAPTURE_WARNINGS_KEPT`), so that `casebook capture --pending` shows them.
-- `at` is the server's clock in Unix milliseconds.
CREATE TABLE capture_warnings (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    dataset TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX capture_warnings_dataset ON capture_warnings (project, dataset, id);
