// natsSubject reads a message's Nats-Subject header as the Go SDK does (the
// parsed headers'), whether or not the message's header block is laid out
// where this nats.js keeps it. No server needed.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { headers, type Msg, type MsgHdrs } from "@nats-io/transport-node";
import { natsSubject } from "../src/natsmsg.js";

const stored = "airlock.evt.bot.c1.exec.completed";

/** Headers with Nats-Subject (when given) among others, as a stream sends them. */
function hdrs(subject?: string): MsgHdrs {
  const h = headers();
  h.set("Nats-Stream", "AIRLOCK_EVENTS");
  if (subject !== undefined) h.set("Nats-Subject", subject);
  h.set("Nats-Sequence", "7");
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
