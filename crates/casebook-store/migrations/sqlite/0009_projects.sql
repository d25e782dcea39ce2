-- Projects and API keys, for a store that `casebook serve` shares between teams. A project is
-- a namespace: dataset names are unique within one, runs and stored outputs belong to one, and
-- an API key opens exactly one. Everything stored before is in the project `default`, the one
-- the command line works in unless told otherwise.
--
-- `datasets` is rebuilt (SQLite cannot change a `UNIQUE` constraint in place); the tables that
-- refer to it keep doing so by name, and keep its row ids.
CREATE TABLE datasets_new (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL DEFAULT 'default',
    name TEXT NOT NULL,
    header TEXT NOT NULL,
    head INTEGER NOT NULL DEFAULT 0,
    cases INTEGER NOT NULL DEFAULT 0,
    UNIQUE (project, name)
);
INSERT INTO datasets_new (id, project, name, header, head, cases)
    SELECT id, 'default', name, header, head, cases FROM datasets;
DROP TABLE datasets;
ALTER TABLE datasets_new RENAME TO datasets;

ALTER TABLE runs ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
CREATE INDEX runs_project ON runs (project, seq);

-- An output is reused only by runs of the project that kept it.
ALTER TABLE run_outputs ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
DROP INDEX run_outputs_hash;
CREATE UNIQUE INDEX run_outputs_hash ON run_outputs (project, hash);

-- API keys: the token is `cb_<id>_<secret>`; only a keyed BLAKE3 hash of it is kept (`keys.rs`),
-- with the key from the `secrets` row `api-keys`, made with the first key.
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('read', 'write')),
    hash BLOB NOT NULL,
    label TEXT NOT NULL,
    author TEXT NOT NULL,
    created TEXT NOT NULL,
    revoked TEXT
);

CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
