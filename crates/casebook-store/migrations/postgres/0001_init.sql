-- The shared store's schema: the embedded store's (migrations/sqlite, as of its schema 7) in
-- PostgreSQL's terms.
--
-- Case ids and labels are `bytea`: they may hold any character, U+0000 included (which `text`
-- cannot), and compare byte by byte as SQLite compares them, so that a version's content id,
-- which hashes its changes in case-id order, is the same in both stores. Names of datasets and
-- tags are `text` in the "C" collation, for the same order.

CREATE TABLE blobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cid bytea NOT NULL,
    body text NOT NULL
);
CREATE UNIQUE INDEX blobs_cid ON blobs (cid);

-- Seed files' documents, once each, by content id (`seeds.rs`): a case body that carries one
-- holds a reference to it.
CREATE TABLE seed_documents (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cid bytea NOT NULL UNIQUE,
    document text NOT NULL
);

-- The fields filters read most (`casebook_filter::facets_json`), as JSON text: `json`, not
-- `jsonb`, so numbers keep the text they were written with, which exact comparisons need.
-- `nul`: the body holds a `\u0000`, which PostgreSQL's JSON functions refuse; filters test such
-- a case in memory.
CREATE TABLE blob_facets (
    blob bigint PRIMARY KEY REFERENCES blobs (id),
    facets json NOT NULL,
    nul boolean NOT NULL
);
CREATE INDEX blob_facets_nul ON blob_facets (blob) WHERE nul;

CREATE TABLE case_labels (
    label bytea NOT NULL,
    blob bigint NOT NULL REFERENCES blobs (id),
    PRIMARY KEY (label, blob)
);

CREATE TABLE datasets (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE,
    header text NOT NULL,
    head bigint NOT NULL DEFAULT 0,
    cases bigint NOT NULL DEFAULT 0
);

CREATE TABLE versions (
    dataset bigint NOT NULL REFERENCES datasets (id),
    number bigint NOT NULL,
    cid text COLLATE "C" NOT NULL,
    parent bigint,
    author text NOT NULL,
    time text NOT NULL,
    message text NOT NULL,
    added bigint NOT NULL,
    removed bigint NOT NULL,
    modified bigint NOT NULL,
    cases bigint NOT NULL,
    PRIMARY KEY (dataset, number)
);
CREATE INDEX versions_cid ON versions (dataset, cid);

-- Membership as intervals: a case's row is in versions from_v ..< to_v (to_v NULL: the head).
CREATE TABLE members (
    dataset bigint NOT NULL REFERENCES datasets (id),
    case_id bytea NOT NULL,
    from_v bigint NOT NULL,
    to_v bigint,
    blob bigint NOT NULL REFERENCES blobs (id),
    ord double precision NOT NULL,
    PRIMARY KEY (dataset, case_id, from_v)
);
CREATE INDEX members_ord ON members (dataset, ord) INCLUDE (from_v, to_v, blob);
CREATE INDEX members_from ON members (dataset, from_v) WHERE from_v > 1;
CREATE INDEX members_to ON members (dataset, to_v) WHERE to_v IS NOT NULL;
CREATE INDEX members_blob ON members (blob, dataset, from_v, to_v);

CREATE TABLE tags (
    dataset bigint NOT NULL REFERENCES datasets (id),
    name text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (dataset, name)
);

CREATE TABLE events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset bigint NOT NULL REFERENCES datasets (id),
    time text NOT NULL,
    author text NOT NULL,
    kind text NOT NULL,
    detail text NOT NULL
);

CREATE TABLE runs (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text COLLATE "C" NOT NULL UNIQUE,
    experiment text NOT NULL,
    started text NOT NULL,
    finished text,
    meta text NOT NULL,
    summary text
);

-- A run's results are keyed from its seq × 2^32, as in the embedded store.
CREATE TABLE run_results (
    key bigint PRIMARY KEY,
    result text NOT NULL
);

CREATE TABLE run_outputs (
    key bigint PRIMARY KEY,
    hash bytea NOT NULL UNIQUE,
    output text NOT NULL
);
