// An agent at its connection bound (its NATS account's max_connections,
// limits.agent_connections: AIRLOCK_TEST_AGENT_CONNECTIONS) is told so in
// words that say what to do, as the Go SDK says it, not with a bare timeout
// (nats.js does not end the dial on the server's refusal). AIRLOCK_TEST_FULL_CREDENTIAL is an agent no other test uses.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as airlock from "../src/index.js";
import { env } from "./env.js";


describe("an agent at its connection bound", () => {
  it("is told to close a connection or have limits.agent_connections raised", async () => {
    const bound = Number(env("AIRLOCK_TEST_AGENT_CONNECTIONS"));
    const held: airlock.Client[] = [];
    try {
      // The Go test holds one connection of this agent already.
      let refused: unknown;
      while (held.length <= bound && refused === undefined) {
        try {
          held.push(await airlock.connectNats({ credentialFile: env("AIRLOCK_TEST_FULL_CREDENTIAL"), timeoutMs: 3000 }));
        } catch (err) {
          refused = err;
        }
      }
      assert.ok(refused !== undefined && held.length >= bound - 1 && held.length < bound,
        `refused after ${held.length} connections of this test, want ${bound - 1} (limits.agent_connections ${bound}, one held by the Go test): ${refused}`);
      assert.ok(refused instanceof airlock.AirlockError && /limits\.agent_connections/.test(refused.message) && /close one of them/.test(refused.message), `${refused}`);
    } finally {
      await Promise.all(held.map((c) => c.close()));
    }
  });
});
