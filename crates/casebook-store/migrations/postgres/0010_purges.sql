-- `casebook purge`: the embedded store's migration 0015 (tombstones of purged cases, the
-- purges' log, the `admin` scope of API keys).
CREATE TABLE purges (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset bigint NOT NULL REFERENCES datasets (id),
    time text NOT NULL,
    author text NOT NULL,
    reason text NOT NULL,
    head bigint NOT NULL,
    versions bigint NOT NULL,
    results bigint NOT NULL
);
CREATE INDEX purges_dataset ON purges (dataset, id);

CREATE TABLE purged_members (
    dataset bigint NOT NULL REFERENCES datasets (id),
    case_id bytea NOT NULL,
    from_v bigint NOT NULL,
    to_v bigint,
    cid bytea NOT NULL,
    ord double precision NOT NULL,
    purge bigint NOT NULL REFERENCES purges (id),
    PRIMARY KEY (dataset, case_id, from_v)
);
CREATE INDEX purged_members_cid ON purged_members (cid);

ALTER TABLE api_keys DROP CONSTRAINT api_keys_scope_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scope_check CHECK (scope IN ('read', 'write', 'admin'));
