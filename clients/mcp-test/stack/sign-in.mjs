// The sign-in an MCP host performs against the deployed shape, with the
// official TypeScript SDK's OAuth client (its auth() flow, as its
// Streamable HTTP transport runs it on a 401). The Go stack test
// (infra/stack) starts the stack and runs this with:
//   MCP_URL       the gateway's /v1/mcp
//   ISSUER        the stack's issuer
//   CLIENT_ID     the audience the authorizer takes, as a client id
//   TOKEN         a token the issuer minted for a tenant
//   NO_TENANT     a token the issuer minted without the tenant claim
// It checks that from a 401 the client finds the endpoint's Protected
// Resource Metadata (at its well-known path behind the authorizer's bare
// 401, by its resource_metadata behind durachat's), then the issuer's
// metadata, and sends the user to the issuer's authorization endpoint with
// PKCE and the endpoint as the resource; and that the issuer's token makes
// the same call succeed. It exits 1 with the reason on a failure.

import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const mcpURL = env("MCP_URL");
const issuer = env("ISSUER");
const clientId = env("CLIENT_ID");

// host is an OAuth client provider as a host keeps one: a client id
// registered with the issuer beforehand (as Cognito needs), the token, if
// any, and what the flow left: the discovery and the URL the user would
// be sent to.
function host(token) {
  return {
    redirectUrl: "http://127.0.0.1:8765/callback",
    clientMetadata: { client_name: "stack sign-in", redirect_uris: ["http://127.0.0.1:8765/callback"], token_endpoint_auth_method: "none" },
    clientInformation: () => ({ client_id: clientId }),
    tokens: () => (token ? { access_token: token, token_type: "Bearer" } : undefined),
    saveTokens() {},
    saveCodeVerifier(v) { this.verifier = v; },
    codeVerifier() { return this.verifier; },
    saveDiscoveryState(s) { this.discovery = s; },
    redirectToAuthorization(url) { this.sentTo = url; },
  };
}

async function connect(provider) {
  const client = new Client({ name: "stack-sign-in", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider }));
  return client;
}

// signsInAtTheIssuer connects with provider, which the endpoint refuses,
// and checks where the flow sent the user.
async function signsInAtTheIssuer(provider, what) {
  await assert.rejects(connect(provider), UnauthorizedError, `${what}: connected`);
  const d = provider.discovery;
  assert.ok(d, `${what}: no discovery`);
  assert.equal(d.resourceMetadata?.resource, mcpURL, `${what}: the resource metadata's resource`);
  assert.deepEqual(d.resourceMetadata?.authorization_servers, [issuer], `${what}: the authorization servers`);
  assert.equal(d.authorizationServerUrl, issuer, `${what}: the authorization server`);
  const md = d.authorizationServerMetadata;
  assert.ok(md, `${what}: no authorization server metadata from ${issuer}`);
  const to = provider.sentTo;
  assert.ok(to, `${what}: the user was not sent to sign in`);
  assert.equal(to.origin + to.pathname, md.authorization_endpoint, `${what}: sent to ${to}`);
  assert.ok(to.href.startsWith(issuer), `${what}: sent to ${to}, not the issuer ${issuer}`);
  const q = to.searchParams;
  assert.equal(q.get("response_type"), "code");
  assert.equal(q.get("client_id"), clientId);
  assert.equal(q.get("code_challenge_method"), "S256");
  assert.ok(q.get("code_challenge"), `${what}: no PKCE challenge`);
  assert.equal(q.get("resource"), mcpURL, `${what}: the resource indicator`);
  return d;
}

// Without a token API Gateway's authorizer answers its own bare 401: the
// client finds the metadata at the endpoint's well-known path.
const anon = await fetch(mcpURL, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
assert.equal(anon.status, 401, "no token");
await signsInAtTheIssuer(host(), "without a token");

// A valid JWT without the tenant claim passes the authorizer and durachat
// refuses it: its 401 names the metadata, and the client reads it there.
const wellKnown = new URL(mcpURL).origin + "/.well-known/oauth-protected-resource/v1/mcp";
const d = await signsInAtTheIssuer(host(env("NO_TENANT")), "a token without the tenant claim");
assert.equal(d.resourceMetadataUrl, wellKnown, "the metadata's URL from durachat's 401 (resource_metadata)");

// The issuer's token for a tenant: the same call succeeds.
const client = await connect(host(env("TOKEN")));
const { tools } = await client.listTools();
assert.ok(tools.some((t) => t.name === "zoom"), `tools: ${tools.map((t) => t.name)}`);
await client.close();
console.log("signed in: discovery through the gateway to the issuer, then the issuer's token");
