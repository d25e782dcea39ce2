-- The content-id index of `blobs` becomes an index of its own (it was the table's `UNIQUE`
-- constraint, which cannot be dropped), so that the first import into an empty store can
-- build it once after loading instead of inserting a million random keys into it
-- (`Bulk` in `sqlite.rs`). SQLite cannot drop a constraint: the table is rebuilt. (Migrations
-- run with foreign keys off and are checked with `PRAGMA foreign_key_check` before they
-- commit: `members` refers to `blobs`.)
CREATE TABLE blobs_new (
    id INTEGER PRIMARY KEY,
    cid BLOB NOT NULL,
    body TEXT NOT NULL
);

INSERT INTO blobs_new (id, cid, body) SELECT id, cid, body FROM blobs ORDER BY id;
DROP TABLE blobs;
ALTER TABLE blobs_new RENAME TO blobs;
CREATE UNIQUE INDEX blobs_cid ON blobs (cid);
