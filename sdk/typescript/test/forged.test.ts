// Another agent (AIRLOCK_TEST_OTHER_CREDENTIAL) cannot hand this agent an
// outcome: it can make airlock answer its read of one of its own calls'
// stored events onto this agent's airlock.out subjects, but what arrives
// is then its own call's event, which the client refuses. Environment as
// client.test.ts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as airlock from "../src/index.js";
import { env, rawConnect } from "./env.js";


describe("over nats, another agent's events", () => {
  it("never become this agent's outcome", async () => {
    const victim = await airlock.connectNats({ credentialFile: env("AIRLOCK_CREDENTIAL") });
    const evil = await airlock.connectNats({ credentialFile: env("AIRLOCK_TEST_OTHER_CREDENTIAL") });
    const { nc: raw, agent: rawAgent } = await rawConnect(env("AIRLOCK_TEST_OTHER_CREDENTIAL"));
    const agent = env("AIRLOCK_TEST_NATS_AGENT");
    try {
      // The evil agent's own completed call, whose stored event it can read.
      const own = await evil.do({ tool: "demo__echo", arguments: { text: "forged result" } });
      assert.equal(own.status, "completed");
      // The victim's call waits for a person.
      const callId = await victim.submit({ callId: `ts-forged-${randomUUID().slice(0, 8)}`, tool: "demo__write_file", arguments: { path: "ts-forged.txt", content: "x" } });
      const waiting = victim.await(callId, 4000);
      const read = JSON.stringify({ call_id: own.callId, types: ["completed"] });
      for (let i = 0; i < 10; i++) {
        raw.publish(`airlock.agent.${rawAgent}.events`, read, { reply: `airlock.out.${agent}.${callId}.exec.completed` });
        await new Promise((r) => setTimeout(r, 100));
      }
      const out = await waiting;
      assert.equal(out.status, "pending", `the victim's await returned ${JSON.stringify(out)}: another agent's event was taken as its outcome`);
      await victim.cancel(callId, "test done");
    } finally {
      await raw.close();
      await evil.close();
      await victim.close();
    }
  });
});
