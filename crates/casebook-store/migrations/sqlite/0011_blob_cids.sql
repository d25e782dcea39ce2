-- Bodies are found by content id through a table of their own instead of an index of `blobs`.
-- A commit looks its cases' content ids up here as it loads them, stores the bodies it does not
-- find, and enters their content ids only when the load is over, sorted (`load` and `NewBodies`
-- in `sqlite.rs`): one pass over the table's pages, where the index took a random insertion a
-- body, each dirtying a page that the page cache could not keep once the store held a million
-- bodies. `blobs.cid` stays, for reads that come to a body by its row id.
CREATE TABLE blob_cids (
    cid BLOB PRIMARY KEY,
    blob INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO blob_cids (cid, blob) SELECT cid, id FROM blobs ORDER BY cid;
DROP INDEX blobs_cid;
