// Client-side routing under /ui with the History API.
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/ui';

// navigate shows path (a /ui/... path) without reloading the page.
export function navigate(path, { replace = false } = {}) {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  dispatchEvent(new PopStateEvent('popstate'));
}

// usePath is the current location's path (and search), updated on
// navigation.
export function usePath() {
  const [path, setPath] = useState(location.pathname + location.search);
  useEffect(() => {
    const on = () => setPath(location.pathname + location.search);
    addEventListener('popstate', on);
    return () => removeEventListener('popstate', on);
  }, []);
  return path;
}

// match maps a path to a route: {name, params}.
export function match(path) {
  const p = path.split('?')[0].replace(/\/+$/, '');
  let m;
  if (p === BASE || p === '') return { name: 'sessions', params: {} };
  if ((m = p.match(/^\/ui\/sessions\/([^/]+)$/))) return { name: 'session', params: { id: decodeURIComponent(m[1]) } };
  if ((m = p.match(/^\/ui\/runs\/([^/]+)$/))) return { name: 'run', params: { id: decodeURIComponent(m[1]) } };
  if (p === '/ui/bundles') return { name: 'bundles', params: {} };
  if (p === '/ui/callback') return { name: 'callback', params: {} };
  if (p === '/ui/sign-in') return { name: 'sign-in', params: {} };
  return { name: 'not-found', params: {} };
}

// Link is an <a> that navigates inside the console.
export function linkClick(e) {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.currentTarget;
  const href = a.getAttribute('href');
  if (!href || !href.startsWith(BASE + '/') && href !== BASE) return;
  e.preventDefault();
  navigate(href);
}
