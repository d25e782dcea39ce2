-- casebook's embedded store. Versions are kept as intervals: a member row says that case
-- `case_id` had content `cid` from version `from_v` up to (not including) `to_v`; NULL means it
-- is still in the head. A version is the rows whose interval contains it, so a one-case edit
-- writes two rows, a diff reads only the rows that start or end between two versions, and any
-- old version lists as fast as the head.

-- Case bodies, once each, whatever dataset or version uses them. `cid` is the case's content
-- id (32 bytes); rows are found by it, and members point at them by rowid.
CREATE TABLE blobs (
    id INTEGER PRIMARY KEY,
    cid BLOB NOT NULL UNIQUE,
    body TEXT NOT NULL
);

CREATE TABLE datasets (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    header TEXT NOT NULL,
    head INTEGER NOT NULL DEFAULT 0,
    cases INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE versions (
    dataset INTEGER NOT NULL REFERENCES datasets (id),
    number INTEGER NOT NULL,
    cid TEXT NOT NULL,
    parent INTEGER,
    author TEXT NOT NULL,
    time TEXT NOT NULL,
    message TEXT NOT NULL,
    added INTEGER NOT NULL,
    removed INTEGER NOT NULL,
    modified INTEGER NOT NULL,
    cases INTEGER NOT NULL,
    PRIMARY KEY (dataset, number)
) WITHOUT ROWID;

CREATE INDEX versions_cid ON versions (cid);

CREATE TABLE members (
    dataset INTEGER NOT NULL REFERENCES datasets (id),
    case_id TEXT NOT NULL,
    from_v INTEGER NOT NULL,
    to_v INTEGER,
    blob INTEGER NOT NULL REFERENCES blobs (id),
    ord REAL NOT NULL,
    PRIMARY KEY (dataset, case_id, from_v)
) WITHOUT ROWID;

-- Listing any version in order straight off this index (it holds what the filter needs), and
-- the rows a diff needs.
CREATE INDEX members_ord ON members (dataset, ord, from_v, to_v, blob);
CREATE INDEX members_from ON members (dataset, from_v);
CREATE INDEX members_to ON members (dataset, to_v);

CREATE TABLE tags (
    dataset INTEGER NOT NULL REFERENCES datasets (id),
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (dataset, name)
) WITHOUT ROWID;

-- What happened to a dataset besides new versions: tags set or moved, header edits.
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    dataset INTEGER NOT NULL REFERENCES datasets (id),
    time TEXT NOT NULL,
    author TEXT NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL
);
