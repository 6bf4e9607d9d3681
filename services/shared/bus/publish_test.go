package bus

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A compare-and-append the stream refused, or a KV write by revision,
// is a conflict whichever code the stream answers with: a single server
// says 10071, a replicated stream 10164 (also while another append to the
// subject is in flight), as nats.go wraps them for the KV. Anything else
// is not.
func TestAConflictIsRecognisedOnEveryServer(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"single_server_wrong_last_sequence", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, true},
		{"replicated_stream_wrong_last_sequence", fmt.Errorf("wrapped: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}), true},
		{"kv_create_of_an_existing_key", fmt.Errorf("%w: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}, jetstream.ErrKeyExists), true},
		{"kv_update_at_a_stale_revision", fmt.Errorf("%w: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}, jetstream.ErrKeyRevisionMismatch), true},
		{"kv_update_at_a_stale_revision_unwrapped", jetstream.ErrKeyRevisionMismatch, true},
		{"a_missing_key_is_not", jetstream.ErrKeyNotFound, false},
		{"no_stream_answering_is_not", &jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabled}, false},
		{"a_timeout_is_not", context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Conflict(tt.err); got != tt.want {
				t.Fatalf("Conflict(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
