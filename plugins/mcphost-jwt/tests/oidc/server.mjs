// An authorization server for the mcphost-jwt end-to-end tests: oidc-provider on 127.0.0.1 only.
//
//   node server.mjs PORT
//
// Issuer http://127.0.0.1:PORT. Clients (client_secret_basic, client-credentials grant):
//   mcp-client / mcp-client-secret   asks for tokens
//   mcphost-rs / mcphost-rs-secret   the resource server, for introspection (and revocation)
// Resource indicators (RFC 8707) are required; the access token's aud is the requested resource.
// Tokens for a resource whose path ends in /opaque-mcp are opaque (introspect them), others are
// JWTs signed ES256 with a key made at startup. Prints "ready" once listening.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Provider, { errors } from 'oidc-provider';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node server.mjs PORT');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'e2e-es256', use: 'sig', alg: 'ES256' };

const client = (id) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: 'client_secret_basic',
});

const provider = new Provider(issuer, {
  clients: [client('mcp-client'), client('mcphost-rs')],
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  jwks: { keys: [signingKey] },
  scopes: ['mcp:tools'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        let url;
        try {
          url = new URL(resource);
        } catch {
          throw new errors.InvalidTarget();
        }
        return {
          scope: 'mcp:tools',
          audience: resource,
          accessTokenTTL: 300,
          accessTokenFormat: url.pathname.endsWith('/opaque-mcp') ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
  ttl: { ClientCredentials: 300 },
});

const server = provider.listen(port, '127.0.0.1', () => console.log('ready'));
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
