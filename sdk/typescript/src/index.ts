// airlock for TypeScript: gate an agent's tool calls through airlock, over
// NATS (the agent's credential file; requests in protobuf, airlock's
// canonical encoding, see pb.ts) or over REST (an agent token). Every way a call
// can end is a typed outcome; do() throws the typed error of a call that did
// not complete, whose message is a sentence that says what to do.
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { connect as tcpConnect } from "node:net";
import { randomUUID } from "node:crypto";
import { connect, createInbox, nkeyAuthenticator, type NatsConnection, type Msg, type Subscription } from "@nats-io/transport-node";
import { isJSON, natsSubject } from "./natsmsg.js";
import { decodeEvent, encodeRequested } from "./pb.js";

/** How a call ended (or "pending" when a wait ended first). */
export type Status =
  | "pending" | "completed" | "failed" | "denied" | "rejected" | "changes_requested"
  | "expired" | "canceled" | "invalid" | "allowed" | "approved";

/** A call's outcome. */
export interface Outcome {
  callId: string;
  revision: number;
  status: Status;
  /** The tool's JSON result (completed), or its own error result (failed). */
  result?: unknown;
  truncated?: boolean;
  /** Why it did not complete: the policy's or reviewer's reason, the failure. */
  reason?: string;
  /** What a reviewer who requested changes asked for. */
  feedback?: string;
  /** "error" or "indeterminate" (the tool may have run). */
  failureOutcome?: string;
  decidedBy?: string;
}

/** A tool call to submit. */
export interface Call {
  /** [A-Za-z0-9_-]{1,64}; generated when absent. Submitting the same call again under its id is harmless; another call under a used id is refused (409 over REST). */
  callId?: string;
  /** "server__tool". */
  tool: string;
  arguments?: Record<string, unknown>;
  reason?: string;
  threadId?: string;
  /** 2, 3, ... after a reviewer requested changes. */
  revision?: number;
}

/** A call did not give what was asked; outcome says how it ended. */
export class AirlockError extends Error {
  constructor(message: string, readonly outcome?: Outcome) {
    super(message);
    this.name = new.target.name;
  }
}
/** The REST API or the bus refused a request (status: HTTP status, 0 over NATS). */
export class ApiError extends AirlockError {
  constructor(message: string, readonly status: number, readonly code: string) { super(message); }
}
export class Denied extends AirlockError {}
export class Rejected extends AirlockError {}
export class ChangesRequested extends AirlockError {
  get feedback(): string { return this.outcome?.feedback ?? ""; }
}
export class Expired extends AirlockError {}
export class Canceled extends AirlockError {}
export class Invalid extends AirlockError {}
export class Failed extends AirlockError {}
/** The wait ended before the call did: await it again by its id. */
export class TimedOut extends AirlockError {}
/**
 * airlock did not decide or record the call: the agent sent more than its
 * budget of calls (limits.agent_calls_per_minute) or request bytes
 * (limits.agent_request_bytes_per_minute) a minute. Submit it again after
 * about retryAfterSeconds, or send fewer calls a minute.
 */
export class OverBudget extends AirlockError {
  constructor(message: string, readonly callId: string, readonly callsPerMinute: number, readonly requestBytesPerMinute: number,
    readonly retryAfterSeconds: number, readonly revision = 1) { super(message); }
}

const strip = (s: string | undefined, alt: string) => (s && s.trim() ? s.trim().replace(/\.$/, "") : alt);

/** Returns the outcome of a call that completed; throws its typed error otherwise. */
export function check(out: Outcome, tool = "the tool"): Outcome {
  const who = out.decidedBy || "A reviewer";
  const why = strip(out.reason, "no reason given");
  switch (out.status) {
    case "completed": case "allowed": case "approved":
      return out;
    case "denied":
      throw new Denied(`airlock's policy denied this call to ${tool}: ${why}. It will be denied again if made the same way; do something else or ask the user.`, out);
    case "rejected":
      throw new Rejected(`${who} rejected this call to ${tool}: ${why}. Do not make it again the same way; ask the user how to proceed.`, out);
    case "changes_requested":
      throw new ChangesRequested(`${who} asked for changes before this call to ${tool} can run: ${strip(out.feedback, why)}. Submit it again with the arguments changed accordingly.`, out);
    case "expired":
      throw new Expired(`Nobody approved this call to ${tool} before its deadline, so it did not run. Ask the user before making it again.`, out);
    case "canceled":
      throw new Canceled(`This call to ${tool} was canceled and did not run: ${why}.`, out);
    case "invalid":
      throw new Invalid(`airlock refused this call to ${tool} as malformed: ${why}. Fix it and submit it again.`, out);
    case "failed":
      throw new Failed(`${tool} failed: ${why}.${out.failureOutcome === "indeterminate" ? " It may or may not have taken effect: check before making it again." : ""}`, out);
    case "pending":
      throw new TimedOut(`Call ${out.callId} to ${tool} has no outcome yet: await it again by its id.`, out);
  }
  throw new AirlockError(`This call to ${tool} ended ${out.status}: ${why}.`, out);
}

/** What a client speaks: NATS or REST. */
export interface Transport {
  submit(call: Call & { callId: string }): Promise<string>;
  /** The outcome of revision (0: the newest), or status "pending" once timeoutMs passed. */
  await(callId: string, timeoutMs?: number, revision?: number): Promise<Outcome>;
  /** Withdraws a pending call; a call decided already is left as it is. */
  cancel(callId: string, reason?: string, revision?: number): Promise<void>;
  close(): Promise<void>;
  /** Submits and awaits in one go, when the transport has a faster way than submit then await. */
  do?(call: Call & { callId: string }, timeoutMs?: number): Promise<Outcome>;
}

