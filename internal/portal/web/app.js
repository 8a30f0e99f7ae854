// app.js: the portal's entry point: sign-in, the signed-in user, the header
// and the hash router that picks the staff or tenant view.
//
// Routes:
//   #/staff                 staff overview (staff only)
//   #/org/<name>            an organization's buckets, requests, claims
//   #/request?org=&kind=&consumer=&resourceType=[&dimensions=k=v,...]
//                           the quota increase request form

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { getJSON, getToken, setToken, setUnauthorizedHandler } from './api.js';
import { ErrorBox, Loading, html, navigate, orgHref } from './ui.js';
import { OrgView, RequestForm } from './tenant.js';
import { StaffView } from './staff.js';

/** Parse location.hash into {name, ...params}. */
function parseRoute(hash) {
  const raw = (hash || '').replace(/^#/, '');
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = Object.fromEntries(new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)));
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'staff' && parts.length === 1) return { name: 'staff' };
  if (parts[0] === 'org' && parts[1]) return { name: 'org', org: parts[1] };
  if (parts[0] === 'request' && params.org) return { name: 'request', ...params };
  return { name: 'home' };
}

function useRoute() {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

function SignIn({ message, busy, onSubmit }) {
  const [token, setTokenText] = useState('');
  const submit = (e) => {
    e.preventDefault();
    // Accept a pasted "Bearer xyz" as well as the bare token.
    const t = token.trim().replace(/^Bearer\s+/i, '');
    if (t) onSubmit(t);
  };
  return html`
    <main class="signin">
      <h1>quotaplane</h1>
      <p class="muted">Sign in with your Kubernetes bearer token to see your quota.</p>
      <form onSubmit=${submit} class="card">
        <label for="token">Bearer token</label>
        <textarea id="token" name="token" rows="4" required autocomplete="off"
                  spellcheck=${false} autocapitalize="off" placeholder="eyJhbGciOi…" value=${token}
                  onInput=${(e) => setTokenText(e.currentTarget.value)}></textarea>
        <${ErrorBox} error=${message} />
        <div class="actions">
          <button id="signin" type="submit" class="primary" disabled=${busy}>
            ${busy ? 'Signing in…' : 'Sign in'}
          </button>
        </div>
      </form>
    </main>`;
}

function Header({ me, route, onSignOut }) {
  const orgs = me.organizations || [];
  const currentOrg = route.name === 'org' ? route.org : route.name === 'request' ? route.org : '';
  return html`
    <header class="topbar">
      <a class="brand" href=${me.staff ? '#/staff' : orgs[0] ? orgHref(orgs[0]) : '#/'}>quotaplane</a>
      <nav class="topnav">
        ${me.staff && html`<a href="#/staff" class=${route.name === 'staff' ? 'active' : ''}>Overview</a>`}
        ${(orgs.length > 1 || (me.staff && orgs.length > 0)) && html`
          <label class="picker">
            <span class="visually-hidden">Organization</span>
            <select id="org-picker" aria-label="Organization" value=${orgs.includes(currentOrg) ? currentOrg : ''}
                    onChange=${(e) => e.currentTarget.value && navigate(orgHref(e.currentTarget.value))}>
              ${!orgs.includes(currentOrg) && html`<option value="">Organization…</option>`}
              ${orgs.map((o) => html`<option value=${o}>${o}</option>`)}
            </select>
          </label>`}
      </nav>
      <div class="who">
        <span class="user" id="user" title=${(me.groups || []).join(', ')}>${me.user}</span>
        ${me.staff && html`<span class="badge">staff</span>`}
        <button id="signout" type="button" onClick=${onSignOut}>Sign out</button>
      </div>
    </header>`;
}

/** Where a user lands when the hash names no page. */
function homeFor(me) {
  if (me.staff) return '#/staff';
  const first = (me.organizations || [])[0];
  return first ? orgHref(first) : '';
}

function App() {
  const route = useRoute();
  // auth: {state: 'signed-out'|'checking'|'in', me, message}
  const [auth, setAuth] = useState(() => ({ state: getToken() ? 'checking' : 'signed-out' }));

  const signOut = (message = '') => {
    setToken('');
    setAuth({ state: 'signed-out', message });
  };

  // Any 401 from any call lands here: back to the sign-in form, keeping the
  // hash so that signing in again returns to the same page.
  useEffect(() => { setUnauthorizedHandler((msg) => signOut(msg || 'Your token was not accepted.')); }, []);

  const check = async (token) => {
    setToken(token);
    setAuth({ state: 'checking' });
    try {
      const me = await getJSON('/portal/api/whoami');
      setAuth({ state: 'in', me });
    } catch (e) {
      if (e.name === 'AbortError') return;
      setToken('');
      setAuth({ state: 'signed-out', message: e.message });
    }
  };

  // A token kept from earlier in this tab: check it is still good.
  useEffect(() => { if (getToken()) check(getToken()); }, []);

  // Once signed in, a bare URL goes to the user's home page.
  const me = auth.me;
  useEffect(() => {
    if (auth.state !== 'in') return;
    const home = homeFor(me);
    if (route.name === 'home' && home) navigate(home, { replace: true });
    else if (route.name === 'staff' && !me.staff && home) navigate(home, { replace: true });
  }, [auth.state, route.name]);

  if (auth.state !== 'in') {
    return html`<${SignIn} message=${auth.message} busy=${auth.state === 'checking'} onSubmit=${check} />`;
  }

  let page;
  if (route.name === 'staff' && me.staff) page = html`<${StaffView} me=${me} />`;
  else if (route.name === 'org') page = html`<${OrgView} key=${route.org} org=${route.org} me=${me} />`;
  else if (route.name === 'request') page = html`<${RequestForm} key=${location.hash} route=${route} me=${me} />`;
  else if (!homeFor(me)) {
    page = html`<main><p class="error">You (${me.user}) are not a member of any organization.</p></main>`;
  } else page = html`<main><${Loading} /></main>`;

  return html`
    <${Header} me=${me} route=${route} onSignOut=${() => signOut()} />
    ${page}`;
}

// Replace the static "Loading…" placeholder of index.html with the app.
const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
