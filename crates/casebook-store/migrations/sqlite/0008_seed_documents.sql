-- Seed files' documents, once each (`seeds.rs`): a case that carries a seed file is stored with
-- `"memory_seeds": {"file": …, "content_id": …}` in its body, and the document here under that
-- content id (`casebook_canon::Kind::Seed`, 32 bytes), however many cases and versions name it.
-- Documents are found by content id through the `UNIQUE` index; a rowid table keeps documents
-- of up to a page in its leaves, and larger ones in overflow pages of their own.
--
-- Bodies stored before this migration keep their documents inside them: reading gives both
-- forms back the same, and neither a body nor its content id changes here.
CREATE TABLE seed_documents (
    id INTEGER PRIMARY KEY,
    cid BLOB NOT NULL UNIQUE,
    document TEXT NOT NULL
);
