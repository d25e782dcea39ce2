-- What filters read besides the bodies.
--
-- The members that hold a body: a filter on labels finds the bodies that have a label in
-- `case_labels`, then their rows in a version here, instead of walking every row of the version.
CREATE INDEX members_blob ON members (blob, dataset, from_v, to_v);

-- The facets of each body (`casebook_filter::facets_json`): the case without its task,
-- expectation and label fields, about a tenth of its size, so a filter on metadata or
-- confidence parses tens of bytes a case instead of the whole body.
CREATE TABLE blob_facets (
    blob INTEGER PRIMARY KEY,
    facets TEXT NOT NULL
);

INSERT INTO blob_facets (blob, facets)
    SELECT id, json_remove(body, '$.labels', '$.input', '$.turns', '$.context', '$.tools', '$.memory_seeds', '$.agent_args',
                           '$.expected', '$.provenance')
    FROM blobs;
