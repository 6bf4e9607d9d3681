package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// store keeps console state in the console KV bucket so every replica sees
// the same users, sessions and tokens, and a restart loses none of them.
//
//	users.<base64url(name)>  userRecord   (users created at run time)
//	sessions.<sha256(secret)> sessionRecord
//	tokens.<id>              tokenRecord  (the secret is stored hashed)
//	people.<base64url(name)> personRecord (roles from the last single sign-on, sso.go)
//	sso.pending.<sha256(state)> pendingLogin (a single sign-on under way, sso.go)
//	onetap.<agent>.<call>.<rev>.<hash of approver> oneTapUse (a mail's one-tap link used, onetap.go)
type store struct {
	kv jetstream.KeyValue
	// js writes with a TTL what the KV API cannot (bus.UpdateTTL).
	js jetstream.JetStream
	// keyTTLs: the bucket takes per-key TTLs (bus.TakesKeyTTLs), so what
	// is removed leaves a marker that expires (remove), and sign-in
	// counters and pending single sign-ons expire on their own.
	keyTTLs bool
	users   map[string]config.User // from configuration; they win over the bucket
	cfg     config.Console
	now     func() time.Time
	dummyH  []byte // a bcrypt hash compared against when the user is unknown, so timing does not reveal names
}

type userRecord struct {
	Name         string    `json:"name"`
	PasswordHash string    `json:"password_hash"`
	Roles        []string  `json:"roles"`
	Groups       []string  `json:"groups,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

type sessionRecord struct {
	User string `json:"user"`
	// SSO marks a session begun by single sign-on: its roles are those of
	// the person's last sign-in (people.<b64 name>), not a local user's.
	SSO       bool      `json:"sso,omitempty"`
	CSRF      string    `json:"csrf"`
	CreatedAt time.Time `json:"created_at"`
	LastSeen  time.Time `json:"last_seen"`
}

// Token kinds.
const (
	// TokenPersonal acts as the user who created it, with their roles.
	TokenPersonal = "personal"
	// TokenAgent lets an agent submit and await its own calls, nothing else.
	TokenAgent = "agent"
)

type tokenRecord struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Owner string `json:"owner"`
	// OwnerSSO: the owner signed in by single sign-on when they made it,
	// so a personal token's roles are the person's (people.*), not a local
	// user's.
	OwnerSSO bool   `json:"owner_sso,omitempty"`
	AgentID  string `json:"agent_id,omitempty"`
	// OnBehalfOf is the person an agent token's calls act for, set by the
	// admin who created it; the agent cannot change it.
	OnBehalfOf string    `json:"on_behalf_of,omitempty"`
	Hash       string    `json:"hash"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	LastUsed   time.Time `json:"last_used,omitzero"`
}

// openStore is the store over the console bucket of deps, which must exist
// (bus.Provision creates it).
func openStore(ctx context.Context, deps svc.Deps, now func() time.Time) (*store, error) {
	kv, err := deps.JS.KeyValue(ctx, deps.Config.Buckets.Console)
	if err != nil {
		return nil, fmt.Errorf("console bucket %s: %w (is the bus provisioned?)", deps.Config.Buckets.Console, err)
	}
	st, err := newStore(kv, deps.Config.Console, now)
	if err != nil {
		return nil, err
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("console bucket %s: %w", deps.Config.Buckets.Console, err)
	}
	st.js, st.keyTTLs = deps.JS, bus.TakesKeyTTLs(status)
	return st, nil
}

// write stores data at key: a new key when rev is 0, else compare-and-set
// on rev. Where the bucket takes per-key TTLs the server removes the key
// after ttl (at least a second); a bucket provisioned before keeps it.
func (s *store) write(ctx context.Context, key string, data []byte, rev uint64, ttl time.Duration) error {
	var err error
	switch {
	case rev == 0 && s.keyTTLs:
		_, err = s.kv.Create(ctx, key, data, jetstream.KeyTTL(max(ttl, time.Second)))
	case rev == 0:
		_, err = s.kv.Create(ctx, key, data)
	case s.keyTTLs:
		err = bus.UpdateTTL(ctx, s.js, s.kv.Bucket(), key, data, rev, ttl)
	default:
		_, err = s.kv.Update(ctx, key, data, rev)
	}
	return err
}

