package bus

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/nats-io/nats.go"
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
// lets it read the last event of a subject of its own. Atomic batch publish
// lets the policy record a request and its decision in one write
// (AppendBatch; ARCHITECTURE.md, "Exactly once").
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
		// Bounded, and full means new events are refused: dropping old
		// ones would lose audit records and the earlier events of calls
		// still under way (exactly-once reads them). max_age still expires.
		MaxBytes:           cfg.MaxBytes,
		Discard:            jetstream.DiscardNew,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		RePublish:          &jetstream.RePublish{Source: subject.AllEvents, Destination: subject.AllOut},
		DenyDelete:         true,
		DenyPurge:          true,
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

// BucketConfigs are the KV buckets as configured (buckets, and
// approval.max_bytes for the approvals bucket).
func BucketConfigs(all config.Config) []jetstream.KeyValueConfig {
	cfg := all.Buckets
	mk := func(name, desc string) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{
			Bucket: name, Description: desc, History: cfg.History,
			Storage: storage(cfg.Storage), Replicas: cfg.Replicas,
		}
	}
	return []jetstream.KeyValueConfig{
		approvalsBucket(mk(cfg.Approvals, "approval state machine, one record per call revision"), all.Approval.MaxBytes),
		withTTL(mk(cfg.Executions, "liveness of long-running executions, one record per call revision"), ExecutionsTTL),
		mk(cfg.Policy, "policy rules and data edited at run time"),
		mk(cfg.Grants, "standing grants (always allow)"),
		keyTTLs(mk(cfg.Console, "console users, sessions and API tokens")), // sign-in counters expire (console login.go)
		slackSeen(mk(cfg.SlackSeen, "Slack interactions already handled and cards already posted")),
		clientWaitsBucket(mk(cfg.ClientWaits, "MCP gateway calls a client was told to call again, and whether a client waits for each"), cfg.ClientWaitsMaxBytes),
		withTTL(mk(cfg.TeamsSeen, "Teams activities already handled and cards already posted"), TeamsSeenTTL),
		inDoubtBucket(mk(cfg.InDoubt, "calls that ended in doubt (failed, indeterminate) and whether a person says they happened"), cfg.InDoubtMaxBytes),
	}
}

// Provision makes the events stream and every KV bucket match cfg. It is
// idempotent: a second run with the same configuration changes nothing; a
// changed setting (max age, replicas, ...) is applied in place. It returns
// what it created or updated.
//
// A cluster that has just started answers its first requests before it can
// place a replicated stream (no meta leader yet, or one that does not know
// every peer: "no suitable peers for placement"). Provision waits that out,
// repeating each step, for at most cfg.NATS.ProvisionWait, and then says
// what it could not do and what to check.
func Provision(ctx context.Context, js jetstream.JetStream, cfg config.Config) ([]Change, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.NATS.ProvisionWait)
	defer cancel()
	var changes []Change
	for _, st := range []struct {
		want    jetstream.StreamConfig
		setting string // what bounds its size
	}{{StreamConfig(cfg.Stream), "stream.max_bytes"}, {IntakeConfig(cfg.Stream, cfg.Intake), "intake.max_bytes"}} {
		want := st.want
		err := untilPlaced(ctx, cfg, "stream "+want.Name, func(ctx context.Context) error {
			c, err := ensureStream(ctx, js, want, st.setting)
			if c != nil {
				changes = append(changes, *c)
			}
			return err
		})
		if err != nil {
			return changes, err
		}
	}
	for _, kvc := range BucketConfigs(cfg) {
		err := untilPlaced(ctx, cfg, "bucket "+kvc.Bucket, func(ctx context.Context) error {
			c, err := ensureBucket(ctx, js, kvc, bucketBoundOf(cfg, kvc.Bucket))
			changes = append(changes, c...)
			return err
		})
		if err != nil {
			return changes, err
		}
	}
	return changes, nil
}

// ensureStream creates the stream or brings its settings to want; the
// change is nil when there was none. setting is what bounds its size.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, setting string) (*Change, error) {
	s, err := js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := js.CreateStream(ctx, want); err != nil {
			return nil, fmt.Errorf("create stream %s: %w", want.Name, storageRefused(err, want.MaxBytes, setting))
		}
		return &Change{"stream", want.Name, "created"}, nil
	case err != nil:
		return nil, fmt.Errorf("look up stream %s: %w", want.Name, err)
	case sameStream(s.CachedInfo().Config, want):
		return nil, nil
	}
	// A bound under what the stream holds would refuse every new message
	// at once (nothing is dropped to make room).
	if held := s.CachedInfo().State.Bytes; want.MaxBytes > 0 && held > uint64(want.MaxBytes) {
		return nil, fmt.Errorf("stream %s holds %d MiB, more than %s allows (%d MiB): raise %s above what it holds, "+
			"or it would refuse every new message", want.Name, held>>20, setting, want.MaxBytes>>20, setting)
	}
	if _, err := js.UpdateStream(ctx, want); err != nil {
		return nil, fmt.Errorf("update stream %s: %w", want.Name, storageRefused(err, want.MaxBytes, setting))
	}
	return &Change{"stream", want.Name, "updated"}, nil
}

