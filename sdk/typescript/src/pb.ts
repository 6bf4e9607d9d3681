// The protobuf wire form of what the NATS transport sends and reads
// (internal: not one of the package's exports). airlock's canonical
// encoding is protobuf (airlock.v1.Event); JSON is accepted too, but a call
// requested in JSON has every event stored as protojson, and protojson cost
// airlock's services more than the rest of such a call's work. So the
// client requests in protobuf, writing only the request it sends, and reads
// the fields of the end events it needs; it reads protojson events as well
// (a call another client requested in JSON).

/** A growing byte buffer the encoder writes into. */
class Out {
  buf: Uint8Array;
  len = 0;
  constructor(size: number) {
    this.buf = new Uint8Array(size);
  }
  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }
  varint(n: number): void {
    this.reserve(10);
    while (n > 127) {
      this.buf[this.len++] = (n & 127) | 128;
      n = Math.floor(n / 128);
    }
    this.buf[this.len++] = n;
  }
  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
  double(f: number): void {
    this.reserve(8);
    new DataView(this.buf.buffer, this.buf.byteOffset + this.len, 8).setFloat64(0, f, true);
    this.len += 8;
  }
  view(): Uint8Array {
    return this.buf.subarray(0, this.len);
  }
}

const utf8 = new TextEncoder();
const VARINT = 0, FIXED64 = 1, LEN = 2;

function tag(o: Out, field: number, wire: number): void {
  o.varint(field * 8 + wire);
}

/**
 * A string field: omitted when empty unless always (a oneof member). A
 * lone UTF-16 surrogate throws a TypeError: protobuf strings are UTF-8,
 * where it would become U+FFFD, and the JSON protocol's request holding it
 * (JSON.stringify escapes it) is refused as invalid; so is this one.
 */
function str(o: Out, field: number, s: string | undefined, always = false): void {
  if (!s && !always) return;
  if (s && !(s as string & { isWellFormed(): boolean }).isWellFormed()) {
    throw new TypeError(`the string ${JSON.stringify(s.length > 40 ? s.slice(0, 40) + "…" : s)} holds a lone UTF-16 surrogate, which is not text airlock can record`);
  }
  const b = utf8.encode(s ?? "");
  tag(o, field, LEN);
  o.varint(b.length);
  o.bytes(b);
}

/** A message field, written by write into a buffer of its own. */
function sub(o: Out, field: number, write: (o: Out) => void): void {
  const inner = new Out(64); // most are an argument's key and value
  write(inner);
  tag(o, field, LEN);
  o.varint(inner.len);
  o.bytes(inner.view());
}

/** What JSON.stringify writes for v under key: its toJSON's value, a boxed primitive unboxed. */
function jsonable(v: unknown, key: string): unknown {
  if (v !== null && typeof v === "object") {
    if (typeof (v as { toJSON?: unknown }).toJSON === "function") v = (v as { toJSON(k: string): unknown }).toJSON(key);
    if (v instanceof Number || v instanceof String || v instanceof Boolean) v = v.valueOf();
  }
  return v;
}

/** Whether JSON.stringify leaves v out of an object (and writes null for it in an array). */
function omitted(v: unknown): boolean {
  return v === undefined || typeof v === "function" || typeof v === "symbol";
}

/**
 * google.protobuf.Struct's fields of obj: what protojson reads of
 * JSON.stringify(obj), so a call means the same in either encoding. Like
 * JSON.stringify, it throws a TypeError on a cycle or a BigInt.
 */
function structFields(o: Out, obj: object, path: Set<object>): void {
  if (path.has(obj)) throw new TypeError("Converting circular structure to JSON");
  path.add(obj);
  for (const key of Object.keys(obj)) {
    const v = jsonable((obj as Record<string, unknown>)[key], key);
    if (omitted(v)) continue;
    sub(o, 1, (e) => {
      str(e, 1, key);
      sub(e, 2, (val) => value(val, v, path));
    });
  }
  path.delete(obj);
}

/** google.protobuf.Value of v (already jsonable). */
function value(o: Out, v: unknown, path: Set<object>): void {
  switch (typeof v) {
    case "number":
      if (!Number.isFinite(v)) break; // JSON.stringify writes null
      tag(o, 2, FIXED64);
      o.double(v);
      return;
    case "string":
      str(o, 3, v, true);
      return;
    case "boolean":
      tag(o, 4, VARINT);
      o.varint(v ? 1 : 0);
      return;
    case "bigint":
      throw new TypeError("Do not know how to serialize a BigInt");
    case "object":
      if (v === null) break;
      if (Array.isArray(v)) {
        if (path.has(v)) throw new TypeError("Converting circular structure to JSON");
        path.add(v);
        sub(o, 6, (l) => v.forEach((el, i) => {
          const j = jsonable(el, String(i));
          sub(l, 1, (val) => value(val, omitted(j) ? null : j, path));
        }));
        path.delete(v);
        return;
      }
      sub(o, 5, (s) => structFields(s, v, path));
      return;
  }
  tag(o, 1, VARINT); // null_value: NULL_VALUE (0), written: it is the oneof's member
  o.varint(0);
}