/**
 * A call id is 1 to 64 of A-Z a-z 0-9 _ -, as airlock requires: it becomes
 * a NATS subject token, where "*" or "." would name other calls.
 */
function callIdOf(id: string | undefined): string {
  if (id === undefined) return "ts-" + randomUUID().replaceAll("-", "");
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) {
    throw new ApiError(`call id ${JSON.stringify(id)} is not valid: use 1 to 64 letters, digits, _ or -`, 0, "invalid_request");
  }
  return id;
}

/**
 * The largest request airlock accepts by default: its limits.max_request_bytes
 * (services/shared/config's default, which the Go SDK reads; the TypeScript
 * test checks the two are equal). A larger request is refused before it is
 * sent: over NATS a request above the agent's max_payload would make the
 * server close the connection instead of airlock answering why.
 */
export const defaultMaxRequestBytes = 262144;

/**
 * The request body as sent (JSON), or the ApiError that refuses it for
 * being over maxBytes as sent (UTF-8), in the Go SDK's words.
 */
function encodeRequest(body: unknown, maxBytes: number): string | ApiError {
  const text = JSON.stringify(body);
  return overLimit(Buffer.byteLength(text, "utf8"), maxBytes) ?? text;
}

/** The ApiError refusing a request of size bytes when that is over maxBytes, in the Go SDK's words. */
function overLimit(size: number, maxBytes: number): ApiError | undefined {
  if (size <= maxBytes) return undefined;
  return new ApiError(`request is ${size} bytes, over the ${maxBytes}-byte limit: pass large inputs by reference`, 0, "invalid_request");
}

/** An agent's client. Build it with connectNats or connectRest. */
export class Client {
  constructor(private readonly transport: Transport) {}

  /** Submits a call; returns its id. */
  async submit(call: Call): Promise<string> {
    return this.transport.submit({ ...call, callId: callIdOf(call.callId) });
  }

  /**
   * Awaits the call's outcome (status "pending" once timeoutMs passed): of
   * revision (default 0: the newest), or of a later revision that ends
   * first. It reads what already happened first, so a process that
   * restarted awaits a call it submitted before by its id. A request the
   * policy did not decide because the agent is over its budget throws
   * OverBudget when it asked for the revision awaited and that revision is
   * not recorded (without revision: when it is the agent's newest request,
   * a revision newer than any recorded); the client keeps the notices it
   * hears from its first submit on, so await after submit hears one that
   * came before it began.
   */
  async await(callId: string, timeoutMs?: number, revision = 0): Promise<Outcome> {
    return this.transport.await(callIdOf(callId), timeoutMs, revision);
  }

  /** Submits and awaits a call airlock runs; returns the outcome once it completed, else throws its typed error. */
  async do(call: Call, timeoutMs?: number): Promise<Outcome> {
    if (this.transport.do) {
      const c = { ...call, callId: callIdOf(call.callId) };
      return check(await this.transport.do(c, timeoutMs), call.tool);
    }
    const id = await this.submit(call);
    return check(await this.await(id, timeoutMs, call.revision ?? 1), call.tool);
  }

