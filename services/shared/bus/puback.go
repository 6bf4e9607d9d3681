package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishSync stores msg in the stream its subject belongs to and waits
// for the stream's ack: jetstream's PublishMsg without options, with the
// same errors (an answer carrying an API error is that *jetstream.APIError
// wrapped, no stream answering ErrNoStreamResponse after jetstream's two
// retries, a context without a deadline bounded by js's default timeout),
// but the ack's usual flat form read without encoding/json, which every
// publish of a call paid for (json.Unmarshal of each PubAck: about 2.5 µs of
// the round trip's CPU per publish). Anything else the stream answers is
// decoded as jetstream decodes it.
func PublishSync(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, js.Options().DefaultTimeout)
		defer cancel()
	}
	nc := js.Conn()
	resp, err := nc.RequestMsgWithContext(ctx, msg)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		// A stream whose leader is moving answers nobody for a moment.
		t := time.NewTimer(jetstream.DefaultPubRetryWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		resp, err = nc.RequestMsgWithContext(ctx, msg)
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, jetstream.ErrNoStreamResponse
	case err != nil:
		return nil, err
	}
	return parsePubAck(resp.Data)
}

// parsePubAck reads a stream's answer to a publish: the flat object the
// server writes for a stored message ({"stream":"S","seq":N} with perhaps
// a domain, "duplicate": true or a batch's id and count) directly, anything
// else (an error, escapes) as jetstream does.
func parsePubAck(data []byte) (*jetstream.PubAck, error) {
	if ack, ok := scanPubAck(data); ok {
		return ack, nil
	}
	// jetstream's pubAckResponse: its API response's type and error, and
	// the PubAck.
	var resp struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("nats: %w", resp.Error)
	}
	if resp.PubAck == nil || resp.PubAck.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return resp.PubAck, nil
}

// scanPubAck reads data as a successful PubAck if it is one JSON object
// that names a stream and holds only what the server writes in one (a
// PubAck's fields, and a batch commit's "batch" and "count", which
// jetstream's PubAck does not keep), each as an ASCII string without
// escapes, an unsigned integer, true, false or null (which, as
// encoding/json reads it, sets nothing). ok is false for anything else,
// which the caller decodes as jetstream does: another key (an error, a
// type, a name in another case), another type, a number encoding/json
// refuses (a leading zero) or a string it would change (escapes, invalid
// UTF-8 replaced by U+FFFD).
func scanPubAck(data []byte) (ack *jetstream.PubAck, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	ack = &jetstream.PubAck{}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil, false // no stream
	}
	for {
		key, next, ok := scanString(data, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(data, next)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		if i >= len(data) {
			return nil, false
		}
		switch c := data[i]; {
		case c == '"':
			val, next, ok := scanString(data, i)
			if !ok {
				return nil, false
			}
			switch string(key) {
			case "stream":
				ack.Stream = string(val)
			case "domain":
				ack.Domain = string(val)
			case "val":
				ack.Value = string(val)
			case "batch": // a batch commit's id, which jetstream's PubAck does not keep
			default:
				return nil, false
			}
			i = next
		case '0' <= c && c <= '9':
			j := i + 1
			for j < len(data) && '0' <= data[j] && data[j] <= '9' {
				j++
			}
			if c == '0' && j > i+1 {
				return nil, false // a leading zero: not JSON
			}
			if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
				return nil, false
			}
			switch string(key) {
			case "seq":
				n, ok := parseUint(data[i:j])
				if !ok {
					return nil, false
				}
				ack.Sequence = n
			case "count": // a batch commit's size, likewise
			default:
				return nil, false
			}
			i = j
		default:
			var lit string
			switch {
			case hasWord(data, i, "true"):
				lit = "true"
			case hasWord(data, i, "false"):
				lit = "false"
			case hasWord(data, i, "null"):
				lit = "null"
			default:
				return nil, false // an object or array: an error, or a form this does not know
			}
			switch string(key) {
			case "duplicate":
				if lit != "null" {
					ack.Duplicate = lit == "true"
				}
			case "stream", "domain", "val", "seq", "batch", "count":
				if lit != "null" {
					return nil, false
				}
			default:
				return nil, false
			}
			i += len(lit)
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return nil, false
		}
		if data[i] == '}' {
			if skipSpace(data, i+1) != len(data) || ack.Stream == "" {
				return nil, false
			}
			return ack, true
		}
		if data[i] != ',' {
			return nil, false
		}
		i = skipSpace(data, i+1)
	}
}

// scanString reads the JSON string starting at data[i] ('"'), one of
// ASCII without escapes or control characters, which encoding/json reads
// as it is; next is the index after its closing quote.
func scanString(data []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// parseUint reads decimal digits as a uint64; ok is false on overflow.
func parseUint(digits []byte) (n uint64, ok bool) {
	for _, c := range digits {
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func hasWord(data []byte, i int, w string) bool {
	return len(data)-i >= len(w) && string(data[i:i+len(w)]) == w
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}
