-- Example queries for auditors (clickhouse-client --user auditor -d airlock).
-- Always read with FINAL: a row the sink wrote twice (a retried insert,
-- two replicas racing) is then counted once. ts is the stream's store time
-- (UTC, seconds) and ts_ms its milliseconds.

-- Everything that happened to one call, in order (a timeline).
SELECT seq, ts, ts_ms, type, actor_type, actor_id, decision, reason
FROM events FINAL WHERE call_id = 'call_123' ORDER BY seq;

-- One conversation (thread) across its calls.
SELECT seq, ts, call_id, type, concat(server, '__', tool) AS tool, decision, actor_id
FROM events FINAL WHERE thread_id = 'th-42' ORDER BY seq;

-- Who approved or rejected what in the last 7 days.
SELECT ts, actor_id, decision, call_id, agent_id, reason
FROM events FINAL
WHERE type IN ('approved', 'rejected', 'changes_requested') AND ts >= now() - 7 * 86400
ORDER BY seq;

-- Everything a given reviewer did (including refused attempts).
SELECT ts, type, call_id, decision, reason FROM events FINAL WHERE actor_id = 'alice' ORDER BY seq;

-- Calls denied by policy, by rule, this month.
SELECT rule_id, count() AS denied FROM events FINAL
WHERE type = 'denied' AND toYYYYMM(ts) = toYYYYMM(now()) GROUP BY rule_id ORDER BY denied DESC;

-- Tool executions that failed, with latency.
SELECT ts, call_id, concat(server, '__', tool) AS tool, reason, latency_ms FROM events FINAL
WHERE type = 'failed' ORDER BY seq DESC LIMIT 100;

-- Latency of completed tool runs, per agent (quantiles work on 18.16).
SELECT agent_id, count() AS runs, quantile(0.5)(latency_ms) AS p50_ms, quantile(0.95)(latency_ms) AS p95_ms
FROM events FINAL WHERE type = 'completed' GROUP BY agent_id;

-- Approval rate per tool (decided calls only): tool names are on the
-- approval_requested row; the human outcome is on a later row of the call.
SELECT tool, countIf(outcome = 'approved') / count() AS approval_rate, count() AS decided
FROM (
    SELECT call_id, revision, any(concat(server, '__', tool)) AS tool
    FROM events FINAL WHERE type = 'approval_requested' GROUP BY call_id, revision
) ANY INNER JOIN (
    SELECT call_id, revision, argMin(type, seq) AS outcome
    FROM events FINAL WHERE type IN ('approved', 'rejected', 'changes_requested') GROUP BY call_id, revision
) USING (call_id, revision)
GROUP BY tool ORDER BY decided DESC;

-- Find the audit rows of a disputed call by the digest of its full arguments
-- (hex SHA-256 of the canonical JSON; redacted values are still covered).
SELECT seq, ts, type, call_id, actor_id FROM events FINAL WHERE args_digest = '<64 hex chars>' ORDER BY seq;

-- What decided each call: a person, a rule, a standing grant or the timeout.
SELECT decided_by, type, count() AS events FROM events FINAL
WHERE decided_by != '' GROUP BY decided_by, type ORDER BY events DESC LIMIT 50;

-- Every vote toward a quorum and every refused decision, with who made it.
SELECT ts, type, actor_id, call_id, reason FROM events FINAL
WHERE type IN ('vote_cast', 'decision_refused', 'unauthorized_attempt') ORDER BY seq;

-- One standing grant's life: created, each call it allowed, revoked or expired.
SELECT seq, ts, type, call_id, actor_id, reason FROM events FINAL WHERE grant_id = 'grant_0123' ORDER BY seq;

-- Sign-ins, API tokens and rule changes.
SELECT ts, type, actor_id, reason FROM events FINAL
WHERE type IN ('sign_in', 'token_created', 'token_revoked', 'policy_changed', 'audit_pruned') ORDER BY seq;

-- Chain links at a glance (airlock audit verify checks them with the key).
SELECT seq, prev_hash, hash FROM events FINAL ORDER BY seq DESC LIMIT 5;

-- Retention: `airlock audit drop-before YYYY-MM --yes` drops whole months and
-- records it (audit_pruned), so verify still accepts the first kept row.