  /**
   * Withdraws a call still waiting for a decision (a person's, or the
   * policy's: it then never runs). A cancel answered "cancel again in a
   * moment" (code "unavailable": the policy is deciding the call) is sent
   * again for up to 3 s.
   */
  async cancel(callId: string, reason = "", revision = 0): Promise<void> {
    const id = callIdOf(callId);
    const deadline = Date.now() + 3_000;
    for (let wait = 20; ; wait = Math.min(2 * wait, 500)) {
      try {
        return await this.transport.cancel(id, reason, revision);
      } catch (e) {
        if (!(e instanceof ApiError) || e.code !== "unavailable" || Date.now() + wait > deadline) throw e;
      }
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  close(): Promise<void> {
    return this.transport.close();
  }
}

// --- REST ---

/**
 * Connects over airlock's REST API with an agent token (AIRLOCK_URL and
 * AIRLOCK_TOKEN by default). maxRequestBytes is airlock's
 * limits.max_request_bytes when it is not the default.
 */
export function connectRest(opts: { url?: string; token?: string; maxRequestBytes?: number } = {}): Client {
  const url = (opts.url ?? process.env.AIRLOCK_URL ?? "").replace(/\/$/, "");
  const token = opts.token ?? process.env.AIRLOCK_TOKEN ?? "";
  if (!url) throw new Error("airlock needs the console's URL: pass url or set AIRLOCK_URL (airlock dev prints it).");
  if (!token) throw new Error("airlock needs an agent token: pass token or set AIRLOCK_TOKEN (the console's Tokens page, kind agent).");
  return new Client(new RestTransport(url, token, opts.maxRequestBytes ?? defaultMaxRequestBytes));
}

class RestTransport implements Transport {
  constructor(private readonly url: string, private readonly token: string, private readonly maxRequestBytes: number) {}

  /** body is JSON-encoded unless it is a string (encoded already). */
  private async request(method: string, path: string, body?: unknown): Promise<any> {
    let resp: Response;
    try {
      resp = await fetch(this.url + path, {
        method,
        headers: { Authorization: `Bearer ${this.token}`, Accept: "application/json", ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
        body: body === undefined || typeof body === "string" ? body : JSON.stringify(body),
      });
    } catch (err) {
      throw new AirlockError(`airlock at ${this.url} cannot be reached (${(err as Error).message}): is it running, and is the URL right?`);
    }
    const text = await resp.text();
    let json: any = {};
    try { json = text ? JSON.parse(text) : {}; } catch { /* not JSON: said below */ }
    if (!resp.ok) {
      const message = json.message ?? `airlock answered ${method} ${path} with HTTP ${resp.status}: ${text.slice(0, 200)}`;
      const over = json.over_budget && typeof json.over_budget === "object" ? overBudgetError(json.over_budget) : undefined;
      if (over) throw over;
      throw new ApiError(message, resp.status, json.code ?? "");
    }
    return json;
  }

  async submit(call: Call & { callId: string }): Promise<string> {
    const data = encodeRequest({
      call_id: call.callId, tool: call.tool, arguments: call.arguments ?? {},
      ...(call.reason ? { reason: call.reason } : {}), ...(call.threadId ? { thread_id: call.threadId } : {}),
      ...(call.revision ? { revision: call.revision } : {}),
    }, this.maxRequestBytes);
    if (data instanceof ApiError) throw data;
    const body = await this.request("POST", "/api/v1/calls", data);
    return body.call_id;
  }

  async await(callId: string, timeoutMs?: number, revision = 0): Promise<Outcome> {
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    const rev = revision ? `&rev=${revision}` : "";
    for (;;) {
      const step = Math.max(0, Math.min(30_000, deadline - Date.now()));
      const b = await this.request("GET", `/api/v1/calls/${encodeURIComponent(callId)}?wait=${step}ms${rev}`);
      const out: Outcome = {
        callId: b.call_id ?? callId, revision: b.revision ?? 0, status: b.status, result: b.result, truncated: b.truncated,
        reason: b.reason, feedback: b.feedback, failureOutcome: b.failure_outcome, decidedBy: b.decided_by,
      };
      if (out.status !== "pending" || Date.now() >= deadline) return out;
    }
  }

  async cancel(callId: string, reason = "", revision = 0): Promise<void> {
    await this.request("POST", `/api/v1/calls/${encodeURIComponent(callId)}/cancel`, { reason, revision });
  }

  async close(): Promise<void> {}
}

// --- NATS ---

/** The agent credential file `airlock agents add` and `airlock dev` write. */
interface Credential {
  agent: string; url: string; seed: string;
  /** PEM files, each relative to the credential file unless absolute. */
  tls?: { ca_file?: string; cert_file?: string; key_file?: string };
}

/**
 * TLS for the NATS connection (PEM files). caFile is the private CA that
 * signed the server's certificate: alone it turns TLS on, and the server is
 * verified against it. certFile and keyFile are the client certificate and
 * its key, for a server that requires mutual TLS. Verification is never
 * skipped.
 */
export interface NatsTls { caFile?: string; certFile?: string; keyFile?: string }

/**
 * Connects over NATS as the agent of a credential file. url overrides the
 * file's URL, tls the file's "tls"; maxRequestBytes is airlock's
 * limits.max_request_bytes when it is not the default.
 */
export async function connectNats(opts: { credentialFile: string; url?: string; tls?: NatsTls; maxRequestBytes?: number; timeoutMs?: number }): Promise<Client> {
  let cred: Credential;
  try {
    cred = JSON.parse(await readFile(opts.credentialFile, "utf8"));
  } catch (err) {
    throw new Error(`the agent credential ${opts.credentialFile} cannot be read (${(err as Error).message}): create it with \`airlock agents add NAME\``);
  }
  const tls = opts.tls ?? tlsOfCredential(cred, opts.credentialFile);
  if (tls && !tls.certFile !== !tls.keyFile) {
    throw new Error(tls.certFile
      ? "the NATS TLS settings have a client certificate without its key: set keyFile (the credential's tls.key_file) too"
      : "the NATS TLS settings have a key without its client certificate: set certFile (the credential's tls.cert_file) too");
  }
  const servers = opts.url ?? cred.url;
  // A server that requires mutual TLS closes a connection without a client
  // certificate after the handshake, which nats.js reports only as a
  // timeout 20 s later: ask the server first (its INFO says so).
  if ((tls || /^\s*tls:/.test(servers)) && !tls?.certFile && await requiresClientCert(servers)) {
    throw new AirlockError(`airlock's NATS at ${servers} requires a client certificate (mutual TLS): set tls.certFile and tls.keyFile (the credential's tls.cert_file and key_file) to one its CA signed`);
  }
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers, name: `airlock-agent-${cred.agent}`, timeout: opts.timeoutMs ?? defaultConnectTimeoutMs,
      authenticator: nkeyAuthenticator(new TextEncoder().encode(cred.seed)),
      inboxPrefix: `_INBOX_${cred.agent}`, maxReconnectAttempts: -1, reconnectTimeWait: 250,
      // An Error (with its stack) per request costs more than the rest of a
      // round trip's client work; errors say what failed without it.
      noAsyncTraces: true,
      ...(tls ? { tls: { caFile: tls.caFile, certFile: tls.certFile, keyFile: tls.keyFile } } : {}),
    });
  } catch (err) {
    throw tlsRefusal(err, servers) ?? connectionLimit(err, servers, cred.agent, opts.timeoutMs ?? defaultConnectTimeoutMs) ?? err;
  }
  return new Client(new NatsTransport(nc, cred.agent, opts.maxRequestBytes ?? defaultMaxRequestBytes));
}

