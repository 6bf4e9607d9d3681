// connectNats over TLS with a private CA, against a NATS server that
// requires mutual TLS and runs airlock's accounts (tests/typescript_sdk_test.go
// starts it). Environment: AIRLOCK_TEST_TLS_URL; AIRLOCK_TEST_TLS_CREDENTIAL
// (agent tlsbot, its "tls" naming ca.crt, client.crt and client.key beside
// it); AIRLOCK_TEST_TLS_PLAIN_CREDENTIAL (the same agent without "tls");
// AIRLOCK_TEST_TLS_CA, _CERT, _KEY and _OTHER_CA (a CA that signed nothing).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as airlock from "../src/index.js";
import { env as envOf } from "./env.js";

const env = (name: string): string => envOf(name, "go test -run TestTypeScriptClient ./tests/ starts a TLS NATS server and sets it");

/** Submits a call (stored in the intake stream over the TLS link) and reads its outcome back. */
async function submitOver(client: airlock.Client): Promise<void> {
  try {
    const callId = await client.submit({ callId: `ts-tls-${randomUUID().slice(0, 8)}`, tool: "demo__echo", arguments: { text: "over tls" } });
    // No service but the reads of stored events runs here: the call
    // waits, and its read (airlock.agent.<agent>.events) crossed the link
    // too.
    const out = await client.await(callId, 200);
    assert.equal(out.status, "pending");
  } finally {
    await client.close();
  }
}

describe("over nats with tls", () => {
  it("the credential file's tls verifies the server and presents the client certificate", async () => {
    await submitOver(await airlock.connectNats({ credentialFile: env("AIRLOCK_TEST_TLS_CREDENTIAL"), url: env("AIRLOCK_TEST_TLS_URL") }));
  });

  it("the tls option does the same for a credential without it", async () => {
    await submitOver(await airlock.connectNats({
      credentialFile: env("AIRLOCK_TEST_TLS_PLAIN_CREDENTIAL"), url: env("AIRLOCK_TEST_TLS_URL"),
      tls: { caFile: env("AIRLOCK_TEST_TLS_CA"), certFile: env("AIRLOCK_TEST_TLS_CERT"), keyFile: env("AIRLOCK_TEST_TLS_KEY") },
    }));
  });

  const cert = { certFile: env("AIRLOCK_TEST_TLS_CERT"), keyFile: env("AIRLOCK_TEST_TLS_KEY") };
  const refused: Array<[string, airlock.NatsTls | undefined, RegExp]> = [
    ["without the CA the server is refused", cert, /presents a certificate no CA this client trusts signed: set tls\.caFile/],
    ["a CA that did not sign the server is refused", { caFile: env("AIRLOCK_TEST_TLS_OTHER_CA"), ...cert }, /no CA this client trusts signed/],
    ["without a client certificate the server refuses", { caFile: env("AIRLOCK_TEST_TLS_CA") }, /requires a client certificate \(mutual TLS\): set tls\.certFile and tls\.keyFile/],
    ["nothing but a tls:// URL is refused, saying what the server asks for", undefined, /requires a client certificate \(mutual TLS\)/],
    ["a certificate without its key is refused before connecting", { caFile: env("AIRLOCK_TEST_TLS_CA"), certFile: env("AIRLOCK_TEST_TLS_CERT") }, /client certificate without its key: set keyFile/],
  ];
  for (const [name, tls, want] of refused) {
    it(name, async () => {
      // Without tls the URL alone (tls://) asks for TLS.
      await assert.rejects(
        airlock.connectNats({ credentialFile: env("AIRLOCK_TEST_TLS_PLAIN_CREDENTIAL"), url: env("AIRLOCK_TEST_TLS_URL"), ...(tls ? { tls } : {}) }),
        (err: unknown) => {
          assert.match(String((err as Error).message), want);
          return true;
        });
    });
  }
});
