-- The bodies by review state, as the embedded store's migration 0014: for the filters that require
-- one (`review == "draft"`), the few bodies in that state are read here and their members looked
-- up in the version (`members_blob`). A body holding a `\u0000` (`nul`) is left out: PostgreSQL's
-- JSON functions refuse it, and filters test such a case in memory. The expression is the one
-- `postgres::SelectQuery::plan` writes, which PostgreSQL needs to use the index.
CREATE INDEX blob_facets_review ON blob_facets ((CASE WHEN nul THEN NULL ELSE facets ->> 'review' END))
    WHERE (CASE WHEN nul THEN NULL ELSE facets ->> 'review' END) IS NOT NULL;
