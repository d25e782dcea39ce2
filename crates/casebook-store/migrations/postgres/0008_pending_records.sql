-- GenAI log records kept with the pending spans, and the warnings of background captures, as in
-- the embedded store's migration 0013.
ALTER TABLE pending_spans ADD COLUMN kind BIGINT NOT NULL DEFAULT 0;

CREATE TABLE capture_warnings (
    id BIGSERIAL PRIMARY KEY,
    project TEXT NOT NULL,
    dataset TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    at BIGINT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX capture_warnings_dataset ON capture_warnings (project, dataset, id);