// bucketBound is what bounds a bucket's bytes, and what its service does
// short of the bound.
type bucketBound struct {
	setting string // the setting that sets it ("" for a bucket with no bound)
	// mark is the share of the bound past which the bucket's service takes
	// no new work (refusal says how), and drain how the bucket empties
	// again without a higher bound.
	mark           float64
	refusal, drain string
	// soft: a bucket that already holds more than a new bound keeps the
	// bound it has, rather than provisioning refusing: a bound a
	// deployment did not choose must not stop it.
	soft bool
}

// bucketBoundOf is bucket's bound (no setting for a bucket with none).
func bucketBoundOf(cfg config.Config, bucket string) bucketBound {
	switch bucket {
	case cfg.Buckets.Approvals:
		return bucketBound{setting: "approval.max_bytes", mark: config.ApprovalRefusalMark,
			refusal: "every new call that needs a person is canceled at once",
			drain:   "let ended records leave the bucket first (approval.ended_retention)"}
	case cfg.Buckets.ClientWaits:
		return bucketBound{setting: "buckets.client_waits_max_bytes", soft: true}
	case cfg.Buckets.InDoubt:
		return bucketBound{setting: "buckets.in_doubt_max_bytes", soft: true}
	}
	return bucketBound{}
}

// refuses says why a new, lower bound of maxBytes (current: the bucket's
// bound now) is not applied to a bucket holding held bytes (nil when it
// may be): one the bucket is already past the mark of would refuse new
// work at once, and one under what it holds would also refuse decisions on
// the work it holds. The operator is told the least bound that takes no
// new work away.
func (b bucketBound) refuses(bucket string, held uint64, maxBytes, current int64) error {
	mark := b.mark
	if mark <= 0 {
		mark = 1 // no mark: the bound itself
	}
	if maxBytes <= 0 || float64(held) < mark*float64(maxBytes) {
		return nil
	}
	const mib = 1 << 20
	least := (int64(float64(held)/mark)/mib + 1) * mib
	now := "no bound"
	if current > 0 {
		now = byteSize(current)
	}
	var said string
	switch {
	case held > uint64(maxBytes):
		said = fmt.Sprintf("more than the %s %s would allow: every write that grows a record would be refused, decisions on the calls it holds among them", byteSize(maxBytes), b.setting)
		if b.refusal != "" {
			said += ", and " + b.refusal
		}
	default:
		said = fmt.Sprintf("%.0f%% of the %s %s would allow: past %.0f%% of it %s", 100*float64(held)/float64(maxBytes), byteSize(maxBytes), b.setting, 100*mark, b.refusal)
	}
	again := "run `airlock provision` again"
	if b.drain != "" {
		again += ", or " + b.drain
	}
	return fmt.Errorf("bucket %s holds %s, %s. Set %s to at least %s (%d bytes) and %s; the bucket keeps its bound (%s)",
		bucket, byteSize(int64(held)), said, b.setting, byteSize(least), least, again, now)
}

// ensureBucket creates the bucket or brings its settings to kvc, and makes
// a replicated one read from its leader. bound is what bounds its bytes.
func ensureBucket(ctx context.Context, js jetstream.JetStream, kvc jetstream.KeyValueConfig, bound bucketBound) ([]Change, error) {
	changes, err := applyBucket(ctx, js, kvc, bound)
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		return changes, fmt.Errorf("bucket %s needs entries with their own TTL, which NATS servers before 2.11 lack: upgrade the servers (deploy/ ships 2.12), then run `airlock provision` again", kvc.Bucket)
	}
	return changes, err
}

