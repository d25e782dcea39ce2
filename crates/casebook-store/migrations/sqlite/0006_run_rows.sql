-- Results and outputs move to rowid tables. A WITHOUT ROWID table keeps its rows in an index
-- b-tree, where a row of more than about 1,000 bytes (on 4 KiB pages) spills into an overflow
-- page of its own: each result of ~1 KB took two pages, and each one written or read touched
-- both. A rowid table keeps rows of up to 4 KiB in its leaves, several to a page.
--
-- A result's key is its run's `seq` times 2^32 plus its place in the run, so that a run's
-- results are one range of the table, in order. An output takes the key of the result that
-- first kept it, so that the outputs of one run lie together, in its order: a later run of the
-- same experiment (or `--regrade`) reads them page after page instead of one page each. They
-- are found by run hash through `run_outputs_hash`. Outputs kept before this migration take
-- keys below 2^32, which no run has.
-- Results of schema 5 wrote Rust's `Result` as `{"Ok": …}` / `{"Err": …}`; they now say
-- `"output": {…}` or `"error": {…}`, and each grade `"score", "pass", "rationale"` or
-- `"error"` in place of `"outcome"`.
UPDATE run_results SET result = json_set(
    CASE
        WHEN json_type(result, '$.output.Ok') IS NOT NULL
            THEN json_set(json_remove(result, '$.output'), '$.output', json(json_extract(result, '$.output.Ok')))
        WHEN json_type(result, '$.output.Err') IS NOT NULL
            THEN json_set(json_remove(result, '$.output'), '$.error', json(json_extract(result, '$.output.Err')))
        ELSE result
    END,
    '$.grades',
    json((SELECT json_group_array(json(CASE
            WHEN json_type(g.value, '$.outcome.Ok') IS NOT NULL
                THEN json_patch(json_remove(g.value, '$.outcome'), json_extract(g.value, '$.outcome.Ok'))
            WHEN json_type(g.value, '$.outcome.Err') IS NOT NULL
                THEN json_set(json_remove(g.value, '$.outcome'), '$.error', json(json_extract(g.value, '$.outcome.Err')))
            ELSE g.value
          END)) FROM json_each(result, '$.grades') g)))
WHERE json_valid(result) AND json_type(result, '$.output') = 'object';

CREATE TABLE results (
    key INTEGER PRIMARY KEY,
    result TEXT NOT NULL
);

INSERT INTO results (key, result)
    SELECT r.seq * 4294967296 + rr.seq, rr.result FROM run_results rr JOIN runs r ON r.id = rr.run;

DROP TABLE run_results;
ALTER TABLE results RENAME TO run_results;

CREATE TABLE outputs (
    key INTEGER PRIMARY KEY,
    hash BLOB NOT NULL,
    output TEXT NOT NULL
);

INSERT INTO outputs (key, hash, output)
    SELECT row_number() OVER (ORDER BY hash), unhex(hash), output FROM run_outputs;

DROP TABLE run_outputs;
ALTER TABLE outputs RENAME TO run_outputs;
CREATE UNIQUE INDEX run_outputs_hash ON run_outputs (hash);
