-- One page of a version's cases, unfiltered, as `PostgresStore::page_json` answers it: the page's
-- bodies joined with commas, how many there are, and the place of the last (NULL `after_ord`:
-- from the start).
--
-- A function for its plan. Sent as a statement, the query was planned again at every page: its
-- plan for any cursor (PostgreSQL's "generic" plan) looks dearer than one made for a given cursor,
-- so PostgreSQL never kept it, and planning was a fifth of the server's time on a page. Here the
-- plan is made once per connection for any cursor and size (it is the same plan: the index in
-- page order, stopping after the page's rows); without parallel workers, which a plan made for an
-- unknown `LIMIT` would otherwise start for every page.
CREATE FUNCTION casebook_page(
    p_dataset bigint, p_version bigint, p_after_ord double precision, p_after_id bytea, p_size bigint,
    OUT bodies text, OUT n bigint, OUT last_ord double precision, OUT last_id bytea)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET max_parallel_workers_per_gather = 0
AS $$
BEGIN
    -- The bodies in the subquery's order, which PostgreSQL keeps for a subquery with a `LIMIT`
    -- (the conformance suite compares every page with `page`).
    IF p_after_ord IS NULL THEN
        SELECT coalesce(string_agg(page.body, ','), ''), count(*), max(page.ord), (array_agg(page.case_id))[count(*)]
        INTO bodies, n, last_ord, last_id
        FROM (SELECT b.body, m.ord, m.case_id FROM members m JOIN blobs b ON b.id = m.blob
              WHERE m.dataset = p_dataset AND m.from_v <= p_version AND (m.to_v IS NULL OR m.to_v > p_version)
              ORDER BY m.ord, m.case_id LIMIT p_size) AS page;
    ELSE
        SELECT coalesce(string_agg(page.body, ','), ''), count(*), max(page.ord), (array_agg(page.case_id))[count(*)]
        INTO bodies, n, last_ord, last_id
        FROM (SELECT b.body, m.ord, m.case_id FROM members m JOIN blobs b ON b.id = m.blob
              WHERE m.dataset = p_dataset AND m.from_v <= p_version AND (m.to_v IS NULL OR m.to_v > p_version)
                AND m.ord >= p_after_ord AND (m.ord > p_after_ord OR m.case_id > p_after_id)
              ORDER BY m.ord, m.case_id LIMIT p_size) AS page;
    END IF;
END
$$;
