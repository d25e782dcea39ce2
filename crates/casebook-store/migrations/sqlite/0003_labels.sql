-- The labels of each stored case, so that a filter on labels (`labels contains "math"`,
-- `label.category == "RCA"`) reads the cases that have them instead of every body of a version.
-- Derived from the bodies (kept in step by every commit); no foreign key, to keep imports fast.
CREATE TABLE case_labels (
    label TEXT NOT NULL,
    blob INTEGER NOT NULL,
    PRIMARY KEY (label, blob)
) WITHOUT ROWID;

INSERT OR IGNORE INTO case_labels (label, blob)
    SELECT j.value, b.id FROM blobs b, json_each(b.body, '$.labels') j WHERE j.type = 'text';
