package teams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// Bot Framework token facts (Bot Framework "Authentication" docs: tokens
// the Bot Connector service sends to a bot).
const (
	// Issuer of the tokens the Bot Connector sends.
	Issuer = "https://api.botframework.com"
	// ChannelTeams is the channel id keys must be endorsed for, when the
	// metadata lists endorsements.
	ChannelTeams = "msteams"
	// clockSkew is how long past its expiry a token is still accepted
	// (clocks differ); go-oidc allows 5 minutes before nbf.
	clockSkew = 2 * time.Minute
	// keysMaxAge: the Bot Framework rotates keys and asks bots to refresh
	// them at least daily.
	keysMaxAge = 24 * time.Hour
	// refetchAfter bounds how often a token naming an unknown key makes
	// the keys be fetched again.
	refetchAfter = time.Minute
)

// verifier checks the token of an inbound activity.
type verifier struct {
	oidc *oidc.IDTokenVerifier
}

func newVerifier(appID, metadataURL string, client *http.Client) *verifier {
	keys := &botKeys{metadataURL: metadataURL, client: client}
	return &verifier{oidc: oidc.NewVerifier(Issuer, keys, &oidc.Config{
		ClientID:             appID, // the audience
		SupportedSigningAlgs: []string{oidc.RS256},
		Now:                  func() time.Time { return time.Now().Add(-clockSkew) },
	})}
}

// verify checks the bearer token (signature by a Bot Framework key
// endorsed for Teams, issuer, audience, expiry and nbf) and returns its
// serviceurl claim.
func (v *verifier) verify(ctx context.Context, raw string) (string, error) {
	tok, err := v.oidc.Verify(ctx, raw)
	if err != nil {
		return "", err
	}
	var claims struct {
		ServiceURL string `json:"serviceurl"`
	}
	if err := tok.Claims(&claims); err != nil {
		return "", fmt.Errorf("read the token's claims: %w", err)
	}
	if claims.ServiceURL == "" {
		return "", errors.New("the token has no serviceurl claim")
	}
	return claims.ServiceURL, nil
}

// botKeys is an oidc.KeySet over the Bot Framework's signing keys: the
// jwks_uri of its OpenID metadata, with each key's endorsements (the
// channels it may sign for). go-oidc's remote key set does not keep
// endorsements, so the keys are read here and verified with go-jose.
type botKeys struct {
	metadataURL string
	client      *http.Client

	mu      sync.Mutex
	keys    map[string]botKey
	fetched time.Time
}

type botKey struct {
	jwk          jose.JSONWebKey
	endorsements []string
	endorsed     bool // the metadata lists endorsements for this key
}

// VerifySignature implements oidc.KeySet.
func (k *botKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("the token must carry exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	key, err := k.key(ctx, kid)
	if err != nil {
		return nil, err
	}
	if key.endorsed && !slices.Contains(key.endorsements, ChannelTeams) {
		return nil, fmt.Errorf("key %q is not endorsed for channel %s", kid, ChannelTeams)
	}
	return jws.Verify(key.jwk.Key)
}

// key returns the key kid names, fetching the keys when they are older
// than keysMaxAge or (at most once a minute) when kid is unknown.
func (k *botKeys) key(ctx context.Context, kid string) (botKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.keys[kid]
	stale := time.Since(k.fetched) > keysMaxAge
	if ok && !stale {
		return key, nil
	}
	if !ok && !stale && time.Since(k.fetched) < refetchAfter {
		return botKey{}, fmt.Errorf("no Bot Framework key has id %q", kid)
	}
	keys, err := k.fetch(ctx)
	if err != nil {
		if ok {
			return key, nil // keep using a known key through an outage
		}
		return botKey{}, err
	}
	k.keys, k.fetched = keys, time.Now()
	if key, ok = keys[kid]; !ok {
		return botKey{}, fmt.Errorf("no Bot Framework key has id %q", kid)
	}
	return key, nil
}

func (k *botKeys) fetch(ctx context.Context) (map[string]botKey, error) {
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := k.getJSON(ctx, k.metadataURL, &meta); err != nil {
		return nil, fmt.Errorf("read the Bot Framework's OpenID metadata (teams.openid_metadata_url): %w", err)
	}
	if meta.JWKSURI == "" {
		return nil, fmt.Errorf("the OpenID metadata at %s names no jwks_uri", k.metadataURL)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := k.getJSON(ctx, meta.JWKSURI, &set); err != nil {
		return nil, fmt.Errorf("read the Bot Framework's keys: %w", err)
	}
	keys := map[string]botKey{}
	for _, raw := range set.Keys {
		var key botKey
		if err := key.jwk.UnmarshalJSON(raw); err != nil || !key.jwk.Valid() || !key.jwk.IsPublic() {
			continue // a key type this verifier cannot use
		}
		var extra struct {
			Endorsements *[]string `json:"endorsements"`
		}
		_ = json.Unmarshal(raw, &extra) // the key parsed above: it is JSON
		if extra.Endorsements != nil {
			key.endorsed, key.endorsements = true, *extra.Endorsements
		}
		keys[key.jwk.KeyID] = key
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the key set at %s holds no usable key", meta.JWKSURI)
	}
	return keys, nil
}

func (k *botKeys) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %s", u, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}