/** The credential's "tls", its paths relative to the credential file. */
function tlsOfCredential(cred: Credential, file: string): NatsTls | undefined {
  if (!cred.tls || !(cred.tls.ca_file || cred.tls.cert_file || cred.tls.key_file)) return undefined;
  const at = (p?: string) => (p ? resolve(dirname(file), p) : undefined);
  return { caFile: at(cred.tls.ca_file), certFile: at(cred.tls.cert_file), keyFile: at(cred.tls.key_file) };
}

/** Whether the first of servers asks every client for a certificate (its INFO's tls_verify); false when it cannot tell. */
function requiresClientCert(servers: string): Promise<boolean> {
  let url: URL;
  try {
    const first = servers.split(",")[0].trim();
    url = new URL(first.includes("://") ? first : `nats://${first}`);
  } catch {
    return Promise.resolve(false);
  }
  return new Promise((done) => {
    const sock = tcpConnect({ host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || 4222) });
    let head = "";
    const end = (verify: boolean) => { clearTimeout(timer); sock.destroy(); done(verify); };
    const timer = setTimeout(() => end(false), 2000);
    sock.on("error", () => end(false));
    sock.on("data", (chunk) => {
      head += chunk.toString("latin1");
      const eol = head.indexOf("\r\n");
      if (eol < 0) return;
      try {
        end(head.startsWith("INFO ") && JSON.parse(head.slice(5, eol)).tls_verify === true);
      } catch {
        end(false);
      }
    });
  });
}

/** Says what to do about a connection TLS refused; undefined for other errors. */
function tlsRefusal(err: unknown, servers: string): Error | undefined {
  const e = err as { message?: string; code?: string; cause?: { message?: string; code?: string } };
  const text = [e?.message, e?.code, e?.cause?.message, e?.cause?.code].join(" ");
  const at = `airlock's NATS at ${servers}`;
  if (/certificate required|bad certificate/i.test(text)) {
    return new AirlockError(`${at} requires a client certificate (mutual TLS): set tls.certFile and tls.keyFile (the credential's tls.cert_file and key_file) to one its CA signed (${text.trim()})`);
  }
  if (/SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|self.signed|unable to (verify|get)/i.test(text)) {
    return new AirlockError(`${at} presents a certificate no CA this client trusts signed: set tls.caFile (the credential's tls.ca_file) to the PEM file of the CA that signed it (${text.trim()})`);
  }
  if (/does not support 'tls'/i.test(text)) {
    return new AirlockError(`${at} does not offer TLS, and the TLS settings ask for it: configure tls on the server; never leave the link in clear (${text.trim()})`);
  }
  return undefined;
}

/**
 * The server's refusal of a connection past the agent's own bound (its NATS
 * account's max_connections, limits.agent_connections), in words saying
 * what to do, as the Go SDK says it. nats.js does not end the dial on that
 * refusal: it keeps its error to itself and times out, so a timeout names
 * the bound among its causes.
 */
function connectionLimit(err: unknown, servers: string, agent: string, timeoutMs: number): Error | undefined {
  const e = err as { name?: string; message?: string; cause?: { message?: string } };
  const text = [e?.message, e?.cause?.message].join(" ").trim();
  const bound = "the agent already holds every connection airlock allows one agent (limits.agent_connections, counted over all its processes and hooks): close one of them, or have the operator raise the setting";
  if (/maximum account active connections exceeded/i.test(text)) {
    return new AirlockError(`connect to airlock's NATS at ${servers} as agent ${agent}: ${bound} (${text})`);
  }
  if (e?.name === "TimeoutError" || /^timeout$/i.test(e?.message ?? "")) {
    return new AirlockError(`connect to airlock's NATS at ${servers} as agent ${agent}: no answer within ${timeoutMs} ms. Is airlock running and reachable there? ` +
      `The server also refuses a connection when ${bound} (${text})`);
  }
  return undefined;
}

/** How long connectNats waits for the server to accept the connection (nats.js's default). */
export const defaultConnectTimeoutMs = 20_000;

/** The event types that end a call, and where their last one is stored. */
const ends: Array<[Status, string]> = [
  ["denied", "denied"], ["rejected", "rejected"], ["changes_requested", "changes_requested"], ["expired", "expired"],
  ["canceled", "canceled"], ["invalid", "invalid"], ["completed", "exec.completed"], ["failed", "exec.failed"],
];

/** A stored event as airlock's read answers it: its stored subject, whether its body is protojson, the body. */
interface StoredEvent {
  subject: string;
  json: boolean;
  data: Uint8Array;
}

/**
 * The last stored event of each type (the event type: "completed", not
 * "exec.completed") of the agent's call, by type, asked of airlock on
 * airlock.agent.<agent>.events in one request (the approval service reads
 * them: an agent reaches no JetStream API), again for the types a reply
 * left out (Airlock-Unread). The reply is a frame per event found:
 * "<subject> <sequence> <json|protobuf> <length>\n<body>\n" (the Go
 * package lastevents).
 */
