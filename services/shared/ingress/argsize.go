package ingress

// A JSON document is cheap to send and dear to decode: "0," is 2 bytes of
// JSON, an 80-byte structpb.Value in memory and 11 bytes once encoded.
// Every front-end that takes an agent's arguments as JSON (the MCP gateway,
// the REST API) reads them here first, so that what cannot fit
// limits.max_request_bytes is refused before any of it is decoded (R9 F1,
// F3: a 4 MiB tools/call cost 550 MB and 3 CPU-seconds before the size
// check refused it).

// jsonEnvelopeBytes is the room a JSON body leaves beside a request's
// arguments: JSON-RPC framing, _meta, the call's names, reason and ids.
const jsonEnvelopeBytes = 64 << 10

// MaxJSONBody is the most bytes of a JSON body a front-end reads for one
// request of at most maxRequestBytes (limits.max_request_bytes) as airlock
// stores it: whitespace and escapes make JSON larger than its encoding, but
// an honest request not twice as large, plus the envelope around it.
func MaxJSONBody(maxRequestBytes int) int64 {
	return 2*int64(maxRequestBytes) + jsonEnvelopeBytes
}

// ArgumentsFit refuses a call's arguments, a JSON document as an agent sent
// it and not yet decoded, when they cannot fit maxBytes once airlock encodes
// them (protobuf, as the intake measures a call). It reads the bytes once,
// allocating nothing, and adds up the least each value costs encoded — so
// it never refuses what fits: an element of a list at least 4 bytes (11 for
// a number), text its bytes after unescaping, a member name likewise. It
// checks nothing else: a document it passes may still be refused as JSON
// or by the intake's own checks. Repeated member names count every time.
func ArgumentsFit(raw []byte, maxBytes int) *Refusal {
	least, values := encodedAtLeast(raw)
	if least <= maxBytes {
		return nil
	}
	return refuse("the arguments are %d bytes of JSON holding %d values, at least %d bytes as airlock stores a call (each value costs 4 bytes or more, a number 11), over the %d-byte limit (limits.max_request_bytes): pass large inputs by reference (a path or URL) instead of inline, or send a long list as one string",
		len(raw), values, least, maxBytes)
}

// Least bytes one value costs in a google.protobuf.Struct, with the 2 of
// the field that holds it (a list's element, a member's value): a number is
// a fixed64; true, false and null a varint; text its length and bytes; an
// object or list its own field before its members.
const (
	leastNumber    = 2 + 1 + 8
	leastLiteral   = 2 + 2
	leastText      = 2 + 2
	leastContainer = 2 + 2
	// A member name is a map entry's key: the entry's tag and length,
	// and the key's, before its bytes (leastText too, as it happens).
)

// encodedAtLeast is a lower bound on the protobuf size of the JSON
// document raw decoded as a structpb value, and how many values (member
// names included) it holds. It follows JSON's lexical shape only (strings
// and their escapes, numbers, literals, brackets) and never fails: bytes
// JSON does not allow count nothing, and a decoder refuses them later.
func encodedAtLeast(raw []byte) (least, values int) {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			n := 0 // bytes after unescaping, at least
			for i++; i < len(raw) && raw[i] != '"'; n++ {
				switch {
				case raw[i] != '\\':
					i++
				case i+1 < len(raw) && raw[i+1] == 'u':
					i += 6 // \uXXXX: one byte or more
				default:
					i += 2
				}
			}
			least, values = least+leastText+n, values+1
		case c == '{' || c == '[':
			least, values = least+leastContainer, values+1
		case c == '-' || c >= '0' && c <= '9':
			for i+1 < len(raw) && isNumberByte(raw[i+1]) {
				i++
			}
			least, values = least+leastNumber, values+1
		case c >= 'a' && c <= 'z': // true, false, null
			for i+1 < len(raw) && raw[i+1] >= 'a' && raw[i+1] <= 'z' {
				i++
			}
			least, values = least+leastLiteral, values+1
		}
	}
	// The document itself is a ToolCall's field, not a Value's: no
	// Value field of its own.
	return max(least-2, 0), values
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}
