// auth.js: who the console calls the API as.
//
// Without auth (hxd-console-config {"oidc":null}) there is no token and
// no sign-in. With --auth=oidc the console signs in with the provider's
// Authorization Code flow with PKCE (S256) as the public client of
// --oidc-console-client-id, or takes a pasted bearer token. The access
// token lives in this module only (never localStorage or a cookie): a
// reload loses it and asks to sign in again. sessionStorage holds the PKCE
// verifier and state during the redirect round-trip only, and is cleared
// by the callback.
import { useState } from 'preact/hooks';

import { html } from './html.js';
import { navigate } from './router.js';

const PKCE_KEY = 'hxd.console.pkce';
const CALLBACK_PATH = '/ui/callback';
const SIGN_IN_PATH = '/ui/sign-in';

let config;
let token = null;
let expiryTimer = null;
let notice = '';
let returnPath = '/ui/'; // where the sign-in view was sent from
const listeners = new Set();

/** authConfig is the parsed hxd-console-config: {oidc: {issuer, client_id, audience, scope} | null}. */
export function authConfig() {
  if (config === undefined) {
    config = { oidc: null };
    const el = typeof document !== 'undefined' && document.getElementById('hxd-console-config');
    if (el) {
      try {
        const c = JSON.parse(el.textContent);
        if (c && typeof c === 'object' && c.oidc && typeof c.oidc.issuer === 'string') config = { oidc: c.oidc };
      } catch {
        // A broken config is no auth configured: every API call will say 401.
      }
    }
  }
  return config;
}

/** authRequired is true when the API wants a bearer token (--auth=oidc). */
export function authRequired() {
  return authConfig().oidc !== null;
}

/** getToken is the access token, or null (none yet, expired or signed out). */
export function getToken() {
  if (token !== null && expired(token)) {
    clearToken('Your session expired: sign in again.');
  }
  return token;
}

/** setToken keeps t (an access token; null to forget it) in memory. */
export function setToken(t) {
  clearTimeout(expiryTimer);
  expiryTimer = null;
  token = typeof t === 'string' && t.trim() !== '' ? t.trim() : null;
  if (token !== null) {
    notice = '';
    const exp = claims(token)?.exp;
    if (typeof exp === 'number') {
      const ms = exp * 1000 - Date.now();
      // setTimeout's delay is a 32-bit int: a far expiry is checked by getToken.
      if (ms < 2 ** 31 - 1) expiryTimer = setTimeout(() => clearToken('Your session expired: sign in again.'), Math.max(ms, 0));
    }
  }
  notify();
}

/** subscribe calls fn whenever the token changes; returns the unsubscribe. */
export function subscribe(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** signInNotice is why the sign-in view shows (an expiry, a refusal), or ''. */
export function signInNotice() {
  return notice;
}

/**
 * onUnauthorized is called on any 401 of the API: the token is forgotten
 * and the console shows the sign-in view (/ui/sign-in); signing in comes
 * back to the page the 401 came from.
 */
export function onUnauthorized() {
  clearToken(token !== null ? 'The API refused the token: sign in again.' : '');
}

// clearToken forgets the token and shows the sign-in view, saying why.
function clearToken(why) {
  clearTimeout(expiryTimer);
  expiryTimer = null;
  token = null;
  notice = why;
  notify();
  if (typeof location !== 'undefined' && location.pathname !== SIGN_IN_PATH && location.pathname !== CALLBACK_PATH) {
    returnPath = safeReturn(location.pathname + location.search);
    navigate(SIGN_IN_PATH);
  }
}

function notify() {
  for (const fn of [...listeners]) fn(token);
}

/**
 * claims decodes a JWT's payload without verifying it: the API verifies
 * every token, the console only shows who it names. null when t is not a
 * JWT.
 */
export function claims(t) {
  if (typeof t !== 'string') return null;
  const parts = t.split('.');
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    const c = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (ch) => ch.charCodeAt(0))));
    return c && typeof c === 'object' ? c : null;
  } catch {
    return null;
  }
}

function expired(t) {
  const exp = claims(t)?.exp;
  return typeof exp === 'number' && exp * 1000 <= Date.now();
}

/** signedInAs names the token's holder for display: name, email or sub. */
export function signedInAs() {
  const c = claims(getToken());
  if (!c) return getToken() ? 'a bearer token' : '';
  for (const k of ['name', 'email', 'preferred_username', 'sub']) {
    if (typeof c[k] === 'string' && c[k] !== '') return c[k];
  }
  return 'a bearer token';
}

