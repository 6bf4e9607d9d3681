// An agent over its budget (limits.agent_calls_per_minute: 1 in the
// airlock dev that TestTypeScriptClientOverBudget starts for this file
// alone, so it is not named *.test.ts) is told so at once: do and await
// throw OverBudget, naming the budget and when to retry, instead of
// waiting for their timeout — await after a separate submit too — and
// only a wait on the revision a notice is about ends with it. Environment: AIRLOCK_CREDENTIAL, agent
// AIRLOCK_TEST_NATS_AGENT.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Subscription } from "@nats-io/transport-node";
import * as airlock from "../src/index.js";
import { env as envOf, rawConnect } from "./env.js";

const env = (name: string): string => envOf(name, "go test -run TestTypeScriptClientOverBudget ./tests/ starts airlock dev and sets it");

describe("over nats, an agent over its budget", () => {
  it("is told so at once, with when to retry", async () => {
    const c = await airlock.connectNats({ credentialFile: env("AIRLOCK_CREDENTIAL") });
    const agent = env("AIRLOCK_TEST_NATS_AGENT");
    // A call the default policy denies (were it decided): nothing runs.
    const call = (callId: string) => ({ callId, tool: "fs__delete_file", arguments: { path: "/etc/passwd" } });
    // A second connection of the agent's hears its events and notices: a
    // step waits for one before it goes on, so it has passed by then.
    const { nc: watch } = await rawConnect(env("AIRLOCK_CREDENTIAL"));
    const passed = async (sub: Subscription) => { for await (const _ of sub) return; };
    try {
      // The minute's one call, within the budget: a write, which waits for a person.
      const asked = watch.subscribe(`airlock.out.${agent}.ts-pending.approval_requested`, { max: 1 });
      await watch.flush();
      const write = { callId: "ts-pending", tool: "fs__write_file", arguments: { path: "/tmp/ts-pending", content: "x" } };
      await c.submit(write);
      await passed(asked);
      // Its revision 2, the minute's one refusal over the budget (recorded
      // as invalid too): neither the notice nor the refusal ends a wait on
      // revision 1, which goes on.
      const err2 = await c.do({ ...write, revision: 2 }, 10_000).then((o) => o, (e) => e);
      assert.ok(err2 instanceof airlock.OverBudget && err2.revision === 2, `revision 2 over the budget: ${err2 instanceof Error ? err2 : JSON.stringify(err2)}; want OverBudget about revision 2`);
      const rev1 = await c.await("ts-pending", 2_000, 1);
      assert.equal(rev1.status, "pending", `the wait on revision 1 ended ${JSON.stringify(rev1)}; want it still pending`);
      // A repeat of recorded revision 1 over the budget (R7 F3): its
      // notice is about a repeat, which changes nothing of the revision
      // recorded: do goes on waiting for it (and, R7 F1, nothing is stored
      // that await could take for its end).
      const repeatHeard = watch.subscribe(`airlock.out.${agent}.ts-pending.over_budget`, { max: 1 });
      await watch.flush();
      const repeat = await c.do(write, 3_000).then((o) => o, (e) => e);
      await passed(repeatHeard);
      assert.ok(repeat instanceof airlock.TimedOut, `do repeating recorded revision 1 over the budget: ${repeat instanceof Error ? repeat : JSON.stringify(repeat)}; want it still waiting (TimedOut)`);
      const after = await c.await("ts-pending", 2_000, 1);
      assert.equal(after.status, "pending", `the wait on revision 1 after its repeat ended ${JSON.stringify(after)}; want it still pending`);
      // Past the minute's one refusal, dropped requests: answered too.
      for (const id of ["ts-dropped", "ts-dropped-2"]) {
        const err = await c.do(call(id), 10_000).then(
          (out) => assert.fail(`call ${id} over the budget ended ${JSON.stringify(out)}; want OverBudget`),
          (e) => e);
        assert.ok(err instanceof airlock.OverBudget, `call ${id} over the budget: ${err}; want OverBudget, not a timeout`);
        assert.equal(err.callId, id);
        assert.equal(err.revision, 1);
        assert.equal(err.callsPerMinute, 1);
        assert.ok(err.retryAfterSeconds >= 1, `retry after ${err.retryAfterSeconds} s`);
        assert.match(err.message, new RegExp(`agent ${agent} is over its budget of 1 calls a minute .*retry after about \\d+ s`));
      }

      // await after a separate submit: the notice came before the wait
      // subscribed, and the client kept it.
      const heard = watch.subscribe(`airlock.out.${agent}.ts-separate.over_budget`, { max: 1 });
      await watch.flush();
      await c.submit(call("ts-separate"));
      await passed(heard);
      const err = await c.await("ts-separate", 10_000).then(
        (out) => assert.fail(`await after submit over the budget ended ${JSON.stringify(out)}; want OverBudget, not a missed notice`),
        (e) => e);
      assert.ok(err instanceof airlock.OverBudget && err.callId === "ts-separate" && err.revision === 1, `${err}`);

      // A notice about revision 2 does not end a wait on revision 1; it
      // ends one on revision 2, and one that names none (the newest
      // request, which was not decided).
      const rev2 = watch.subscribe(`airlock.out.${agent}.ts-revised.over_budget`, { max: 1 });
      await watch.flush();
      const onRevision1 = c.await("ts-revised", 3_000, 1); // subscribed before the submit
      await c.submit({ ...call("ts-revised"), revision: 2 });
      await passed(rev2);
      const out = await onRevision1;
      assert.equal(out.status, "pending", `the wait on revision 1 ended ${JSON.stringify(out)}; want it still pending`);
      for (const revision of [2, 0]) {
        const e = await c.await("ts-revised", 10_000, revision).then((o) => o, (e) => e);
        assert.ok(e instanceof airlock.OverBudget && e.revision === 2, `await of revision ${revision}: ${e instanceof Error ? e : JSON.stringify(e)}; want OverBudget about revision 2`);
      }
    } finally {
      await watch.close();
      await c.close();
    }
  });
});
