package executor

import (
	"encoding/json"
	"unicode/utf8"
)

// Failure reasons (Failed.reason) and outcomes (Failed.outcome).
const (
	ReasonToolError         = "tool_error"
	ReasonTimeout           = "timeout"
	ReasonUnknownTool       = "unknown_tool"
	ReasonArgumentsMismatch = "arguments_mismatch"
	// ReasonGaveUp: the executor failed on the call delivery after delivery.
	ReasonGaveUp = "gave_up"
	// ReasonIndeterminate: the executor running the call died mid-run and the
	// tool is not idempotent, so it was not run again.
	ReasonIndeterminate = "indeterminate"
)

// TruncatedResult is the JSON that replaces a result over the size limit:
// a marker, the original size and as much of the original text as fits.
type TruncatedResult struct {
	Truncated     bool   `json:"truncated"`
	OriginalBytes int    `json:"original_bytes"`
	Prefix        string `json:"prefix"`
}

// LimitResult returns raw as result_json text when it fits in limit bytes;
// otherwise a TruncatedResult (still valid JSON, at most limit bytes when
// limit leaves room for the marker) and true.
func LimitResult(raw json.RawMessage, limit int) (string, bool) {
	if len(raw) == 0 {
		raw = json.RawMessage(`null`)
	}
	if limit <= 0 || len(raw) <= limit {
		return string(raw), false
	}
	n := limit - 64 // the marker's own fields
	for n > 0 {
		prefix := validPrefix(raw, n)
		b, _ := json.Marshal(TruncatedResult{Truncated: true, OriginalBytes: len(raw), Prefix: prefix})
		if len(b) <= limit {
			return string(b), true
		}
		n -= len(b) - limit // escaping grew it: shrink by the overflow
	}
	b, _ := json.Marshal(TruncatedResult{Truncated: true, OriginalBytes: len(raw)})
	return string(b), true
}

// validPrefix cuts b to at most n bytes without splitting a UTF-8 sequence.
func validPrefix(b []byte, n int) string {
	if n > len(b) {
		n = len(b)
	}
	for n > 0 && n < len(b) && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n])
}
