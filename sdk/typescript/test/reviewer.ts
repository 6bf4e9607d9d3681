// What the adapters' tests do as a reviewer of the REST agent
// (AIRLOCK_TEST_REST_AGENT), with AIRLOCK_TEST_ADMIN_TOKEN.
import assert from "node:assert/strict";

/**
 * Decides the pending call callId of the REST agent once the approval
 * service holds its record: the agent learns that its call waits from the
 * policy's decision, which may reach it before the record exists.
 */
export async function decide(callId: string, verb: "approve" | "reject", reason: string): Promise<void> {
  const agent = process.env.AIRLOCK_TEST_REST_AGENT;
  const url = `${process.env.AIRLOCK_URL}/api/v1/approvals/${agent}/${callId}`;
  const headers = { Authorization: `Bearer ${process.env.AIRLOCK_TEST_ADMIN_TOKEN}`, "Content-Type": "application/json" };
  const deadline = Date.now() + 30_000;
  for (;;) {
    const got = await fetch(url, { headers });
    await got.text();
    if (got.ok) break;
    assert.ok(got.status === 404 && Date.now() < deadline, `${agent}/${callId} has no approval record: ${got.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const resp = await fetch(`${url}/${verb}`, { method: "POST", headers, body: JSON.stringify({ reason }) });
  assert.ok(resp.ok, `${verb} ${agent}/${callId}: ${resp.status} ${await resp.text()}`);
}