// remove purges key, its past values with it (compare-and-set with
// jetstream.LastRevision in opts). A purge leaves a marker in the bucket
// for ever; where the bucket takes per-key TTLs the marker expires a
// moment later, so what clients make and the console removes (sessions,
// sign-in counters, pending single sign-ons, used links) leaves nothing
// behind.
func (s *store) remove(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if s.keyTTLs {
		opts = append(opts, jetstream.PurgeTTL(bus.KeyMarkerTTL))
	}
	return s.kv.Purge(ctx, key, opts...)
}

func newStore(kv jetstream.KeyValue, cfg config.Console, now func() time.Time) (*store, error) {
	users := map[string]config.User{}
	for _, u := range cfg.Users {
		if u.Name == "" {
			return nil, fmt.Errorf("console.users: a user has no name")
		}
		if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
			return nil, fmt.Errorf("console.users: %s: password_hash is not a bcrypt hash (make one with `airlock users hash-password`): %w", u.Name, err)
		}
		for _, r := range u.Roles {
			if !validRole(r) {
				return nil, fmt.Errorf("console.users: %s: unknown role %q: use reviewer, auditor or admin", u.Name, r)
			}
		}
		users[u.Name] = u
	}
	// The same cost as the hashes `airlock users hash-password` and the first
	// admin get, so that an unknown name costs what a known one does.
	dummy, err := bcrypt.GenerateFromPassword([]byte("not a password"), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("bcrypt: %w", err)
	}
	return &store{kv: kv, users: users, cfg: cfg, now: now, dummyH: dummy}, nil
}

func validRole(r string) bool {
	return r == config.RoleReviewer || r == config.RoleAuditor || r == config.RoleAdmin
}

func userKey(name string) string {
	return "users." + base64.RawURLEncoding.EncodeToString([]byte(name))
}

func randomSecret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashSecret(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// user returns a user by name: configuration first, then the bucket.
func (s *store) user(ctx context.Context, name string) (userRecord, bool, error) {
	if u, ok := s.users[name]; ok {
		return userRecord{Name: u.Name, PasswordHash: u.PasswordHash, Roles: u.Roles, Groups: u.Groups}, true, nil
	}
	if name == "" {
		return userRecord{}, false, nil
	}
	e, err := s.kv.Get(ctx, userKey(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return userRecord{}, false, nil
	}
	if err != nil {
		return userRecord{}, false, apierr.Wrap(apierr.Unavailable, err, "read user %s", name)
	}
	var u userRecord
	if err := json.Unmarshal(e.Value(), &u); err != nil {
		return userRecord{}, false, fmt.Errorf("decode user %s: %w", name, err)
	}
	return u, true, nil
}

// createUser stores a new run-time user; it fails with Conflict when the
// name exists (in configuration or the bucket).
func (s *store) createUser(ctx context.Context, name, password string, roles, groups []string) error {
	if _, ok := s.users[name]; ok {
		return apierr.New(apierr.Conflict, "user %s is defined in the configuration", name)
	}
	// One name, one account: a local user named after an SSO person would
	// read that person's tokens and trail.
	if _, err := s.kv.Get(ctx, personKey(name)); err == nil {
		return apierr.New(apierr.Conflict, "%s signs in by single sign-on: choose another name for a local user", name)
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return apierr.Wrap(apierr.Unavailable, err, "read person %s", name)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password of %s: %w", name, err)
	}
	data, _ := json.Marshal(userRecord{Name: name, PasswordHash: string(hash), Roles: roles, Groups: groups, CreatedAt: s.now().UTC()})
	if _, err := s.kv.Create(ctx, userKey(name), data); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return apierr.New(apierr.Conflict, "user %s already exists", name)
		}
		return fmt.Errorf("create user %s: %w", name, err)
	}
	return nil
}

