-- airlock audit trail: one row per event of the AIRLOCK_EVENTS stream.
-- Runs on ClickHouse 18.16 and current releases: no DateTime64, TTL, Map,
-- JSON types, LowCardinality or Bool. Time is DateTime('UTC') (the stream's
-- store time) plus a milliseconds column.
-- ReplacingMergeTree on (agent_id, call_id, seq): a row written twice (two
-- sink replicas racing, an insert retried after an ambiguous failure) is the
-- same row, and reads use FINAL, so nothing is counted twice.
CREATE TABLE IF NOT EXISTS events (
    seq             UInt64,
    event_id        String,
    ts              DateTime('UTC'),
    ts_ms           UInt16,
    type            String,
    agent_id        String,
    thread_id       String,
    call_id         String,
    revision        UInt32,
    server          String,
    tool            String,
    actor_type      String,
    actor_id        String,
    actor_channel   String,
    decision        String,
    reason          String,
    risk            String,
    rule_id         String,
    policy_revision String,
    decision_id     String,
    args_digest     String,
    payload         String,
    latency_ms      Nullable(Float64),
    prev_hash       FixedString(64),
    hash            FixedString(64),
    ingested_at     DateTime('UTC')
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (agent_id, call_id, seq)
