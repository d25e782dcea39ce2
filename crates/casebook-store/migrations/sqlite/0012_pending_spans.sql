-- Spans the OTLP receiver (`casebook serve`) has received and not yet made cases of, per project
-- and trace, so that a trace that arrives in several batches becomes its cases once, whole, and
-- survives a restart of the server. `span` is the span as casebook reads it (JSON of
-- `casebook_formats::capture::Span`); `root` is 1 for a span without a parent; `received` is
-- the server's clock in Unix milliseconds. `captured_traces` says when a trace became cases and
-- their content ids, so that late spans rebuild the cases still as captured (`cases`: a JSON
-- object, case id -> content id).
CREATE TABLE pending_spans (
    project TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    dataset TEXT NOT NULL,
    received INTEGER NOT NULL,
    root INTEGER NOT NULL,
    span TEXT NOT NULL,
    PRIMARY KEY (project, trace_id, span_id)
) WITHOUT ROWID;

CREATE TABLE captured_traces (
    project TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    captured INTEGER NOT NULL,
    cases TEXT NOT NULL,
    PRIMARY KEY (project, trace_id)
) WITHOUT ROWID;
