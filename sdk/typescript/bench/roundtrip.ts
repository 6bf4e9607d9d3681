// The TypeScript side of `airlock bench sdk`: connects over NATS with an
// agent credential and, for every line "N" on stdin, makes N auto-allowed
// demo__echo calls one after another with Client.do, and prints their
// round trips in microseconds as one JSON line {"us":[...]}. The bench
// times the Go SDK the same way in between, so both see the same load.
//
// Usage: node dist/bench/roundtrip.js CREDENTIAL_FILE [NATS_URL]
import { createInterface } from "node:readline";
import * as airlock from "../src/index.js";

const client = await airlock.connectNats({ credentialFile: process.argv[2], url: process.argv[3] });
const args = { text: "hello from the bench" };
console.log(JSON.stringify({ connected: true }));
for await (const line of createInterface({ input: process.stdin })) {
  const n = Number(line.trim());
  if (!Number.isInteger(n) || n <= 0) continue;
  const us: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = process.hrtime.bigint();
      await client.do({ tool: "demo__echo", arguments: args });
      us.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
    console.log(JSON.stringify({ us }));
  } catch (err) {
    console.log(JSON.stringify({ error: (err as Error).message }));
  }
}
await client.close();
