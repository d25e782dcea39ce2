-- The bodies by review state, for the filters that require one (`review == "draft"`: the review
-- queue, "next unreviewed", the API's `where`): the store reads the few bodies in that state here
-- and looks their members up in the version (`members_blob`), instead of reading every case's
-- facets in the version's order until a page is full. Only bodies with a review state are in it,
-- so an import of cases without one writes nothing here. The expression is the one
-- `sqlite::select_sql` writes, character for character, which SQLite needs to use the index.
CREATE INDEX blob_facets_review ON blob_facets (facets ->> '$.review') WHERE facets ->> '$.review' IS NOT NULL;
