package bus_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Whatever a stream answers to a publish, PublishSync reads it as
// jetstream's PublishMsg does: the same ack, or the same error (an API
// error callers classify by its code, such as a refused compare-and-append).
// The answers come from a responder that answers each publish with its own
// body, read by both on a real connection, so the reference is jetstream's
// own decoding.
func TestAStreamsAnswerReadsAsJetStreamReadsIt(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, n.URL())
	sub, err := nc.Subscribe("puback.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct{ name, data string }{
		{"stored", `{"stream":"AIRLOCK_EVENTS","seq":42}`},
		{"stored_in_a_domain", `{"stream":"AIRLOCK_EVENTS","domain":"hub","seq":7}`},
		{"a_duplicate_as_the_server_writes_it", `{"stream":"AIRLOCK_EVENTS","seq":42,"duplicate": true}`},
		{"a_batch_commit", `{"stream":"AIRLOCK_EVENTS","seq":9,"batch":"b1","count":2}`},
		{"a_batch_commit_of_duplicates", `{"stream":"S","seq":9,"duplicate": true,"batch":"b1","count":2}`},
		{"spaces_everywhere", " { \"stream\" : \"S\" ,\n\t\"seq\" : 18446744073709551615 , \"duplicate\" : false } "},
		{"a_counter_value", `{"stream":"S","seq":3,"val":"12"}`},
		{"a_sequence_of_zero", `{"stream":"S","seq":0}`},
		{"nulls", `{"stream":"S","seq":null,"domain":null,"batch":null,"count":null}`},
		{"the_last_of_a_repeated_field", `{"stream":"A","stream":"B","seq":1}`},
		{"a_duplicate_then_null", `{"stream":"S","seq":1,"duplicate":true,"duplicate":null}`},
		{"a_duplicate_then_false", `{"stream":"S","seq":1,"duplicate":true,"duplicate":false}`},
		{"a_stream_then_null", `{"stream":"S","stream":null,"seq":1}`},
		{"a_sequence_then_null", `{"stream":"S","seq":5,"seq":null}`},
		{"a_field_in_another_case", `{"stream":"S","SEQ":5}`},
		{"an_escaped_stream_name", `{"stream":"S\u0041","seq":5}`},
		{"a_stream_name_beyond_ascii", `{"stream":"Ström","seq":5}`},
		{"invalid_utf8_in_the_stream_name", "{\"stream\":\"S\xff\",\"seq\":5}"},
		{"invalid_utf8_in_the_domain", "{\"stream\":\"S\",\"domain\":\"\xc3\",\"seq\":5}"},
		{"invalid_utf8_in_a_key", "{\"stream\":\"S\",\"seq\":5,\"\xff\":1}"},
		{"a_key_of_its_own", `{"stream":"S","seq":5,"other":1}`},
		{"a_batch_id_as_a_number", `{"stream":"S","seq":5,"batch":7,"count":1}`},
		{"a_type", `{"type":"io.nats.jetstream.api.v1.pub_ack_response","stream":"S","seq":5}`},
		{"a_type_as_a_number", `{"stream":"S","seq":5,"type":1}`},
		{"a_type_as_true_in_another_case", `{"stream":"S","seq":5,"TYPE":true}`},
		{"a_type_as_an_object", `{"stream":"S","seq":5,"type":{}}`},
		{"a_type_as_an_array", `{"stream":"S","seq":5,"type":[1]}`},
		{"an_error_as_null", `{"stream":"S","seq":5,"error":null}`},
		{"an_error_as_a_string", `{"stream":"S","seq":5,"error":"boom"}`},
		{"an_error_as_a_number_in_another_case", `{"stream":"S","seq":5,"Error":503}`},
		{"an_error_as_false", `{"stream":"S","seq":5,"error":false}`},
		{"a_refused_compare_and_append", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"S","seq":0}`},
		{"an_error_first_and_no_stream", `{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}`},
		{"a_message_too_large", `{"stream":"S","seq":0,"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}`},
		{"no_stream", `{"seq":5}`},
		{"an_empty_object", `{}`},
		{"a_sequence_with_a_leading_zero", `{"stream":"S","seq":01}`},
		{"a_count_with_a_leading_zero", `{"stream":"S","seq":1,"batch":"b","count":007}`},
		{"a_sequence_too_large", `{"stream":"S","seq":18446744073709551616}`},
		{"a_negative_sequence", `{"stream":"S","seq":-1}`},
		{"a_fractional_sequence", `{"stream":"S","seq":1.5}`},
		{"a_sequence_with_an_exponent", `{"stream":"S","seq":1e3}`},
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
			gotAck, gotErr := bus.PublishSync(ctx, js, &nats.Msg{Subject: "puback.echo", Data: []byte(tt.data)})
			wantAck, wantErr := js.PublishMsg(ctx, &nats.Msg{Subject: "puback.echo", Data: []byte(tt.data)})
			if !reflect.DeepEqual(gotAck, wantAck) || errText(gotErr) != errText(wantErr) {
				t.Fatalf("PublishSync of the answer %q = %+v, %v; jetstream reads %+v, %v", tt.data, gotAck, gotErr, wantAck, wantErr)
			}
			var gotAPI, wantAPI *jetstream.APIError
			if errors.As(gotErr, &gotAPI) != errors.As(wantErr, &wantAPI) || (gotAPI != nil && gotAPI.ErrorCode != wantAPI.ErrorCode) {
				t.Fatalf("PublishSync of the answer %q gives the API error %v, jetstream %v", tt.data, gotAPI, wantAPI)
			}
			if errors.Is(wantErr, jetstream.ErrInvalidJSAck) != errors.Is(gotErr, jetstream.ErrInvalidJSAck) {
				t.Fatalf("PublishSync of the answer %q = %v, jetstream %v", tt.data, gotErr, wantErr)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
