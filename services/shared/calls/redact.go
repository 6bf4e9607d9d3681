package calls

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// RedactedMarker replaces a value the policy redacts wherever a channel
// outside airlock is shown the arguments.
const RedactedMarker = "[redacted]"

// Redacted returns args as plain values with the value at every JSON
// pointer in paths (RFC 6901, the policy's `redact`) replaced by
// RedactedMarker. A pointer that names nothing is skipped. args is not
// changed.
func Redacted(args *structpb.Struct, paths []string) map[string]any {
	m := args.AsMap()
	for _, p := range paths {
		redactPointer(m, p)
	}
	return m
}

func redactPointer(m map[string]any, p string) {
	if !strings.HasPrefix(p, "/") {
		return
	}
	parts := PointerTokens(p)
	var cur any = m
	for i, tok := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if _, ok := c[tok]; !ok {
				return
			}
			if last {
				c[tok] = RedactedMarker
				return
			}
			cur = c[tok]
		case []any:
			idx, err := strconv.Atoi(tok)
			if err != nil || idx < 0 || idx >= len(c) {
				return
			}
			if last {
				c[idx] = RedactedMarker
				return
			}
			cur = c[idx]
		default:
			return
		}
	}
}