// checkPassword returns the user when name and password match.
func (s *store) checkPassword(ctx context.Context, name, password string) (userRecord, error) {
	u, ok, err := s.user(ctx, name)
	if err != nil {
		return userRecord{}, err
	}
	if !ok {
		_ = bcrypt.CompareHashAndPassword(s.dummyH, []byte(password))
		return userRecord{}, apierr.New(apierr.Unauthenticated, "wrong user name or password")
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil {
		return userRecord{}, apierr.New(apierr.Unauthenticated, "wrong user name or password")
	}
	return u, nil
}

// newSession stores a session for a local user and returns its secret (the cookie value).
func (s *store) newSession(ctx context.Context, user string) (string, sessionRecord, error) {
	return s.newSessionFor(ctx, user, false)
}

// newSessionFor stores a session for user, begun by single sign-on when
// sso is true, and returns its secret (the cookie value).
func (s *store) newSessionFor(ctx context.Context, user string, sso bool) (string, sessionRecord, error) {
	secret := randomSecret(32)
	now := s.now().UTC()
	rec := sessionRecord{User: user, SSO: sso, CSRF: randomSecret(32), CreatedAt: now, LastSeen: now}
	data, _ := json.Marshal(rec)
	if _, err := s.kv.Create(ctx, "sessions."+hashSecret(secret), data); err != nil {
		return "", rec, apierr.Wrap(apierr.Unavailable, err, "store session")
	}
	return secret, rec, nil
}

// session returns the live session for a cookie value; an unknown, idle or
// too old session is Unauthenticated. It refreshes LastSeen at most once a
// minute so that a busy page does not write on every request.
func (s *store) session(ctx context.Context, secret string) (sessionRecord, error) {
	if secret == "" {
		return sessionRecord{}, apierr.New(apierr.Unauthenticated, "sign in first")
	}
	key := "sessions." + hashSecret(secret)
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return sessionRecord{}, apierr.New(apierr.Unauthenticated, "your session ended: sign in again")
	}
	if err != nil {
		return sessionRecord{}, apierr.Wrap(apierr.Unavailable, err, "read session")
	}
	var rec sessionRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return sessionRecord{}, fmt.Errorf("decode session: %w", err)
	}
	now := s.now()
	if now.Sub(rec.LastSeen) > s.cfg.SessionTTL || now.Sub(rec.CreatedAt) > s.cfg.SessionMaxAge {
		_ = s.remove(ctx, key)
		return sessionRecord{}, apierr.New(apierr.Unauthenticated, "your session expired: sign in again")
	}
	if now.Sub(rec.LastSeen) > time.Minute {
		rec.LastSeen = now.UTC()
		data, _ := json.Marshal(rec)
		// A lost race with another replica's refresh is harmless: both wrote "now".
		_, _ = s.kv.Update(ctx, key, data, e.Revision())
	}
	return rec, nil
}