// applyBucket is ensureBucket, its errors as the server and client say them.
func applyBucket(ctx context.Context, js jetstream.JetStream, kvc jetstream.KeyValueConfig, bound bucketBound) ([]Change, error) {
	var changes []Change
	kv, err := js.KeyValue(ctx, kvc.Bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		if _, err := js.CreateKeyValue(ctx, kvc); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", kvc.Bucket, storageRefused(err, kvc.MaxBytes, bound.setting))
		}
		changes = append(changes, Change{"bucket", kvc.Bucket, "created"})
	case err != nil:
		return nil, fmt.Errorf("look up bucket %s: %w", kvc.Bucket, err)
	default:
		st, err := kv.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("status of bucket %s: %w", kvc.Bucket, err)
		}
		si := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
		if held := si.State.Bytes; bound.soft && kvc.MaxBytes > 0 && held > uint64(kvc.MaxBytes) && streamMaxBytes(kvc.MaxBytes) != si.Config.MaxBytes {
			// Bounded now, it would refuse every write at once: it keeps
			// its bound until what it holds has gone under the new one.
			changes = append(changes, Change{"bucket", kvc.Bucket, fmt.Sprintf("keeps its byte bound: it holds %s, more than %s (%s); "+
				"run `airlock provision` again once it holds less", byteSize(int64(held)), bound.setting, byteSize(kvc.MaxBytes))})
			kvc.MaxBytes = max(si.Config.MaxBytes, 0)
		}
		if int64(kvc.History) != si.Config.MaxMsgsPerSubject || kvc.Replicas != si.Config.Replicas || kvc.Description != si.Config.Description ||
			kvc.LimitMarkerTTL != si.Config.SubjectDeleteMarkerTTL || streamMaxBytes(kvc.MaxBytes) != si.Config.MaxBytes {
			// A lower bound the bucket is already past the mark of (or
			// over) is refused, not applied: it would refuse new work at
			// once (and decisions on the work held), with only a log line
			// to say so. A higher one only adds room, and is applied.
			if cur := si.Config.MaxBytes; !bound.soft && kvc.MaxBytes > 0 && (cur <= 0 || kvc.MaxBytes < cur) {
				if err := bound.refuses(kvc.Bucket, si.State.Bytes, kvc.MaxBytes, si.Config.MaxBytes); err != nil {
					return nil, err
				}
			}
			if _, err := js.UpdateKeyValue(ctx, kvc); err != nil {
				return nil, fmt.Errorf("update bucket %s: %w", kvc.Bucket, storageRefused(err, kvc.MaxBytes, bound.setting))
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
	return changes, nil
}

// provisionAttempt bounds one try of one step, so that a request a
// leaderless cluster never answers is tried again rather than waited on.
const provisionAttempt = 5 * time.Second

// untilPlaced runs step until it succeeds, fails for good, or ctx ends.
// Every step is idempotent (it looks before it creates), so a try that
// timed out after the server acted is harmless to repeat.
func untilPlaced(ctx context.Context, cfg config.Config, what string, step func(context.Context) error) error {
	err := untilAnswered(ctx, step, clusterNotReady, nil)
	if err != nil && ctx.Err() != nil && clusterNotReady(err) {
		return fmt.Errorf("provision %s: the NATS cluster could not place it with %d replicas within %s (%w): "+
			"check that every server is running and routed to the others and that JetStream has a meta leader "+
			"(each server's /jsz?leader-only=true), then run `airlock provision` again; nats.provision_wait sets how long to wait",
			what, max(cfg.Stream.Replicas, cfg.Buckets.Replicas), cfg.NATS.ProvisionWait, err)
	}
	return err
}

// untilAnswered runs step, each try bounded by provisionAttempt, until it
// succeeds, fails with what waiting will not change (again says which
// errors waiting may change), or ctx ends; then it returns step's last
// error. retrying, when not nil, is told of the first error tried again.
func untilAnswered(ctx context.Context, step func(context.Context) error, again func(error) bool, retrying func(error)) error {
	pause := 50 * time.Millisecond
	for tries := 0; ; tries++ {
		actx, cancel := context.WithTimeout(ctx, provisionAttempt)
		err := step(actx)
		cancel()
		if err == nil || !again(err) {
			return err
		}
		if tries == 0 && retrying != nil {
			retrying(err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// clusterNotReady reports whether err is what a cluster answers while it is
// still forming (no meta leader, a leader that does not yet know enough
// peers, or nobody answering JetStream requests yet), as opposed to a
// refusal that waiting will not change.
func clusterNotReady(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jsErrNoSuitablePeers, jsErrClusterNotAvailable, jsErrClusterNotLeader:
			return true
		}
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// JetStream API error codes a forming cluster answers (nats-server's
// errors.json: JSClusterNoPeersErrF, JSClusterNotAvailErr, JSClusterNotLeaderErr).
const (
	jsErrNoSuitablePeers     jetstream.ErrorCode = 10005
	jsErrClusterNotAvailable jetstream.ErrorCode = 10008
	jsErrClusterNotLeader    jetstream.ErrorCode = 10009
)

// jsErrStorageExceeded is JetStream refusing to reserve the bytes a stream
// may hold (nats-server's errors.json: JSStorageResourcesExceededErr).
const jsErrStorageExceeded jetstream.ErrorCode = 10047

// storageRefused says what to do when the server will not reserve the bytes
// a bounded stream or bucket may hold (maxBytes, which setting sets): by
// default NATS offers 75% of the disk free when it started.
func storageRefused(err error, maxBytes int64, setting string) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrStorageExceeded || maxBytes <= 0 || setting == "" {
		return err
	}
	return fmt.Errorf("%w: the NATS server cannot set aside the %d MiB this may hold; free disk space "+
		"under its JetStream store_dir, set max_file_store in its jetstream block (deploy/nats/airlock.conf), "+
		"or lower %s", err, maxBytes>>20, setting)
}

// streamMaxBytes is a bucket's MaxBytes as its stream states it (a
// bucket's 0, unbounded, is the stream's -1).
func streamMaxBytes(kvMaxBytes int64) int64 {
	if kvMaxBytes == 0 {
		return -1
	}
	return kvMaxBytes
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
		have.AllowDirect == want.AllowDirect && have.AllowAtomicPublish == want.AllowAtomicPublish && have.DenyDelete == want.DenyDelete && have.DenyPurge == want.DenyPurge &&
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

// TeamsSeenTTL is how long the Teams bucket remembers an entry: longer
// than a Bot Framework token lives (an hour), so an activity replayed with
// its still-valid token is refused for as long as the token is accepted.
const TeamsSeenTTL = 2 * time.Hour

// ExecutionsTTL is how long a liveness record outlives its last heartbeat
// (the executor rewrites it every few seconds while a tool runs; a finished
// call needs it no more).
const ExecutionsTTL = 24 * time.Hour

// ClientWaitsTTL is how long the gateway remembers a call whose client was
// told to call again: longer than any approval deadline (a call decided
// meanwhile returns its outcome to the repeated call).
const ClientWaitsTTL = 30 * 24 * time.Hour

// clientWaitsBucket is the client-waits bucket: entries carry their own
// TTL (keyTTLs), the bucket keeps none longer than ClientWaitsTTL, and its
// bytes are bounded (maxBytes, buckets.client_waits_max_bytes) so that no
// agent's waiting calls can take the NATS volume the events stream needs.
func clientWaitsBucket(kvc jetstream.KeyValueConfig, maxBytes int64) jetstream.KeyValueConfig {
	kvc.MaxBytes = maxBytes
	return keyTTLs(withTTL(kvc, ClientWaitsTTL))
}

// inDoubtBucket is the in-doubt bucket: one value per key (an answered
// task's TTL, approval.ended_retention, must remove the key, not uncover
// the open task before it; the events stream holds the answer), writes
// that carry their own TTL, and a byte bound (maxBytes,
// buckets.in_doubt_max_bytes) beside each agent's count of tasks
// (approval.max_in_doubt_per_agent), since an agent can end calls in doubt
// at will.
func inDoubtBucket(kvc jetstream.KeyValueConfig, maxBytes int64) jetstream.KeyValueConfig {
	kvc.History, kvc.MaxBytes = 1, maxBytes
	return keyTTLs(kvc)
}

// KeyMarkerTTL is how long a bucket that takes per-key TTLs keeps the
// marker the server writes when a key's TTL runs out (the server's least):
// live watches see it; an entry's own TTL is at least this long.
const KeyMarkerTTL = time.Second

// approvalsBucket keeps one value per key: a transition is a
// compare-and-set on the latest, nothing reads past values (the events
// stream holds every change), and an ended record's TTL
// (approval.ended_retention) must remove the key, not uncover the value
// before it. Each record holds a call's arguments, so History 5 kept five
// copies of each, for ever (R5 F2). Its bytes are bounded (maxBytes,
// approval.max_bytes): full, the server refuses a write (a KV bucket
// discards nothing old), and the approval service stops putting new calls
// to reviewers before that (config.ApprovalRefusalMark).
func approvalsBucket(kvc jetstream.KeyValueConfig, maxBytes int64) jetstream.KeyValueConfig {
	kvc.History, kvc.MaxBytes = 1, maxBytes
	return keyTTLs(kvc)
}

// TakesKeyTTLs reports whether a bucket's writes may carry their own TTL
// (keyTTLs): a bucket provisioned before it did keeps every key until
// `airlock provision` updates it.
func TakesKeyTTLs(st jetstream.KeyValueStatus) bool {
	kst, ok := st.(*jetstream.KeyValueBucketStatus)
	return ok && kst.LimitMarkerTTL() > 0
}

// keyTTLs lets writes to the bucket carry their own TTL (jetstream.KeyTTL,
// NATS server 2.11 and later): the gateway's delivery claims live only as
// long as a repeated call may still be answered the call's outcome.
func keyTTLs(kvc jetstream.KeyValueConfig) jetstream.KeyValueConfig {
	kvc.LimitMarkerTTL = KeyMarkerTTL
	return kvc
}

func withTTL(kvc jetstream.KeyValueConfig, ttl time.Duration) jetstream.KeyValueConfig {
	kvc.TTL = ttl
	return kvc
}
