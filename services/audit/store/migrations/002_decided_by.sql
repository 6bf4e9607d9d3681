-- What decided each event (human:<id>, rule:<id>, grant:<id>, timeout, ...)
-- and the standing grant it concerns. Both are covered by the keyed hash.
ALTER TABLE events ADD COLUMN decided_by String AFTER latency_ms, ADD COLUMN grant_id String AFTER decided_by