func (s *store) endSession(ctx context.Context, secret string) error {
	if secret == "" {
		return nil
	}
	if err := s.remove(ctx, "sessions."+hashSecret(secret)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// newToken creates an API token and returns its secret, shown once.
// Secrets look like "alk_<id>_<random>": the id finds the record, the whole
// secret is compared by hash.
func (s *store) newToken(ctx context.Context, rec tokenRecord, ttl time.Duration) (string, tokenRecord, error) {
	rec.ID = strings.ToLower(randomHex(8))
	secret := "alk_" + rec.ID + "_" + randomSecret(32)
	rec.Hash = hashSecret(secret)
	rec.CreatedAt = s.now().UTC()
	if ttl > 0 {
		rec.ExpiresAt = rec.CreatedAt.Add(ttl)
	}
	data, _ := json.Marshal(rec)
	if _, err := s.kv.Create(ctx, "tokens."+rec.ID, data); err != nil {
		return "", rec, apierr.Wrap(apierr.Unavailable, err, "store token")
	}
	return secret, rec, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// token resolves a bearer secret to its record.
func (s *store) token(ctx context.Context, secret string) (tokenRecord, error) {
	bad := apierr.New(apierr.Unauthenticated, "the API token is not valid: create one in the console (Tokens)")
	rest, ok := strings.CutPrefix(secret, "alk_")
	if !ok {
		return tokenRecord{}, bad
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || id == "" || strings.ContainsAny(id, ".*> ") {
		return tokenRecord{}, bad
	}
	e, err := s.kv.Get(ctx, "tokens."+id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return tokenRecord{}, bad
	}
	if err != nil {
		return tokenRecord{}, apierr.Wrap(apierr.Unavailable, err, "read token")
	}
	var rec tokenRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return tokenRecord{}, fmt.Errorf("decode token %s: %w", id, err)
	}
	if subtle.ConstantTimeCompare([]byte(rec.Hash), []byte(hashSecret(secret))) != 1 {
		return tokenRecord{}, bad
	}
	if !rec.ExpiresAt.IsZero() && s.now().After(rec.ExpiresAt) {
		return tokenRecord{}, apierr.New(apierr.Unauthenticated, "the API token %s expired on %s: create a new one in the console", rec.Name, rec.ExpiresAt.Format(time.DateOnly))
	}
	return rec, nil
}

// tokens lists token records; owner "" lists everyone's.
func (s *store) tokens(ctx context.Context, owner string) ([]tokenRecord, error) {
	keys, err := bus.Keys(ctx, s.kv, "tokens.*")
	if err != nil {
		return nil, apierr.Wrap(apierr.Unavailable, err, "list tokens")
	}
	var out []tokenRecord
	for _, key := range keys {
		e, err := s.kv.Get(ctx, key)
		if err != nil {
			continue // deleted meanwhile
		}
		var rec tokenRecord
		if json.Unmarshal(e.Value(), &rec) != nil {
			continue
		}
		if owner == "" || rec.Owner == owner {
			out = append(out, rec)
		}
	}
	return out, nil
}

// revokeToken deletes a token; only its owner or an admin may.
func (s *store) revokeToken(ctx context.Context, id string, by Principal) (tokenRecord, error) {
	var rec tokenRecord
	if id == "" || strings.ContainsAny(id, ".*> ") {
		return rec, apierr.New(apierr.InvalidRequest, "token id %q is not valid", id)
	}
	e, err := s.kv.Get(ctx, "tokens."+id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rec, apierr.New(apierr.NotFound, "no token %s", id)
	}
	if err != nil {
		return rec, apierr.Wrap(apierr.Unavailable, err, "read token")
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, fmt.Errorf("decode token %s: %w", id, err)
	}
	if rec.Owner != by.Name && !by.Has(config.RoleAdmin) {
		return rec, apierr.New(apierr.NotAuthorized, "token %s belongs to %s: only they or an admin can revoke it", id, rec.Owner)
	}
	if err := s.kv.Delete(ctx, "tokens."+id); err != nil {
		return rec, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return rec, nil
}

// endAllSessions ends every stored session: each cookie signs in no more.
func (s *store) endAllSessions(ctx context.Context) error {
	keys, err := bus.Keys(ctx, s.kv, "sessions.*")
	if err != nil {
		return fmt.Errorf("list the console sessions to end: %w", err)
	}
	for _, key := range keys {
		if err := s.remove(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("end console session %s: %w", key, err)
		}
	}
	return nil
}

// sweepSessions deletes sessions that expired without signing out, so the
// bucket does not grow forever. Replicas may sweep at the same time: a
// delete of a deleted key is harmless.
func (s *store) sweepSessions(ctx context.Context) (int, error) {
	keys, err := bus.Keys(ctx, s.kv, "sessions.*")
	if err != nil {
		return 0, fmt.Errorf("list sessions: %w", err)
	}
	now, n := s.now(), 0
	for _, key := range keys {
		e, err := s.kv.Get(ctx, key)
		if err != nil {
			continue // deleted meanwhile
		}
		var rec sessionRecord
		if json.Unmarshal(e.Value(), &rec) != nil || now.Sub(rec.LastSeen) > s.cfg.SessionTTL || now.Sub(rec.CreatedAt) > s.cfg.SessionMaxAge {
			if err := s.remove(ctx, key, jetstream.LastRevision(e.Revision())); err == nil {
				n++
			}
		}
	}
	return n, nil
}

// runtimeUsers counts the users stored in the bucket.
func (s *store) runtimeUsers(ctx context.Context) (int, error) {
	keys, err := bus.Keys(ctx, s.kv, "users.*")
	return len(keys), err
}

// purgeStale purges every key of kv under filter whose value stale says
// has served its time; what names them in errors. A key changed since it
// was read is kept (the purge is compare-and-set), one gone is skipped.
func (s *store) purgeStale(ctx context.Context, filter, what string, stale func(value []byte) bool) error {
	keys, err := bus.Keys(ctx, s.kv, filter)
	if err != nil {
		return fmt.Errorf("list %s: %w", what, err)
	}
	for _, key := range keys {
		e, err := s.kv.Get(ctx, key)
		if err != nil {
			continue // taken meanwhile
		}
		if stale(e.Value()) {
			_ = s.remove(ctx, key, jetstream.LastRevision(e.Revision()))
		}
	}
	return nil
}
