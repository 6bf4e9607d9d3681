package bus

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Change is one thing Provision did.
type Change struct {
	// Kind is "stream" or "bucket"; Name its name; Action "created" or "updated".
	Kind, Name, Action string
}

// StreamConfig is the events stream as configured. Only services write it
// (agents write the intake stream), so the message ids services use for
// once-per-revision events cannot be pre-empted. Every stored event is
// republished on airlock.out.<agent>.<call>.<type>, where an agent follows
// its own calls without any access to the JetStream API, and Direct Get
// lets it read the last event of a subject of its own.
func StreamConfig(cfg config.Stream) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.Name,
		Description: "airlock lifecycle events",
		Subjects:    []string{subject.AllEvents},
		Retention:   jetstream.LimitsPolicy,
		Storage:     storage(cfg.Storage),
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.MaxAge,
		Duplicates:  cfg.DuplicateWindow,
		MaxMsgSize:  cfg.MaxMsgSize,
		MaxBytes:    -1,
		Discard:     jetstream.DiscardOld,
		AllowDirect: true,
		RePublish:   &jetstream.RePublish{Source: subject.AllEvents, Destination: subject.AllOut},
		DenyDelete:  true,
		DenyPurge:   true,
	}
}

// IntakeConfig is the stream agents publish their requests to. It is a work
// queue (a request leaves it once the policy service has recorded or refused
// it), bounded, and refuses new requests rather than dropping old ones when
// full. Its duplicate window is the server's minimum: agents choose their
// message ids, so airlock never relies on them (the policy service
// recognises a repeated request by its content), and one agent's id can
// never hold back another's request for longer than that.
func IntakeConfig(stream config.Stream, cfg config.Intake) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.Name,
		Description: "airlock agent requests, waiting for the policy service",
		Subjects:    []string{subject.IntakeSource},
		// Stored per agent, so the server refuses an agent's request beyond
		// its share at once (DiscardNewPerSubject): one agent can neither
		// fill the intake nor queue more than its share in front of others.
		SubjectTransform:     &jetstream.SubjectTransformConfig{Source: subject.IntakeSource, Destination: subject.IntakeStored},
		MaxMsgsPerSubject:    cfg.MaxPendingPerAgent,
		DiscardNewPerSubject: true,
		Retention:            jetstream.WorkQueuePolicy,
		Storage:              storage(stream.Storage),
		Replicas:             stream.Replicas,
		MaxAge:               stream.MaxAge,
		MaxBytes:             cfg.MaxBytes,
		Duplicates:           IntakeDuplicateWindow,
		MaxMsgSize:           cfg.MaxMsgSize,
		Discard:              jetstream.DiscardNew,
		DenyDelete:           true,
		DenyPurge:            true,
	}
}

// IntakeDuplicateWindow is the smallest duplicate window JetStream accepts.
const IntakeDuplicateWindow = 100 * time.Millisecond

// BucketConfigs are the KV buckets as configured.
func BucketConfigs(cfg config.Buckets) []jetstream.KeyValueConfig {
	mk := func(name, desc string) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{
			Bucket: name, Description: desc, History: cfg.History,
			Storage: storage(cfg.Storage), Replicas: cfg.Replicas,
		}
	}
	return []jetstream.KeyValueConfig{
		mk(cfg.Approvals, "approval state machine, one record per call revision"),
		withTTL(mk(cfg.Executions, "liveness of long-running executions, one record per call revision"), ExecutionsTTL),
		mk(cfg.Policy, "policy rules and data edited at run time"),
		mk(cfg.Grants, "standing grants (always allow)"),
		mk(cfg.Console, "console users, sessions and API tokens"),
		slackSeen(mk(cfg.SlackSeen, "Slack interactions already handled and cards already posted")),
	}
}

