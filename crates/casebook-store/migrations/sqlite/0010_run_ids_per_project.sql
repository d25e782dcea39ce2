-- A run's id is unique within its project, as a dataset's name is: beginning a run with an id
-- that another project uses succeeds, and so tells nothing of that project. `runs` is rebuilt
-- (SQLite cannot change a `UNIQUE` constraint in place); no table refers to it.
CREATE TABLE runs_new (
    seq INTEGER PRIMARY KEY,
    project TEXT NOT NULL DEFAULT 'default',
    id TEXT NOT NULL,
    experiment TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT,
    meta TEXT NOT NULL,
    summary TEXT,
    UNIQUE (project, id)
);
INSERT INTO runs_new (seq, project, id, experiment, started, finished, meta, summary)
    SELECT seq, project, id, experiment, started, finished, meta, summary FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_project ON runs (project, seq);