async function readStored(nc: NatsConnection, agent: string, callId: string, types: string[]): Promise<Map<string, StoredEvent>> {
  const out = new Map<string, StoredEvent>();
  while (types.length > 0) {
    let m: Msg;
    try {
      m = await nc.request(`airlock.agent.${agent}.events`, JSON.stringify({ call_id: callId, types }), { timeout: 10_000 });
    } catch (err) {
      if ((err as any)?.isNoResponders?.()) {
        throw new AirlockError(`read the stored events of call ${callId}: no airlock approval service answers airlock.agent.${agent}.events: start it (airlock serve approval, or airlock dev)`);
      }
      throw err;
    }
    const code = m.headers?.get("Nats-Service-Error-Code");
    if (code) throw new ApiError(m.headers?.get("Nats-Service-Error") || `the read of call ${callId}'s stored events was refused (${code})`, 0, code);
    const b = m.data;
    for (let at = 0; at < b.length;) {
      const nl = b.indexOf(10, at);
      const fields = nl < 0 ? [] : new TextDecoder().decode(b.subarray(at, nl)).split(" ");
      const size = Number(fields[3]);
      if (fields.length !== 4 || !Number.isInteger(size) || size < 0 || nl + 1 + size >= b.length || b[nl + 1 + size] !== 10) {
        throw new Error(`the read of call ${callId}'s stored events answered a frame that is not "<subject> <sequence> <json|protobuf> <length>", then the body`);
      }
      const subject = fields[0];
      out.set(subject.split(".").pop()!, { subject, json: fields[2] === "json", data: b.subarray(nl + 1, nl + 1 + size) });
      at = nl + 2 + size;
    }
    const unread = m.headers?.get("Airlock-Unread") ?? "";
    const left = unread === "" ? [] : unread.split(",");
    if (left.length >= types.length) throw new Error(`the read of call ${callId}'s stored events left out every type asked (${unread})`);
    types = left;
  }
  return out;
}

/** A do() waiting for its call's end. */
interface Waiter {
  /** Ends the wait: with the call's outcome, undefined (timed out) or the error that stopped it. */
  settle: (out: Outcome | undefined | Error) => void;
  revision: number;
  /** When it was submitted (performance.now()). */
  since: number;
  /** reconnects when its stored end was last read (-1: never). */
  seen: number;
}

/** A submit waiting for the intake's acknowledgement. */
interface Ack {
  /** Called once: with undefined when the call was stored, else with why not. */
  done: (err: Error | undefined) => void;
  /** When it was published (performance.now()). */
  since: number;
}

/**
 * How often the transport's one timer ticks (see tick); a waiting call's
 * stored end is read once it waited storedAfterMs; a submit fails once it
 * waited ackTimeoutMs.
 */
const tickMs = 250, storedAfterMs = 1000, ackTimeoutMs = 10_000;

