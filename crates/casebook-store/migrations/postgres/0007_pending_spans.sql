-- Spans the OTLP receiver has received and not yet made cases of, as in the embedded store's
-- migration 0012.
CREATE TABLE pending_spans (
    project TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    dataset TEXT NOT NULL,
    received BIGINT NOT NULL,
    root BIGINT NOT NULL,
    span TEXT NOT NULL,
    PRIMARY KEY (project, trace_id, span_id)
);

CREATE TABLE captured_traces (
    project TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    captured BIGINT NOT NULL,
    cases TEXT NOT NULL,
    PRIMARY KEY (project, trace_id)
);
