-- Projects and API keys, as in the embedded store's migration 0009: a project is a namespace
-- of datasets, runs and stored outputs; an API key opens exactly one. What was stored before
-- is in the project `default`.
ALTER TABLE datasets ADD COLUMN project text COLLATE "C" NOT NULL DEFAULT 'default';
ALTER TABLE datasets DROP CONSTRAINT datasets_name_key;
ALTER TABLE datasets ADD CONSTRAINT datasets_project_name_key UNIQUE (project, name);

ALTER TABLE runs ADD COLUMN project text COLLATE "C" NOT NULL DEFAULT 'default';
CREATE INDEX runs_project ON runs (project, seq);

ALTER TABLE run_outputs ADD COLUMN project text COLLATE "C" NOT NULL DEFAULT 'default';
ALTER TABLE run_outputs DROP CONSTRAINT run_outputs_hash_key;
ALTER TABLE run_outputs ADD CONSTRAINT run_outputs_project_hash_key UNIQUE (project, hash);

CREATE TABLE api_keys (
    id text COLLATE "C" PRIMARY KEY,
    project text COLLATE "C" NOT NULL,
    scope text NOT NULL CHECK (scope IN ('read', 'write')),
    hash bytea NOT NULL,
    label text NOT NULL,
    author text NOT NULL,
    created text NOT NULL,
    revoked text
);

CREATE TABLE secrets (
    name text PRIMARY KEY,
    value bytea NOT NULL
);