/** One await's live messages of its call, in order, until end (see NatsTransport.follow). */
class CallFollow {
  private readonly queue: Msg[] = [];
  private wake: (() => void) | undefined;
  private ended = false;
  constructor(readonly end: () => void) {}
  push(m: Msg): void {
    this.queue.push(m);
    this.wake?.();
  }
  stop(): void {
    this.ended = true;
    this.wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<Msg> {
    for (;;) {
      const m = this.queue.shift();
      if (m) {
        yield m;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}

class NatsTransport implements Transport {
  /** Times the connection came back: events published meanwhile were not received. */
  private reconnects = 0;
  /** do's calls waiting for their end, by call id. */
  private readonly waiters = new Map<string, Waiter>();
  private watching = false;
  /**
   * The agent's over-budget notices heard since the first submit, by call
   * id, until the later of their retry after and a minute (notices are not
   * stored: await after submit reads a notice that came before it began
   * here); at most maxKeptNotices, the oldest forgotten first.
   */
  private readonly notices = new Map<string, { notice: OverBudget; until: number }>();
  private hearing = false;
  /** Submits waiting for the intake's acknowledgement, by reply token (see send). */
  private readonly acks = new Map<string, Ack>();
  private ackInbox = "";
  private ackSeq = 0;
  /**
   * The awaits following their calls live, by call id, over one
   * subscription to the agent's republished events held while any follows
   * (follow): a subscription per awaited call made an agent awaiting its
   * waiting calls hold hundreds, each a copy of every message on its
   * subject on the server (R9 F2), and limits.agent_subscriptions had to
   * allow them.
   */
  private readonly follows = new Map<string, Set<CallFollow>>();
  private followSub: Subscription | undefined;
  /** The one timer of every waiting call and submit (see tick); undefined while none waits. */
  private ticker: ReturnType<typeof setInterval> | undefined;
  constructor(private readonly nc: NatsConnection, private readonly agent: string, private readonly maxRequestBytes: number) {
    (async () => {
      for await (const s of nc.status()) if (s.type === "reconnect") this.reconnects++;
    })().catch(() => { /* the connection closed */ });
  }

  async submit(call: Call & { callId: string }): Promise<string> {
    await this.publish(call);
    return call.callId;
  }

  /**
   * The fast path, as the Go SDK's DoFast: the agent's end events are
   * watched (one subscription per end type, made once) before the call is
   * submitted, so its end arrives without reading the stored events. What
   * is stored is read only when no end came within a second (the id may be
   * of a call that ended before: airlock does not run it again) and after a
   * reconnect (events may have been missed). One timer looks after every
   * waiting call (tick): two timers made and cleared per call were a good
   * part of the client's work on it. The intake's acknowledgement only
   * fails the wait when the call was not stored: the client's work on each
   * message is on the call's path, and an end says the call was stored.
   */
  async do(call: Call & { callId: string }, timeoutMs?: number): Promise<Outcome> {
    this.watchEnds();
    let settle!: (out: Outcome | undefined | Error) => void;
    const ended = new Promise<Outcome | undefined>((resolve, reject) => {
      settle = (out) => (out instanceof Error ? reject(out) : resolve(out));
    });
    this.waiters.set(call.callId, { settle, revision: Math.max(call.revision ?? 1, 1), since: performance.now(), seen: -1 });
    this.tickWhileWaiting();
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => settle(undefined), timeoutMs);
    try {
      this.send(call, (err) => { if (err) settle(err); });
      const out = await ended;
      if (out) return out;
    } finally {
      if (timer) clearTimeout(timer);
      this.waiters.delete(call.callId);
    }
    return { callId: call.callId, revision: 0, status: "pending" };
  }

  /** Starts the timer unless it runs; it stops on a tick that finds nothing waiting. */
  private tickWhileWaiting(): void {
    this.ticker ??= setInterval(() => this.tick(), tickMs);
  }

  /**
   * Reads the stored end of every call that has waited a second and was not
   * read since the last reconnect, and fails every submit not acknowledged
   * within ackTimeoutMs.
   */
  private tick(): void {
    if (this.waiters.size === 0 && this.acks.size === 0) {
      clearInterval(this.ticker);
      this.ticker = undefined;
      return;
    }
    const now = performance.now();
    for (const [callId, w] of this.waiters) {
      if (now - w.since < storedAfterMs || w.seen === this.reconnects) continue;
      w.seen = this.reconnects;
      // An end of an earlier revision is not this call's.
      this.stored(callId).then((out) => { if (out && endsWait(out, w.revision)) w.settle(out); },
        () => { /* read again after a reconnect */ });
    }
    for (const [token, a] of this.acks) {
      if (now - a.since < ackTimeoutMs) continue;
      this.acks.delete(token);
      a.done(new ApiError(`airlock did not acknowledge the call within ${ackTimeoutMs / 1000} s: is it running, and is the NATS URL right?`, 0, "timeout"));
    }
  }

  /**
   * Subscribes, once, before the first request is published, to the
   * agent's over-budget notices: each is kept (notices), and ends the do
   * waiting for the revision it is about.
   */
  private hearNotices(): void {
    if (this.hearing) return;
    this.hearing = true;
    this.nc.subscribe(`airlock.out.${this.agent}.*.${overBudgetType}`, {
      callback: (err, m) => {
        if (err) return;
        const callId = m.subject.split(".")[3];
        const over = overBudgetOf(m, this.agent, callId);
        if (!over) return;
        this.notices.delete(callId); // heard again: the newest, kept last
        while (this.notices.size >= maxKeptNotices) this.notices.delete(this.notices.keys().next().value!);
        this.notices.set(callId, { notice: over, until: Date.now() + Math.max(over.retryAfterSeconds * 1000, noticeKeptAtLeastMs) });
        const w = this.waiters.get(callId);
        if (!w || !answers(over, w.revision, 0)) return;
        // Only once the revision is read not to be recorded: a notice
        // about a recorded revision was about a repeat of its request. A
        // failed read ends the wait, as the notice says.
        this.recorded(callId).then((recorded) => { if (answers(over, w.revision, recorded)) w.settle(over); },
          () => w.settle(over));
      },
    });
  }

  /** The kept notice about the call, if one is. */
  private kept(callId: string): OverBudget | undefined {
    const k = this.notices.get(callId);
    if (!k) return undefined;
    if (Date.now() > k.until) {
      this.notices.delete(callId);
      return undefined;
    }
    return k.notice;
  }

  /** Subscribes, once, to every end event of the agent's calls, for do's waiters. */
  private watchEnds(): void {
    if (this.watching) return;
    this.watching = true;
    for (const [status, type] of ends) {
      this.nc.subscribe(`airlock.out.${this.agent}.*.${type}`, {
        callback: (err, m) => {
          if (err) return;
          const callId = m.subject.split(".")[3];
          const ev = this.eventOf(m, callId, type, status);
          const w = this.waiters.get(callId);
          const out = ev && w ? outcomeOf(callId, status, ev) : undefined;
          if (!w || !out || !endsWait(out, w.revision)) return;
          if (out.status !== "invalid") return w.settle(out);
          this.recorded(callId).then((recorded) => {
            // A refused repeat of a recorded revision ends nothing.
            if (out.revision > 0 && out.revision <= recorded) return;
            // The policy sends its notice before it stores the first
            // refusals over budget of a minute as invalid: a notice kept
            // about the revision says more (when to retry), whichever of
            // the two reads of what is recorded is answered first.
            const over = this.kept(callId);
            w.settle(over && answers(over, w.revision, recorded) ? over : out);
          }, () => w.settle(out));
        },
      });
    }
  }

  /** Stores the call in the intake stream. */
  private publish(call: Call & { callId: string }): Promise<void> {
    return new Promise((resolve, reject) => this.send(call, (err) => (err ? reject(err) : resolve())));
  }

  /**
   * Publishes the call to the intake stream and calls done with the
   * intake's answer (see ackError), as nc.request would, over one reply
   * subscription made once: nc.request builds an Error with its stack on
   * every request (even one answered), which costs more than the rest of
   * the client's work on a call. A request over maxRequestBytes is refused
   * here, unsent.
   */
  private send(call: Call & { callId: string }, done: (err: Error | undefined) => void): void {
    let data: Uint8Array;
    try {
      data = encodeRequested({
        call_id: call.callId, tool: call.tool, arguments: call.arguments ?? {},
        reason: call.reason, thread_id: call.threadId, revision: call.revision,
      });
    } catch (err) {
      done(new ApiError(`the call cannot be sent: ${(err as Error).message}`, 0, "invalid_request"));
      return;
    }
    const over = overLimit(data.length, this.maxRequestBytes);
    if (over) {
      done(over);
      return;
    }
    this.hearNotices();
    this.notices.delete(call.callId); // submitted again: decided anew
    if (!this.ackInbox) {
      this.ackInbox = createInbox(`_INBOX_${this.agent}`);
      this.nc.subscribe(`${this.ackInbox}.*`, {
        callback: (err, m) => {
          if (err) return;
          const token = m.subject.slice(this.ackInbox.length + 1);
          const ack = this.acks.get(token);
          if (!ack) return;
          this.acks.delete(token);
          ack.done(ackError(m));
        },
      });
    }
    const token = String(++this.ackSeq);
    this.nc.publish(`airlock.req.${this.agent}.${call.callId}`, data, { reply: `${this.ackInbox}.${token}` });
    // Its answer is read after this returns: waited for only once published.
    this.acks.set(token, { since: performance.now(), done });
    this.tickWhileWaiting();
  }

  /**
   * Follows the call's republished events live until the follow's end; the
   * agent's subscription is sent before anything this client sends after,
   * so a stored event read afterwards and the live ones miss nothing.
   */
  private follow(callId: string): CallFollow {
    let followers = this.follows.get(callId);
    if (!followers) this.follows.set(callId, (followers = new Set()));
    const f: CallFollow = new CallFollow(() => {
      f.stop();
      followers.delete(f);
      if (followers.size === 0 && this.follows.get(callId) === followers) this.follows.delete(callId);
      if (this.follows.size === 0 && this.followSub) {
        this.followSub.unsubscribe();
        this.followSub = undefined;
      }
    });
    followers.add(f);
    this.followSub ??= this.nc.subscribe(`airlock.out.${this.agent}.>`, {
      callback: (err, m) => {
        if (err) return;
        for (const g of this.follows.get(m.subject.split(".")[3]) ?? []) g.push(m);
      },
    });
    return f;
  }

  async await(callId: string, timeoutMs?: number, revision = 0): Promise<Outcome> {
    // Follow first, then read what is stored: no end falls in between.
    const sub = this.follow(callId);
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => sub.stop(), timeoutMs);
    const counts = (out: Outcome) => endsWait(out, revision);
    // A notice ends the wait only when it is about the revision awaited
    // and that revision is not recorded (read only when a notice came).
    const overBudget = async (over: OverBudget | undefined) => over !== undefined && answers(over, revision, await this.recorded(callId));
    try {
      const done = await this.stored(callId);
      // Heard before this wait subscribed; looked at before the stored end:
      // the first requests over budget of a minute are recorded as invalid
      // too, and the notice says more (when to retry).
      const heard = this.kept(callId);
      if (await overBudget(heard)) throw heard;
      if (done && counts(done)) return done;
      for await (const m of sub) {
        const type = m.subject.split(".").slice(4).join(".");
        const over = type === overBudgetType ? overBudgetOf(m, this.agent, callId) : undefined;
        if (await overBudget(over)) throw over;
        const end = ends.find(([, t]) => t === type);
        const ev = end && this.eventOf(m, callId, type, end[0]);
        const out = end && ev ? outcomeOf(callId, end[0], ev) : undefined;
        if (out && counts(out) && !(await this.repeatRefused(callId, out))) return out;
      }
      return { callId, revision: 0, status: "pending" };
    } finally {
      if (timer) clearTimeout(timer);
      sub.end();
    }
  }

  /** The newest revision of the call airlock recorded (its last requested event), 0 when none. */
  private async recorded(callId: string): Promise<number> {
    return this.recordedIn(callId, await readStored(this.nc, this.agent, callId, ["requested"]));
  }

  /** The newest revision recorded, as stored holds the call's last requested event. */
  private recordedIn(callId: string, stored: Map<string, StoredEvent>): number {
    const m = stored.get("requested");
    const ev = m && this.eventFrom(m.subject, m.json, m.data, callId, "requested", "requested" as Status);
    return ev ? Math.max(Number(ev.revision) || 0, 1) : 0;
  }

  /** The call's stored end, if it has ended: its last request and every end type read in one request. */
  private async stored(callId: string): Promise<Outcome | undefined> {
    const stored = await readStored(this.nc, this.agent, callId, ["requested", ...ends.map(([status]) => status)]);
    for (const [status, type] of ends) {
      const m = stored.get(status);
      const ev = m && this.eventFrom(m.subject, m.json, m.data, callId, type, status);
      const out = ev && outcomeOf(callId, status, ev);
      if (out && !(out.status === "invalid" && out.revision > 0 && out.revision <= this.recordedIn(callId, stored))) return out;
    }
    return undefined;
  }

  /**
   * Whether out is a refusal (invalid) naming a revision airlock recorded:
   * of a repeat of its request (with other content), which changes nothing
   * of it and does not end it (the Go SDK's follower). Read only for an
   * invalid end.
   */
  private async repeatRefused(callId: string, out: Outcome): Promise<boolean> {
    return out.status === "invalid" && out.revision > 0 && out.revision <= await this.recorded(callId);
  }

  /**
   * The event m carries when it is this agent's call callId's event of type,
   * as the stream stored it (Nats-Subject) and as its body says; else
   * undefined. Another agent can make the server answer one of its own
   * requests onto this agent's subjects, but what it sends is then about its
   * own calls, which this refuses (as the Go SDK's eventOf).
   */
  private eventOf(m: Msg, callId: string, type: string, status: Status): any | undefined {
    return this.eventFrom(natsSubject(m), isJSON(m), m.data, callId, type, status);
  }

  /** eventOf for an event stored on subject, its body data protojson when json. */
  private eventFrom(subject: string, json: boolean, data: Uint8Array, callId: string, type: string, status: Status): any | undefined {
    if (subject !== `airlock.evt.${this.agent}.${callId}.${type}`) return undefined;
    let ev: any;
    try {
      ev = json ? JSON.parse(new TextDecoder().decode(data)) : decodeEvent(data);
    } catch {
      return undefined;
    }
    if (ev?.agent_id !== this.agent || ev?.call_id !== callId || ev[status] === undefined) return undefined;
    return ev;
  }

  async cancel(callId: string, reason = "", revision = 0): Promise<void> {
    const m = await this.nc.request(`airlock.agent.${this.agent}.cancel`, JSON.stringify({ call_id: callId, reason, revision }), { timeout: 10_000 });
    const code = m.headers?.get("Nats-Service-Error-Code");
    if (code && code !== "200") {
      throw new ApiError(m.headers?.get("Nats-Service-Error") || `cancel of call ${callId} refused (${code})`, 0, code);
    }
  }

  async close(): Promise<void> {
    await this.nc.drain();
  }
}

/**
 * The last subject token of the policy service's over-budget notice, sent
 * with core NATS (never stored) on airlock.out.<agent>.<call>.over_budget for
 * a request it did not decide because the agent was over its budget. Only
 * the policy service may publish there.
 */
const overBudgetType = "over_budget";

/** How many over-budget notices a NATS client keeps, and for at least how long. */
const maxKeptNotices = 4096, noticeKeptAtLeastMs = 60_000;

/**
 * The error an over-budget notice about this agent's call says; undefined
 * for anything else. The body is the one JSON shape every SDK reads:
 * {agent_id, call_id, revision, calls_per_minute, request_bytes_per_minute,
 * retry_after_seconds, reason}.
 */
function overBudgetOf(m: Msg, agent: string, callId: string): OverBudget | undefined {
  if (m.subject !== `airlock.out.${agent}.${callId}.${overBudgetType}`) return undefined;
  let n: any;
  try {
    n = m.json<any>();
  } catch {
    return undefined;
  }
  if (n?.agent_id !== agent || n?.call_id !== callId || !n?.reason) return undefined;
  return overBudgetError(n);
}

/** The error the notice n says (over NATS, or the REST API's over_budget); undefined when it names no call. */
function overBudgetError(n: any): OverBudget | undefined {
  if (!n?.call_id) return undefined;
  const calls = Number(n.calls_per_minute) || 0, bytes = Number(n.request_bytes_per_minute) || 0;
  const retry = Math.max(1, Number(n.retry_after_seconds) || 1);
  // A policy service from before notices named a revision names none: 1.
  const revision = Math.max(1, Number(n.revision) || 1);
  return new OverBudget(`call ${n.call_id} revision ${revision}: agent ${n.agent_id} is over its budget of ${calls} calls a minute (and ${bytes} request bytes); retry after about ${retry} s: airlock did not decide or record the request`,
    n.call_id, calls, bytes, retry, revision);
}

/**
 * Whether out ends a wait for revision want (0: the newest): an end of that
 * revision or a later one, but neither an end of an earlier revision nor a
 * later revision refused as invalid (never recorded); an invalid request
 * that could not be read names no revision, and answers the one awaited
 * (the Go SDK's follower).
 */
function endsWait(out: Outcome, want: number): boolean {
  const rev = out.revision || Math.max(want, 1);
  if (out.status === "invalid" && want !== 0 && rev > want) return false;
  return rev >= want;
}

/**
 * Whether the notice ends a wait for revision want of its call (0: the
 * agent's newest request), recorded being the newest revision airlock
 * recorded (0: none): the Go SDK's rule (ingress.OverBudget.Answers).
 */
function answers(n: OverBudget, want: number, recorded: number): boolean {
  return n.revision > recorded && (want === 0 || n.revision === want);
}

/** Why the intake's answer m says a call was not stored; undefined when it was. */
function ackError(m: Msg): Error | undefined {
  if (m.headers?.code === 503) {
    return new ApiError("no intake stream answers: is airlock running, and is this credential an airlock agent's?", 0, "503");
  }
  let ack: { error?: { code: number; description: string } };
  try {
    ack = m.json();
  } catch (err) {
    return err as Error;
  }
  if (ack.error) return new ApiError(`the call was not stored (${ack.error.description}): try again later`, 0, String(ack.error.code));
  return undefined;
}

/** An end event (as JSON.parse gives protojson, .proto field names; decodeEvent gives protobuf so) as an Outcome. */
function outcomeOf(callId: string, status: Status, ev: any): Outcome {
  const body = ev[status] ?? {};
  const out: Outcome = { callId: ev.call_id ?? callId, revision: ev.revision ?? 0, status };
  switch (status) {
    case "completed":
      out.result = body.result_json ? JSON.parse(body.result_json) : undefined;
      out.truncated = body.truncated;
      break;
    case "failed":
      out.reason = body.message || body.reason;
      out.failureOutcome = body.outcome;
      out.result = body.result_json ? JSON.parse(body.result_json) : undefined;
      break;
    case "denied":
      out.reason = body.decision?.reason;
      out.decidedBy = "policy";
      break;
    case "changes_requested":
      out.feedback = body.feedback;
      out.reason = body.feedback;
      out.decidedBy = ev.actor?.id;
      break;
    default:
      out.reason = body.reason;
      if (status === "rejected") out.decidedBy = ev.actor?.id;
  }
  return out;
}
