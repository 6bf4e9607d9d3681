// What the adapters' tests do as a reviewer of the REST agent
// (AIRLOCK_TEST_REST_AGENT), with AIRLOCK_TEST_ADMIN_TOKEN.
import assert from "node:assert/strict";

/** Decides the pending call callId of the REST agent. */
export async function decide(callId: string, verb: "approve" | "reject", reason: string): Promise<void> {
  const agent = process.env.AIRLOCK_TEST_REST_AGENT;
  const resp = await fetch(`${process.env.AIRLOCK_URL}/api/v1/approvals/${agent}/${callId}/${verb}`, {
    method: "POST", headers: { Authorization: `Bearer ${process.env.AIRLOCK_TEST_ADMIN_TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({ reason }),
  });
  assert.ok(resp.ok, `${verb} ${agent}/${callId}: ${resp.status} ${await resp.text()}`);
}
