// An authorization server for the per-user upstream credentials tests (mcphost-proxy, auth mode "oauth"):
// oidc-provider on 127.0.0.1 only, with its development login and consent pages (any login name signs
// in as that subject; the password is not checked).
//
//   node authcode.mjs PORT [ACCESS_TOKEN_TTL_SECONDS] [rotate]
//
// "rotate": every refresh hands out a new refresh token and spends the old one (a spent one used again
// is refused, and the grant it belongs to is revoked: oidc-provider's reuse detection).
//
// Issuer http://127.0.0.1:PORT. Clients:
//   mcphost-gateway / mcphost-gateway-secret  authorization code + PKCE, refresh tokens, token exchange
//                                             (RFC 8693: a token of this provider for one of a resource);
//                                             native, so any loopback port of its redirect URI matches
//                                             (RFC 8252): http://127.0.0.1:ANY/oauth/callback
//   mcphost-login / mcphost-login-secret      authorization code + PKCE, openid: the host's own login of a
//                                             browser (mcphost-proxy [plugins.proxy.browser_login]),
//                                             redirect http://127.0.0.1:ANY/oauth/login/callback
//   mcp-client, mcp-client-2 / ID-secret      client credentials (the gateway's own listing token, and
//                                             the downstream callers' tokens: two principals)
// Resource indicators (RFC 8707) are required; access tokens are JWTs (ES256) whose aud is the resource
// and whose sub is the signed-in user. Prints "ready" once listening.
import { createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { jwtVerify } from 'jose';
import Provider, { errors } from 'oidc-provider';

const port = Number(process.argv[2]);
const ttl = Number(process.argv[3] || 300);
const rotate = process.argv.slice(4).includes('rotate');
if (!Number.isInteger(port) || port <= 0 || !(ttl > 0)) {
  console.error('usage: node authcode.mjs PORT [ACCESS_TOKEN_TTL_SECONDS] [rotate]');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'authcode-es256', use: 'sig', alg: 'ES256' };

// ACCESS_TOKEN_TTL_SECONDS is for the gateway's per-user tokens (mcphost-gateway); the client-credentials
// tokens (the callers' own, the gateway's listing token) live 300 s.
function resourceServerInfo(resource, client) {
  try {
    new URL(resource);
  } catch {
    throw new errors.InvalidTarget();
  }
  const lifetime = client && client.clientId === 'mcphost-gateway' ? ttl : 300;
  return { scope: 'mcp:tools', audience: resource, accessTokenTTL: lifetime, accessTokenFormat: 'jwt',
           jwt: { sign: { alg: 'ES256' } } };
}

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'mcphost-gateway',
      client_secret: 'mcphost-gateway-secret',
      application_type: 'native',
      grant_types: ['authorization_code', 'refresh_token', TOKEN_EXCHANGE],
      redirect_uris: ['http://127.0.0.1/oauth/callback'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      client_id: 'mcphost-login',
      client_secret: 'mcphost-login-secret',
      application_type: 'native',
      grant_types: ['authorization_code'],
      redirect_uris: ['http://127.0.0.1/oauth/login/callback'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    ...['mcp-client', 'mcp-client-2'].map((id) => ({
      client_id: id,
      client_secret: `${id}-secret`,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
  ],
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  jwks: { keys: [signingKey] },
  scopes: ['openid', 'offline_access', 'mcp:tools'],
  pkce: { required: () => true },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => rotate,
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource, client) => resourceServerInfo(resource, client),
    },
  },
  ttl: { ClientCredentials: 300, RefreshToken: 3600 },
});

// RFC 8693 token exchange: a subject token this provider issued (any audience) for an access token
// whose audience is the requested resource, with the same subject.
const publicKey = createPublicKey(privateKey);
provider.registerGrantType(TOKEN_EXCHANGE, async (ctx, next) => {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== 'urn:ietf:params:oauth:token-type:access_token' || !params.subject_token) {
    throw new errors.InvalidRequest('subject_token of type access_token required');
  }
  if (!params.resource) throw new errors.InvalidTarget('resource required');
  let payload;
  try {
    ({ payload } = await jwtVerify(params.subject_token, publicKey, { issuer }));
  } catch (error) {
    throw new errors.InvalidGrant(`subject_token invalid: ${error.message}`);
  }
  const token = new provider.AccessToken({ accountId: payload.sub, client, scope: 'mcp:tools',
                                           gty: 'token_exchange' });
  token.resourceServer = new provider.ResourceServer(params.resource, resourceServerInfo(params.resource, client));
  const value = await token.save();
  ctx.body = { access_token: value, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
               token_type: 'Bearer', expires_in: token.expiration, scope: token.scope };
  await next();
}, ['subject_token', 'subject_token_type', 'resource', 'scope', 'audience', 'requested_token_type']);

const server = provider.listen(port, '127.0.0.1', () => console.log('ready'));
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