// Provision makes the events stream and every KV bucket match cfg. It is
// idempotent: a second run with the same configuration changes nothing; a
// changed setting (max age, replicas, ...) is applied in place. It returns
// what it created or updated.
func Provision(ctx context.Context, js jetstream.JetStream, cfg config.Config) ([]Change, error) {
	var changes []Change
	for _, want := range []jetstream.StreamConfig{StreamConfig(cfg.Stream), IntakeConfig(cfg.Stream, cfg.Intake)} {
		s, err := js.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			if _, err := js.CreateStream(ctx, want); err != nil {
				return changes, fmt.Errorf("create stream %s: %w", want.Name, err)
			}
			changes = append(changes, Change{"stream", want.Name, "created"})
		case err != nil:
			return changes, fmt.Errorf("look up stream %s: %w", want.Name, err)
		default:
			if !sameStream(s.CachedInfo().Config, want) {
				if _, err := js.UpdateStream(ctx, want); err != nil {
					return changes, fmt.Errorf("update stream %s: %w", want.Name, err)
				}
				changes = append(changes, Change{"stream", want.Name, "updated"})
			}
		}
	}

	for _, kvc := range BucketConfigs(cfg.Buckets) {
		kv, err := js.KeyValue(ctx, kvc.Bucket)
		switch {
		case errors.Is(err, jetstream.ErrBucketNotFound):
			if _, err := js.CreateKeyValue(ctx, kvc); err != nil {
				return changes, fmt.Errorf("create bucket %s: %w", kvc.Bucket, err)
			}
			changes = append(changes, Change{"bucket", kvc.Bucket, "created"})
		case err != nil:
			return changes, fmt.Errorf("look up bucket %s: %w", kvc.Bucket, err)
		default:
			st, err := kv.Status(ctx)
			if err != nil {
				return changes, fmt.Errorf("status of bucket %s: %w", kvc.Bucket, err)
			}
			si := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
			if int64(kvc.History) != si.Config.MaxMsgsPerSubject || kvc.Replicas != si.Config.Replicas || kvc.Description != si.Config.Description {
				if _, err := js.UpdateKeyValue(ctx, kvc); err != nil {
					return changes, fmt.Errorf("update bucket %s: %w", kvc.Bucket, err)
				}
				changes = append(changes, Change{"bucket", kvc.Bucket, "updated"})
			}
		}
		changed, err := readFromLeader(ctx, js, kvc)
		if err != nil {
			return changes, err
		}
		if changed {
			changes = append(changes, Change{"bucket", kvc.Bucket, "reads from its leader"})
		}
	}
	return changes, nil
}

// readFromLeader turns Direct Get off on a replicated bucket, so that its
// reads are answered by the leader: with Direct Get any replica answers,
// and a follower may not hold yet what was just written (a console session
// created a moment before was not found, and the reviewer sent back to the
// sign-in page, under `airlock chaos`). Writes are compare-and-set, reads
// after them must see them. A bucket on one server keeps Direct Get.
func readFromLeader(ctx context.Context, js jetstream.JetStream, kvc jetstream.KeyValueConfig) (bool, error) {
	if kvc.Replicas <= 1 {
		return false, nil
	}
	s, err := js.Stream(ctx, "KV_"+kvc.Bucket)
	if err != nil {
		return false, fmt.Errorf("look up bucket %s: %w", kvc.Bucket, err)
	}
	sc := s.CachedInfo().Config
	if !sc.AllowDirect {
		return false, nil
	}
	sc.AllowDirect = false
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		return false, fmt.Errorf("make bucket %s read from its leader: %w", kvc.Bucket, err)
	}
	return true, nil
}

// sameStream compares the settings Provision owns.
func sameStream(have, want jetstream.StreamConfig) bool {
	return reflect.DeepEqual(have.Subjects, want.Subjects) &&
		have.Description == want.Description &&
		have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.MaxAge == want.MaxAge && have.Duplicates == want.Duplicates &&
		have.MaxMsgSize == want.MaxMsgSize && have.Retention == want.Retention &&
		have.Discard == want.Discard && have.MaxBytes == want.MaxBytes &&
		have.AllowDirect == want.AllowDirect && have.DenyDelete == want.DenyDelete && have.DenyPurge == want.DenyPurge &&
		reflect.DeepEqual(have.RePublish, want.RePublish)
}

func storage(s string) jetstream.StorageType {
	if s == "memory" {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// SlackSeenTTL is how long the Slack bucket remembers an entry. Slack
// signatures are accepted up to 5 minutes either side of their timestamp, so
// a payload can be replayed for up to 10 minutes after it was first seen.
const SlackSeenTTL = 10 * time.Minute

func slackSeen(kvc jetstream.KeyValueConfig) jetstream.KeyValueConfig {
	return withTTL(kvc, SlackSeenTTL)
}

// ExecutionsTTL is how long a liveness record outlives its last heartbeat
// (the executor rewrites it every few seconds while a tool runs; a finished
// call needs it no more).
const ExecutionsTTL = 24 * time.Hour

func withTTL(kvc jetstream.KeyValueConfig, ttl time.Duration) jetstream.KeyValueConfig {
	kvc.TTL = ttl
	return kvc
}