/** A request's call, as the JSON protocol names its fields. */
export interface RequestCall {
  call_id: string;
  tool: string;
  arguments: object;
  reason?: string;
  thread_id?: string;
  revision?: number;
}

/**
 * The airlock.v1.Event {requested: {call}} the agent publishes to request
 * call, as protobuf. A revision that is not a whole number a uint32 holds
 * throws a RangeError (the JSON protocol's request would be refused as
 * invalid).
 */
export function encodeRequested(call: RequestCall): Uint8Array {
  const rev = call.revision;
  if (rev !== undefined && !(Number.isInteger(rev) && rev >= 0 && rev <= 0xffffffff)) {
    throw new RangeError(`revision ${rev} is not a whole number from 1 to 4294967295`);
  }
  const o = new Out(256);
  sub(o, 10, (req) => sub(req, 1, (c) => { // Event.requested, Requested.call
    str(c, 1, call.call_id);
    str(c, 3, call.thread_id);
    str(c, 6, call.tool);
    sub(c, 7, (s) => structFields(s, call.arguments, new Set()));
    str(c, 8, call.reason);
    if (rev) {
      tag(c, 10, VARINT);
      c.varint(rev);
    }
  }));
  return o.view();
}

/** What the decoder keeps of a message: field number → [name, kind, its fields when a message]. */
type Schema = Record<number, [string, "string" | "uint" | "bool" | "message", Schema?]>;

const reasonOnly: Schema = { 1: ["reason", "string"] };
const failed: Schema = { 1: ["reason", "string"], 2: ["outcome", "string"], 3: ["message", "string"], 7: ["result_json", "string"], 8: ["truncated", "bool"] };

/** The fields of airlock.v1.Event the client reads (event.proto), under their .proto names as protojson writes them. */
const eventSchema: Schema = {
  1: ["event_id", "string"], 2: ["agent_id", "string"], 3: ["call_id", "string"], 4: ["revision", "uint"],
  6: ["actor", "message", { 2: ["id", "string"] }], 7: ["thread_id", "string"],
  10: ["requested", "message", {}],
  12: ["denied", "message", { 2: ["decision", "message", { 2: ["reason", "string"], 3: ["rule_id", "string"] }] }],
  16: ["rejected", "message", reasonOnly],
  17: ["changes_requested", "message", { 1: ["feedback", "string"] }],
  18: ["expired", "message", {}],
  19: ["canceled", "message", reasonOnly],
  21: ["completed", "message", { 1: ["result_json", "string"], 2: ["truncated", "bool"] }],
  22: ["failed", "message", failed],
  25: ["invalid", "message", reasonOnly],
};

/**
 * The event in b (protobuf airlock.v1.Event) as the object JSON.parse
 * gives of its protojson, for the fields the client reads; other fields
 * are skipped. Throws on bytes that are not protobuf.
 */
export function decodeEvent(b: Uint8Array): any {
  return decode(b, 0, b.length, eventSchema);
}

function decode(b: Uint8Array, at: number, end: number, schema: Schema): any {
  const out: any = {};
  const varint = (): number => {
    let n = 0, scale = 1;
    for (;;) {
      if (at >= end || scale > 2 ** 63) throw new Error("protobuf: truncated or overlong varint");
      const c = b[at++];
      n += (c & 127) * scale;
      if (c < 128) return n;
      scale *= 128;
    }
  };
  while (at < end) {
    const key = varint();
    const field = Math.floor(key / 8), wire = key % 8;
    const known = schema[field];
    switch (wire) {
      case VARINT: {
        const n = varint();
        if (known?.[1] === "uint") out[known[0]] = n;
        else if (known?.[1] === "bool") out[known[0]] = n !== 0;
        break;
      }
      case FIXED64:
        at += 8;
        break;
      case LEN: {
        const n = varint();
        if (n > end - at) throw new Error("protobuf: a field runs past its message");
        if (known?.[1] === "string") out[known[0]] = Buffer.from(b.buffer, b.byteOffset + at, n).toString("utf8");
        else if (known?.[1] === "message") out[known[0]] = decode(b, at, at + n, known[2] ?? {});
        at += n;
        break;
      }
      case 5: // fixed32
        at += 4;
        break;
      default:
        throw new Error(`protobuf: wire type ${wire} is not one airlock writes`);
    }
    if (at > end) throw new Error("protobuf: a field runs past its message");
  }
  return out;
}
