// natsSubject reads a message's Nats-Subject header as the Go SDK does (the
// parsed headers'), whether or not the message's header block is laid out
// where this nats.js keeps it. No server needed.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { headers, type Msg, type MsgHdrs } from "@nats-io/transport-node";
import { isJSON, natsSubject } from "../src/natsmsg.js";

const stored = "airlock.evt.bot.c1.exec.completed";

/** Headers with Nats-Subject and Content-Type (when given) among others, as a stream sends them. */
function hdrs(subject?: string, contentType?: string): MsgHdrs {
  const h = headers();
  h.set("Nats-Stream", "AIRLOCK_EVENTS");
  if (subject !== undefined) h.set("Nats-Subject", subject);
  h.set("Nats-Sequence", "7");
  if (contentType !== undefined) h.set("Content-Type", contentType);
  return h;
}

/** A message as nats.js 3.4 keeps one: the raw header block, then the body, in _rdata. */
function asReceived(h: MsgHdrs | undefined): Msg {
  const block = h ? (h as MsgHdrs & { encode(): Uint8Array }).encode() : new Uint8Array();
  const body = new TextEncoder().encode("{}");
  const raw = new Uint8Array(block.length + body.length);
  raw.set(block);
  raw.set(body, block.length);
  return { _rdata: raw, _msg: { hdr: h ? block.length : -1 }, headers: h } as unknown as Msg;
}

describe("natsSubject", () => {
  for (const tc of [
    { name: "reads it from the header block", msg: asReceived(hdrs(stored)), want: stored },
    { name: "is empty for a message without it", msg: asReceived(hdrs()), want: "" },
    { name: "is empty for a message without headers", msg: asReceived(undefined), want: "" },
    // Another nats.js keeping its messages otherwise: the parsed headers answer.
    { name: "takes the parsed headers without the internals", msg: { headers: hdrs(stored) } as unknown as Msg, want: stored },
    {
      name: "takes the parsed headers when the internals hold no header block",
      msg: { _rdata: new TextEncoder().encode("{}"), _msg: { hdr: 0 }, headers: hdrs(stored) } as unknown as Msg,
      want: stored,
    },
  ]) {
    it(tc.name, () => assert.equal(natsSubject(tc.msg), tc.want));
  }
});

// isJSON tells a protojson event (airlock writes Content-Type on it alone)
// from a protobuf one, as the Go SDK's envelope.IsJSON does.
describe("isJSON", () => {
  for (const tc of [
    { name: "is true for application/json", msg: asReceived(hdrs(stored, "application/json")), want: true },
    { name: "is true with parameters and another case", msg: asReceived(hdrs(stored, "Application/JSON; charset=utf-8")), want: true },
    { name: "is false without the header (protobuf)", msg: asReceived(hdrs(stored)), want: false },
    { name: "is false for the protobuf content type", msg: asReceived(hdrs(stored, "application/protobuf")), want: false },
    { name: "is false for a message without headers", msg: asReceived(undefined), want: false },
    { name: "takes the parsed headers without the internals", msg: { headers: hdrs(stored, "application/json") } as unknown as Msg, want: true },
  ]) {
    it(tc.name, () => assert.equal(isJSON(tc.msg), tc.want));
  }
});
