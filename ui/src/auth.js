// Sign-in (a stub until the OIDC console sign-in lands): the token lives
// in this module's memory only.
import { html } from './html.js';
import { useState } from 'preact/hooks';

let token = '';
let config;

export function authConfig() {
  if (config === undefined) {
    const el = document.getElementById('hxd-console-config');
    try { config = JSON.parse(el ? el.textContent : '{}'); } catch { config = {}; }
    if (!config || typeof config !== 'object') config = {};
    if (!('oidc' in config)) config.oidc = null;
  }
  return config;
}

export function getToken() { return token; }

export function setToken(t) { token = t || ''; }

export function onUnauthorized() {
  token = '';
  if (location.pathname !== '/ui/sign-in') {
    history.pushState(null, '', '/ui/sign-in');
    dispatchEvent(new PopStateEvent('popstate'));
  }
}

export async function signIn(returnTo) {
  history.pushState(null, '', returnTo || '/ui/');
  dispatchEvent(new PopStateEvent('popstate'));
}

export async function handleCallback() { return '/ui/'; }

export function SignInView() {
  const [value, setValue] = useState('');
  const submit = (e) => {
    e.preventDefault();
    setToken(value.trim());
    signIn('/ui/');
  };
  return html`<section class="card">
    <h1>Sign in</h1>
    <form onSubmit=${submit}>
      <label for="token">Bearer token</label>
      <input id="token" data-testid="token-input" type="password" autocomplete="off"
        value=${value} onInput=${(e) => setValue(e.target.value)} />
      <button data-testid="token-submit" type="submit">Use token</button>
    </form>
  </section>`;
}
