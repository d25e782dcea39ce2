-- Experiment runs (`casebook run`): each run's settings and summary, its results in order, and
-- the agents' outputs by run hash, which later runs reuse instead of calling the agent again
-- (and `--regrade` grades afresh). Results and outputs are JSON written by casebook-runner.
-- `seq` orders runs as they were begun (two may start in the same second).
CREATE TABLE runs (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    experiment TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT,
    meta TEXT NOT NULL,
    summary TEXT
);

CREATE TABLE run_results (
    run TEXT NOT NULL REFERENCES runs (id),
    seq INTEGER NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (run, seq)
) WITHOUT ROWID;

CREATE TABLE run_outputs (
    hash TEXT PRIMARY KEY,
    output TEXT NOT NULL
) WITHOUT ROWID;