function base64url(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomString() {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function discover(issuer) {
  const url = issuer.replace(/\/+$/, '') + '/.well-known/openid-configuration';
  const resp = await fetch(url, { headers: { Accept: 'application/json' } });
  if (!resp.ok) throw new Error(`the provider's discovery answered ${resp.status}`);
  const doc = await resp.json();
  if (typeof doc.authorization_endpoint !== 'string' || typeof doc.token_endpoint !== 'string') {
    throw new Error("the provider's discovery document lacks its endpoints");
  }
  return doc;
}

function redirectURI() {
  return window.location.origin + CALLBACK_PATH;
}

/**
 * signIn redirects to the provider's authorization endpoint (Authorization
 * Code flow with PKCE S256); the provider comes back to /ui/callback, and
 * handleCallback then returns returnTo (a /ui path).
 */
export async function signIn(returnTo) {
  const oidc = authConfig().oidc;
  if (!oidc || !oidc.client_id) throw new Error('no console client is configured (--oidc-console-client-id)');
  const doc = await discover(oidc.issuer);
  const verifier = randomString();
  const state = randomString();
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({
    state, verifier, token_endpoint: doc.token_endpoint, return_to: safeReturn(returnTo),
  }));
  const u = new URL(doc.authorization_endpoint);
  u.searchParams.set('response_type', 'code');
  u.searchParams.set('client_id', oidc.client_id);
  u.searchParams.set('redirect_uri', redirectURI());
  u.searchParams.set('scope', oidc.scope || 'openid');
  u.searchParams.set('state', state);
  u.searchParams.set('code_challenge', base64url(digest));
  u.searchParams.set('code_challenge_method', 'S256');
  if (oidc.audience) u.searchParams.set('audience', oidc.audience);
  window.location.assign(u.toString());
}

// safeReturn keeps returnTo a path of the console (never another origin);
// the sign-in view and the callback return where sign-in was asked for.
function safeReturn(p) {
  if (typeof p !== 'string' || !/^\/ui(\/|\?|$)/.test(p)) return '/ui/';
  if (p.startsWith(CALLBACK_PATH) || p.startsWith(SIGN_IN_PATH)) return returnPath;
  return p;
}

/**
 * handleCallback, on /ui/callback, exchanges the authorization code at the
 * provider's token endpoint (public client: no secret), keeps the access
 * token in memory and returns the path to go back to. The PKCE state is
 * deleted first, whatever happens. Throws with the provider's error.
 */
export async function handleCallback() {
  const params = new URLSearchParams(window.location.search);
  const saved = sessionStorage.getItem(PKCE_KEY);
  sessionStorage.removeItem(PKCE_KEY);
  let pkce = null;
  try {
    pkce = saved ? JSON.parse(saved) : null;
  } catch {
    pkce = null;
  }
  if (params.get('error')) {
    throw new Error(`sign-in refused: ${params.get('error_description') || params.get('error')}`);
  }
  if (!pkce || !params.get('code') || params.get('state') !== pkce.state) {
    throw new Error('sign-in could not be completed (no pending sign-in in this tab, or its state does not match): sign in again');
  }
  const oidc = authConfig().oidc;
  const resp = await fetch(pkce.token_endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: params.get('code'),
      redirect_uri: redirectURI(),
      client_id: oidc?.client_id ?? '',
      code_verifier: pkce.verifier,
    }),
  });
  let body = {};
  try {
    body = await resp.json();
  } catch {
    body = {};
  }
  if (!resp.ok || typeof body.access_token !== 'string') {
    throw new Error(`the provider refused the code: ${body.error_description || body.error || resp.status}`);
  }
  setToken(body.access_token);
  return safeReturn(pkce.return_to);
}

/** signOut forgets the token (the provider's session is left alone) and shows the sign-in view. */
export function signOut() {
  clearToken('');
}

/**
 * SignInView: "Sign in" with the provider (when a console client is
 * configured) and a form to paste a bearer token.
 */
export function SignInView() {
  const oidc = authConfig().oidc;
  const [pasted, setPasted] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const start = async () => {
    setBusy(true);
    setError('');
    try {
      await signIn(returnPath);
    } catch (e) {
      setError(String(e.message || e));
      setBusy(false);
    }
  };
  const submit = (ev) => {
    ev.preventDefault();
    const t = pasted.trim().replace(/^Bearer\s+/i, '');
    if (t === '') {
      setError('Paste an access token first.');
      return;
    }
    if (expired(t)) {
      setPasted('');
      setError('This token has expired.');
      return;
    }
    setPasted('');
    setToken(t);
    navigate(returnPath, { replace: true });
  };
  return html`
    <section class="card sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in</h1>
      ${notice && html`<p class="notice" role="status">${notice}</p>`}
      ${oidc?.client_id
        ? html`<p>Sign in with your identity provider (${oidc.issuer}); hxd never sees your password.</p>
            <button type="button" data-testid="sign-in" onClick=${start} disabled=${busy}>Sign in with ${providerName(oidc.issuer)}</button>`
        : html`<p>No console sign-in is configured for this server: paste an access token for audience
            ${oidc?.audience ?? 'of this server'}.</p>`}
      <form class="token-form" onSubmit=${submit}>
        <label for="token-input">Or paste a bearer token</label>
        <textarea id="token-input" data-testid="token-input" rows="3" autocomplete="off" spellcheck="false"
          value=${pasted} onInput=${(e) => setPasted(e.currentTarget.value)}></textarea>
        <button type="submit" data-testid="token-submit">Use this token</button>
      </form>
      <p class="hint">The token is kept in this tab's memory only: reloading the page asks to sign in again.</p>
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </section>`;
}

function providerName(issuer) {
  try {
    return new URL(issuer).host;
  } catch {
    return 'the provider';
  }
}
