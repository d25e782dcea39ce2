-- Rows of a first version neither begin after v1 nor end: leave them out of the indexes that a
-- diff reads, so importing a large dataset writes two index entries a case instead of four.
DROP INDEX members_from;
CREATE INDEX members_from ON members (dataset, from_v) WHERE from_v > 1;
DROP INDEX members_to;
CREATE INDEX members_to ON members (dataset, to_v) WHERE to_v IS NOT NULL;
