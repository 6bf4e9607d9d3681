// What the client reads of a NATS message's headers (internal: not one of
// the package's exports).
import type { Msg } from "@nats-io/transport-node";

/**
 * m's first Nats-Subject header ("" when none): the value the Go SDK reads
 * as m.Header.Get("Nats-Subject"), the parsed headers'.
 */
export function natsSubject(m: Msg): string {
  return header(m, natsSubjectLine, "Nats-Subject");
}

/**
 * Whether m's body is protojson (Content-Type: application/json), as the Go
 * SDK's envelope.IsJSON reads it; else it is protobuf, which airlock writes
 * without the header.
 */
export function isJSON(m: Msg): boolean {
  return header(m, contentTypeLine, "Content-Type").toLowerCase().startsWith("application/json");
}

/**
 * The value of m's first header name (line is "\r\n" + name + ":"), "" when
 * none. It is read from the message's header block where nats.js keeps it
 * (this version does: _rdata and _msg.hdr): decoding every header of an end
 * event (a dozen: CloudEvents, trace, stream) into a map cost more than the
 * rest of the client's work on the event. When the block does not have it
 * there (a nats.js that keeps its messages otherwise, or a message without
 * the header), the parsed headers answer: a message that carries the header
 * is never taken for one that does not.
 */
function header(m: Msg, line: string, name: string): string {
  const raw = (m as any)._rdata, hdr = (m as any)._msg?.hdr;
  if (raw instanceof Uint8Array && typeof hdr === "number" && hdr >= 0 && hdr <= raw.length) {
    const block = Buffer.from(raw.buffer, raw.byteOffset, hdr);
    const at = block.indexOf(line);
    if (at >= 0) {
      const start = at + line.length, end = block.indexOf("\r\n", start);
      return block.toString("utf8", start, end < 0 ? hdr : end).trim();
    }
  }
  return m.headers?.get(name) ?? "";
}
const natsSubjectLine = "\r\nNats-Subject:", contentTypeLine = "\r\nContent-Type:";
