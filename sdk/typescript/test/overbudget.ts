// An agent over its budget (limits.agent_calls_per_minute: 1 in the
// airlock dev that TestTypeScriptClientOverBudget starts for this file
// alone, so it is not named *.test.ts) is told so at once: do and await
// throw OverBudget, naming the budget and when to retry, instead of
// waiting for their timeout. Environment: AIRLOCK_CREDENTIAL, agent
// AIRLOCK_TEST_NATS_AGENT.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as airlock from "../src/index.js";

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`set ${name}: go test -run TestTypeScriptClientOverBudget ./tests/ starts airlock dev and sets it`);
  return v;
};

describe("over nats, an agent over its budget", () => {
  it("is told so at once, with when to retry", async () => {
    const c = await airlock.connectNats({ credentialFile: env("AIRLOCK_CREDENTIAL") });
    const agent = env("AIRLOCK_TEST_NATS_AGENT");
    // A call the default policy denies: decided at once, nothing runs.
    const call = (callId: string) => ({ callId, tool: "fs__delete_file", arguments: { path: "/etc/passwd" } });
    try {
      await assert.rejects(c.do(call("ts-within"), 10_000), airlock.Denied, "the first call, within the budget, is denied by the policy");
      // The minute's one refusal, then a dropped request: both answered.
      for (const id of ["ts-refused", "ts-dropped"]) {
        const err = await c.do(call(id), 10_000).then(
          (out) => assert.fail(`call ${id} over the budget ended ${JSON.stringify(out)}; want OverBudget`),
          (e) => e);
        assert.ok(err instanceof airlock.OverBudget, `call ${id} over the budget: ${err}; want OverBudget, not a timeout`);
        assert.equal(err.callId, id);
        assert.equal(err.callsPerMinute, 1);
        assert.ok(err.retryAfterSeconds >= 1, `retry after ${err.retryAfterSeconds} s`);
        assert.match(err.message, new RegExp(`agent ${agent} is over its budget of 1 calls a minute .*retry after about \\d+ s`));
      }
    } finally {
      await c.close();
    }
  });
});
