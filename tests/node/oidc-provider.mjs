// A real OpenID provider (oidc-provider) for the console's single sign-on
// tests. It listens on a random loopback port and prints its issuer URL as
// the first line of stdout, then "redirect URL" for each redirect to the client.
//
// Usage: node oidc-provider.mjs CONFIG.json
//   {"client_id": "...", "client_secret": "...", "redirect_uris": ["..."],
//    "accounts": "ACCOUNTS.json"}
// ACCOUNTS.json maps a login to its claims ({"alice": {"email": ...,
// "email_verified": true, "name": ..., "groups": [...]}}); it is read at each
// sign-in, so a test can move a person between groups. The login form (the
// provider's own development pages) takes any password.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import Provider from 'oidc-provider';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const accounts = () => JSON.parse(readFileSync(cfg.accounts, 'utf8'));

const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: cfg.client_id,
    client_secret: cfg.client_secret,
    redirect_uris: cfg.redirect_uris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  // The claims asked for by scope go into the ID token itself, as most
  // enterprise providers do for groups.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ['airlock-tests-only'] },
  async findAccount(ctx, id) {
    const claims = accounts()[id];
    if (!claims) return undefined;
    return { accountId: id, claims: async () => ({ sub: id, ...claims }) };
  },
  // The console is a first-party client: no consent page.
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});
provider.on('server_error', (ctx, err) => console.error('oidc-provider:', err));
// Each redirect back to the client is printed too ("redirect URL"), so that
// a test can replay a callback the browser followed.
const handle = provider.callback();
server.on('request', (req, res) => {
  res.on('finish', () => {
    const to = String(res.getHeader('location') ?? '');
    if (cfg.redirect_uris.some((u) => to.startsWith(u))) console.log(`redirect ${to}`);
  });
  handle(req, res);
});
console.log(issuer);
