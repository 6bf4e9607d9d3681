// The client requests in protobuf, and reads the events of calls another
// client of the same agent requested in JSON (stored as protojson) as it
// reads its own: a raw NATS connection with the agent's credential
// requests in JSON, as README's "Any language over NATS" agent does, and
// the client awaits those calls. Environment as client.test.ts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { headers } from "@nats-io/transport-node";
import * as airlock from "../src/index.js";
import { env, rawConnect } from "./env.js";


describe("over nats, a call requested in JSON", () => {
  it("is awaited as one requested in protobuf: completed with its result, denied with the policy's reason", async () => {
    const client = await airlock.connectNats({ credentialFile: env("AIRLOCK_CREDENTIAL") });
    const { nc: raw, agent: rawAgent } = await rawConnect(env("AIRLOCK_CREDENTIAL"));
    const json = headers();
    json.set("Content-Type", "application/json");
    const request = async (call: { call_id: string; tool: string; arguments: object }) => {
      const ack = await raw.request(`airlock.req.${rawAgent}.${call.call_id}`, JSON.stringify({ requested: { call } }), { headers: json, timeout: 10_000 });
      assert.equal(ack.json<any>().error, undefined, `the intake refused ${call.call_id}: ${ack.string()}`);
    };
    try {
      const echoed = `ts-json-${randomUUID().slice(0, 8)}`, denied = `ts-json-${randomUUID().slice(0, 8)}`;
      await request({ call_id: echoed, tool: "demo__echo", arguments: { text: "hello in JSON" } });
      await request({ call_id: denied, tool: "demo__write_file", arguments: { path: "secret/key.txt", content: "x" } });
      const out = await client.await(echoed, 30_000);
      assert.equal(out.status, "completed", JSON.stringify(out));
      assert.match(JSON.stringify(out.result), /hello in JSON/);
      const refused = await client.await(denied, 30_000);
      assert.equal(refused.status, "denied", JSON.stringify(refused));
      assert.equal(refused.reason, "secrets stay put");
      // The stored events are protojson indeed: airlock's read of the
      // completion says so on the line before its body.
      const read = async (callId: string) => {
        const m = await raw.request(`airlock.agent.${rawAgent}.events`, JSON.stringify({ call_id: callId, types: ["completed"] }), { timeout: 10_000 });
        const nl = m.data.indexOf(10);
        assert.ok(nl > 0, `the read of ${callId} answered ${m.string()} (${m.headers?.get("Nats-Service-Error") ?? ""})`);
        return { line: new TextDecoder().decode(m.data.subarray(0, nl)).split(" "), body: m.data.subarray(nl + 1) };
      };
      const stored = await read(echoed);
      assert.equal(stored.line[0], `airlock.evt.${rawAgent}.${echoed}.exec.completed`);
      assert.equal(stored.line[2], "json");
      assert.equal(stored.body[0], "{".charCodeAt(0));
      // And the client's own call, requested in protobuf, is stored as protobuf.
      const own = await client.do({ tool: "demo__echo", arguments: { text: "hello in protobuf" } });
      const mine = await read(own.callId);
      assert.equal(mine.line[2], "protobuf", "the client's own call was stored as protojson: it requested in JSON");
      assert.ok(Number(mine.line[3]) > 0 && mine.body[0] !== "{".charCodeAt(0));
    } finally {
      await raw.close();
      await client.close();
    }
  });
});
