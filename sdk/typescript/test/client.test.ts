// The client against a real `airlock dev` (tests/typescript_sdk_test.go
// starts it), over REST and over NATS. Environment: AIRLOCK_URL,
// AIRLOCK_TOKEN (agent AIRLOCK_TEST_REST_AGENT), AIRLOCK_CREDENTIAL (agent
// AIRLOCK_TEST_NATS_AGENT), AIRLOCK_TEST_ADMIN_TOKEN (a reviewer). The dev
// configuration denies demo__write_file on paths under secret/.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as airlock from "../src/index.js";
import { env } from "./env.js";


async function admin(method: string, path: string, body?: unknown): Promise<any> {
  const resp = await fetch(env("AIRLOCK_URL") + path, {
    method, headers: { Authorization: `Bearer ${env("AIRLOCK_TEST_ADMIN_TOKEN")}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  assert.ok(resp.ok, `${method} ${path}: ${resp.status} ${text}`);
  return text ? JSON.parse(text) : {};
}

/** Waits until agent's call is pending for a person. */
async function pending(agent: string, callId: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const list = await admin("GET", `/api/v1/approvals?agent=${agent}`);
    if (list.records.some((r: any) => r.call.call_id === callId)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`call ${agent}/${callId} was not pending within 30s`);
}

/** Waits until agent's call is pending and decides it. */
async function decide(agent: string, callId: string, verb: "approve" | "reject" | "changes", body: object): Promise<void> {
  await pending(agent, callId);
  await admin("POST", `/api/v1/approvals/${agent}/${callId}/${verb}`, body);
}

const transports: Array<[string, string, () => Promise<airlock.Client>]> = [
  ["rest", "AIRLOCK_TEST_REST_AGENT", async () => airlock.connectRest()],
  ["nats", "AIRLOCK_TEST_NATS_AGENT", () => airlock.connectNats({ credentialFile: env("AIRLOCK_CREDENTIAL") })],
];

for (const [name, agentVar, open] of transports) {
  describe(`over ${name}`, () => {
    let client: airlock.Client;
    let agent: string;
    before(async () => { client = await open(); agent = env(agentVar); });
    after(async () => { await client.close(); });
    const id = () => `ts-${name}-${randomUUID().slice(0, 8)}`;

    it("do returns the result of an allowed call", async () => {
      const out = await client.do({ tool: "demo__echo", arguments: { text: `hello over ${name}` } });
      assert.equal(out.status, "completed");
      assert.match(JSON.stringify(out.result), new RegExp(`hello over ${name}`));
    });

    it("do with the id of a call that ended returns its outcome", async () => {
      const callId = id();
      const first = await client.do({ callId, tool: "demo__echo", arguments: { text: `once over ${name}` } });
      const again = await client.do({ callId, tool: "demo__echo", arguments: { text: `once over ${name}` } }, 20_000);
      assert.equal(again.status, "completed");
      assert.deepEqual(again.result, first.result);
    });

    it("a denied call throws Denied with a sentence", async () => {
      await assert.rejects(client.do({ tool: "demo__write_file", arguments: { path: "secret/key", content: "x" } }), (err: unknown) => {
        assert.ok(err instanceof airlock.Denied, String(err));
        assert.match(err.message, /denied this call to demo__write_file: .*\.$/);
        assert.equal(err.outcome?.status, "denied");
        return true;
      });
    });

    it("an approved call runs, and a new client awaits it after a restart", async () => {
      const callId = await client.submit({ callId: id(), tool: "demo__write_file", arguments: { path: `ts-${name}-approved.txt`, content: "ok" } });
      await decide(agent, callId, "approve", { reason: "fine" });
      const fresh = await open();
      try {
        const out = airlock.check(await fresh.await(callId, 30_000));
        assert.equal(out.status, "completed");
      } finally {
        await fresh.close();
      }
    });

    it("awaits more calls waiting for a person at once than a connection may hold subscriptions", async () => {
      // R9 F2: await subscribed once per call, so limits.agent_subscriptions
      // had to be 512; the awaits past it heard nothing (over NATS; over
      // REST the console follows them, on its connection, for the agent).
      const waiting = Number(env("AIRLOCK_TEST_AGENT_SUBSCRIPTIONS")) + 8;
      const calls: string[] = []; // one at a time: a REST agent has at most 16 submits read at once
      for (let i = 0; i < waiting; i++) {
        calls.push(await client.submit({ callId: id(), tool: "demo__write_file", arguments: { path: `ts-${name}-many-${i}.txt`, content: "x" } }));
      }
      const outs = calls.map((callId) => client.await(callId, 60_000));
      for (const callId of calls) await decide(agent, callId, "approve", { reason: "fine" });
      for (const out of await Promise.all(outs)) {
        assert.equal(out.status, "completed", `one of ${waiting} calls awaited at once: ${JSON.stringify(out)}; want completed`);
      }
    });

    it("a refused repeat of a pending call (other content) ends no wait: the call's own end does", async () => {
      // R7 F1: the refusal was stored as invalid naming the recorded
      // revision, which await took for its end while the call went on (a
      // policy now records it as an unauthorized_attempt).
      const call = { callId: id(), tool: "demo__write_file", arguments: { path: `ts-${name}-repeated.txt`, content: "first" } };
      await client.submit(call);
      // Recorded first: a repeat that comes before the policy recorded the
      // call is stored, and refused by the policy, over REST too.
      await pending(agent, call.callId);
      const repeat = client.submit({ ...call, arguments: { ...call.arguments, content: "other" } });
      if (name === "rest") {
        // The REST API refuses it at once (409), saying the id names another call.
        await assert.rejects(repeat, (err: unknown) => {
          assert.ok(err instanceof airlock.ApiError && err.status === 409, `the repeat with other content: ${err}`);
          assert.match(err.message, /names another call/);
          return true;
        });
      } else {
        await repeat; // stored; the policy records it as an unauthorized_attempt
      }
      await decide(agent, call.callId, "approve", { reason: "fine" });
      const out = await client.await(call.callId, 30_000);
      assert.equal(out.status, "completed", `await after a refused repeat and the approval: ${JSON.stringify(out)}; want completed`);
    });

    it("a rejected call throws Rejected with the reviewer's reason", async () => {
      const callId = await client.submit({ callId: id(), tool: "demo__write_file", arguments: { path: `ts-${name}-rejected.txt`, content: "no" } });
      await decide(agent, callId, "reject", { reason: "not this file" });
      assert.throws(() => airlock.check(pendingless(callId), "x"), airlock.TimedOut);
      const out = await client.await(callId, 30_000);
      assert.throws(() => airlock.check(out, "demo__write_file"), (err: unknown) => {
        assert.ok(err instanceof airlock.Rejected);
        assert.match(err.message, /rejected this call to demo__write_file: not this file\./);
        return true;
      });
    });

    it("changes requested carry the feedback", async () => {
      const callId = await client.submit({ callId: id(), tool: "demo__write_file", arguments: { path: `ts-${name}-changes.txt`, content: "draft" } });
      await decide(agent, callId, "changes", { feedback: "write it to notes/ instead" });
      const out = await client.await(callId, 30_000);
      assert.throws(() => airlock.check(out, "demo__write_file"), (err: unknown) => {
        assert.ok(err instanceof airlock.ChangesRequested);
        assert.equal(err.feedback, "write it to notes/ instead");
        return true;
      });
    });

    it("cancel withdraws a pending call, and a wait that times out says pending", async () => {
      const callId = await client.submit({ callId: id(), tool: "demo__write_file", arguments: { path: `ts-${name}-canceled.txt`, content: "never" } });
      const early = await client.await(callId, 300);
      assert.equal(early.status, "pending");
      await client.cancel(callId, "the user changed their mind");
      const out = await client.await(callId, 30_000);
      assert.throws(() => airlock.check(out), (err: unknown) => {
        assert.ok(err instanceof airlock.Canceled);
        assert.match(err.message, /the user changed their mind/);
        return true;
      });
    });

    // 300 KiB is over airlock's limit and under what a NATS message may
    // carry (its intake would answer it); 2 MiB is over both (the server
    // would close the agent's connection).
    for (const [size, kib] of [["over airlock's limit", 300], ["over a NATS message's", 2048]] as const) {
      it(`a request ${size} is refused unsent, and the client works on`, async () => {
        const call = { callId: id(), tool: "demo__echo", arguments: { text: "x".repeat(kib << 10) } };
        for (const attempt of [() => client.submit(call), () => client.do(call, 20_000)]) {
          await assert.rejects(attempt(), (err: unknown) => {
            assert.ok(err instanceof airlock.ApiError, String(err));
            // Status 0: refused before it was sent (the REST API answers 400).
            assert.equal(err.status, 0);
            assert.equal(err.code, "invalid_request");
            assert.match(err.message, new RegExp(`^request is \\d+ bytes, over the ${env("AIRLOCK_TEST_MAX_REQUEST_BYTES")}-byte limit: pass large inputs by reference$`));
            return true;
          });
        }
        const out = await client.do({ tool: "demo__echo", arguments: { text: `still here over ${name}` } });
        assert.equal(out.status, "completed");
      });
    }
  });
}

describe("defaultMaxRequestBytes", () => {
  it("is airlock's default limits.max_request_bytes", () => {
    assert.equal(airlock.defaultMaxRequestBytes, Number(env("AIRLOCK_TEST_MAX_REQUEST_BYTES")));
  });
});

function pendingless(callId: string): airlock.Outcome {
  return { callId, revision: 0, status: "pending" };
}
