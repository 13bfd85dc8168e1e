// The console's entry: layout, navigation, sign-in status and routing.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { html } from './html.js';
import { authConfig, getToken, handleCallback, setToken, signIn, SignInView } from './auth.js';
import { linkClick, match, navigate, usePath } from './router.js';
import { SessionsPage } from './pages/sessions.js';
import { SessionPage } from './pages/session.js';
import { RunPage } from './pages/run.js';
import { BundlesPage } from './pages/bundles.js';

// tokenName is the token's name, preferred_username or sub claim (the
// token is not verified here: the server does that).
function tokenName(t) {
  try {
    const part = t.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const claims = JSON.parse(atob(part + '==='.slice((part.length + 3) % 4)));
    return claims.name || claims.preferred_username || claims.sub || 'signed in';
  } catch {
    return 'signed in';
  }
}

function Account({ path }) {
  const token = getToken();
  if (token) {
    const out = () => { setToken(''); navigate('/ui/sign-in'); };
    return html`<div class="account"><span data-testid="signed-in-as">${tokenName(token)}</span>
      <button class="link" data-testid="sign-out" onClick=${out}>Sign out</button></div>`;
  }
  if (authConfig().oidc) {
    return html`<div class="account"><button data-testid="sign-in" onClick=${() => signIn(path)}>Sign in</button></div>`;
  }
  return null;
}

function Callback() {
  const [error, setError] = useState('');
  useEffect(() => {
    handleCallback().then((to) => navigate(to || '/ui/', { replace: true }), (e) => setError(String(e.message || e)));
  }, []);
  return error ? html`<p class="problem" role="alert" data-testid="problem">${error}</p>` : html`<p>Signing in…</p>`;
}

function Page({ route }) {
  switch (route.name) {
    case 'sessions': return html`<${SessionsPage} />`;
    case 'session': return html`<${SessionPage} key=${route.params.id} id=${route.params.id} />`;
    case 'run': return html`<${RunPage} key=${route.params.id} id=${route.params.id} />`;
    case 'bundles': return html`<${BundlesPage} />`;
    case 'callback': return html`<${Callback} />`;
    case 'sign-in': return html`<${SignInView} />`;
    default: return html`<section><h1>Not found</h1><p>No console page here. <a href="/ui/" onClick=${linkClick}>Sessions</a></p></section>`;
  }
}

function App() {
  const path = usePath();
  const route = match(path);
  const current = (name) => (route.name === name || (name === 'sessions' && (route.name === 'session' || route.name === 'run')) ? 'page' : undefined);
  return html`<div class="layout">
    <header class="top">
      <a class="brand" href="/ui/" onClick=${linkClick}>hxd</a>
      <nav aria-label="Main">
        <a href="/ui/" onClick=${linkClick} aria-current=${current('sessions')}>Sessions</a>
        <a href="/ui/bundles" onClick=${linkClick} aria-current=${current('bundles')}>Bundles</a>
      </nav>
      <${Account} path=${path} />
    </header>
    <main id="main"><${Page} route=${route} /></main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
