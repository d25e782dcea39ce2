-- `casebook purge` (issue 39): cases erased from every version of a dataset. A purge is a row
-- of `purges` (who, when, why; the head it was made at); the membership rows of its cases move
-- from `members` to `purged_members`, which keeps each one's content id (the tombstone: a
-- version's id is recomputed from it, without the text) and its place in the order, while the
-- bodies themselves are deleted. A purged row still open at the purge (`to_v` NULL) belongs to
-- the versions up to `purges.head` only: later versions never held it.
CREATE TABLE purges (
    id INTEGER PRIMARY KEY,
    dataset INTEGER NOT NULL REFERENCES datasets (id),
    time TEXT NOT NULL,
    author TEXT NOT NULL,
    reason TEXT NOT NULL,
    head INTEGER NOT NULL,
    versions INTEGER NOT NULL,
    results INTEGER NOT NULL
);
CREATE INDEX purges_dataset ON purges (dataset, id);

CREATE TABLE purged_members (
    dataset INTEGER NOT NULL REFERENCES datasets (id),
    case_id TEXT NOT NULL,
    from_v INTEGER NOT NULL,
    to_v INTEGER,
    cid BLOB NOT NULL,
    ord REAL NOT NULL,
    purge INTEGER NOT NULL REFERENCES purges (id),
    PRIMARY KEY (dataset, case_id, from_v)
) WITHOUT ROWID;
-- Results of runs are matched to purged content by content id (a run saving a result after the
-- purge drops it).
CREATE INDEX purged_members_cid ON purged_members (cid);

-- Keys of the `admin` scope may purge.
CREATE TABLE api_keys_new (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    hash BLOB NOT NULL,
    label TEXT NOT NULL,
    author TEXT NOT NULL,
    created TEXT NOT NULL,
    revoked TEXT
);
INSERT INTO api_keys_new (id, project, scope, hash, label, author, created, revoked)
    SELECT id, project, scope, hash, label, author, created, revoked FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_new RENAME TO api_keys;
