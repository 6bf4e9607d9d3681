package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// Whatever a stream answers to a publish, PublishSync reads it as
// jetstream's PublishMsg does: the same ack, or the same error (an API
// error callers classify by its code, such as a refused compare-and-append).
func TestAStreamsAnswerReadsAsJetStreamReadsIt(t *testing.T) {
	for _, tt := range []struct{ name, data string }{
		{"stored", `{"stream":"AIRLOCK_EVENTS","seq":42}`},
		{"stored_in_a_domain", `{"stream":"AIRLOCK_EVENTS","domain":"hub","seq":7}`},
		{"a_duplicate_as_the_server_writes_it", `{"stream":"AIRLOCK_EVENTS","seq":42,"duplicate": true}`},
		{"a_batch_commit", `{"stream":"AIRLOCK_EVENTS","seq":9,"batch":"b1","count":2}`},
		{"a_batch_commit_of_duplicates", `{"stream":"S","seq":9,"duplicate": true,"batch":"b1","count":2}`},
		{"spaces_everywhere", " { \"stream\" : \"S\" ,\n\t\"seq\" : 18446744073709551615 , \"duplicate\" : false } "},
		{"a_counter_value", `{"stream":"S","seq":3,"val":"12"}`},
		{"nulls", `{"stream":"S","seq":null,"domain":null}`},
		{"the_last_of_a_repeated_field", `{"stream":"A","stream":"B","seq":1}`},
		{"a_field_in_another_case", `{"stream":"S","SEQ":5}`},
		{"an_escaped_stream_name", `{"stream":"S\u0041","seq":5}`},
		{"a_refused_compare_and_append", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"S","seq":0}`},
		{"an_error_first_and_no_stream", `{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}`},
		{"a_message_too_large", `{"stream":"S","seq":0,"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}`},
		{"no_stream", `{"seq":5}`},
		{"an_empty_object", `{}`},
		{"a_sequence_too_large", `{"stream":"S","seq":18446744073709551616}`},
		{"a_negative_sequence", `{"stream":"S","seq":-1}`},
		{"a_fractional_sequence", `{"stream":"S","seq":1.5}`},
		{"a_sequence_as_a_string", `{"stream":"S","seq":"5"}`},
		{"a_stream_as_a_number", `{"stream":5,"seq":5}`},
		{"a_duplicate_as_a_string", `{"stream":"S","seq":5,"duplicate":"true"}`},
		{"trailing_bytes", `{"stream":"S","seq":5}x`},
		{"cut_short", `{"stream":"S","seq":5`},
		{"a_missing_comma", `{"stream":"S" "seq":5}`},
		{"not_json", `+OK`},
		{"nothing", ``},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gotAck, gotErr := parsePubAck([]byte(tt.data))
			wantAck, wantErr := jetStreamReads([]byte(tt.data))
			if !reflect.DeepEqual(gotAck, wantAck) || errText(gotErr) != errText(wantErr) {
				t.Fatalf("parsePubAck(%s) = %+v, %v; jetstream reads %+v, %v", tt.data, gotAck, gotErr, wantAck, wantErr)
			}
			var gotAPI, wantAPI *jetstream.APIError
			if errors.As(gotErr, &gotAPI) != errors.As(wantErr, &wantAPI) || (gotAPI != nil && gotAPI.ErrorCode != wantAPI.ErrorCode) {
				t.Fatalf("parsePubAck(%s) gives the API error %v, jetstream %v", tt.data, gotAPI, wantAPI)
			}
			if errors.Is(wantErr, jetstream.ErrInvalidJSAck) != errors.Is(gotErr, jetstream.ErrInvalidJSAck) {
				t.Fatalf("parsePubAck(%s) = %v, jetstream %v", tt.data, gotErr, wantErr)
			}
		})
	}
}

// jetStreamReads is nats.go jetstream's publishMsg decoding an answer.
func jetStreamReads(data []byte) (*jetstream.PubAck, error) {
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

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
