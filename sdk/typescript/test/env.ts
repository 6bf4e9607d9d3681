// What the TypeScript tests share: the environment the Go test that runs
// them sets, and a raw NATS connection as an agent, for what the SDK would
// not send.
import { readFile } from "node:fs/promises";
import { connect, nkeyAuthenticator, type NatsConnection } from "@nats-io/transport-node";

/** The value of name, which setBy (the Go test that runs this file) sets. */
export const env = (name: string, setBy = "go test -run TestTypeScriptClient ./tests/ starts airlock dev and sets it"): string => {
  const v = process.env[name];
  if (!v) throw new Error(`set ${name}: ${setBy}`);
  return v;
};

/** A NATS connection as the agent of an airlock credential file, with that agent's inbox prefix, and the agent's name. */
export async function rawConnect(credentialFile: string): Promise<{ nc: NatsConnection; agent: string }> {
  const cred = JSON.parse(await readFile(credentialFile, "utf8"));
  const nc = await connect({ servers: cred.url, authenticator: nkeyAuthenticator(new TextEncoder().encode(cred.seed)), inboxPrefix: `_INBOX_${cred.agent}` });
  return { nc, agent: cred.agent };
}
