// api.js: talking to the Kubernetes API and to the portal's own endpoints.
//
// Everything here is framework-free: the token in sessionStorage, fetch with
// the bearer token, turning failed responses into readable errors, and the
// two streaming readers (Kubernetes watches and the portal's event stream).

const TOKEN_KEY = 'quotaplane.token';

export const QUOTA = '/apis/quota.miloapis.com/v1alpha1';
export const CONSUMER_GROUP = 'resourcemanager.miloapis.com';
export const REQUEST_LABEL = 'quota.miloapis.com/quota-request';

/** The namespace an organization's buckets, claims and requests live in. */
export const orgNamespace = (org) => `organization-${org}`;

export function getToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token then lives only in this page */ }
  current = token || '';
}

let current = getToken();

// Called with the server's message whenever any call answers 401; the app
// uses it to drop the token and show the sign-in form again.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

/**
 * An error from the API, carrying the HTTP status, the server's message and,
 * for an invalid object, its field errors: causes is [{field, message}]
 * ("spec.for", "Invalid value: ...") from the Status's details.
 */
export class ApiError extends Error {
  constructor(status, message, causes = []) {
    super(message);
    this.status = status;
    this.causes = causes;
  }
}

// Kubernetes answers errors with a Status object and the portal with
// {"message": ...}; both have a message, which is shown as is.
async function errorFrom(res) {
  let text = '';
  try { text = await res.text(); } catch { /* body unreadable */ }
  let message = '';
  let causes = [];
  try {
    const body = JSON.parse(text);
    message = body.message || '';
    causes = (body.details?.causes || []).filter((c) => c.field && c.message);
  } catch { message = text.trim(); }
  if (!message) message = `${res.status} ${res.statusText || 'error'}`;
  return new ApiError(res.status, message, causes);
}

/**
 * fetch with the bearer token. Resolves to the Response when it is 2xx,
 * otherwise rejects with an ApiError. `body` objects are sent as JSON with
 * `contentType` (default application/json).
 */
export async function request(path, { method = 'GET', body, contentType, accept, signal } = {}) {
  const headers = { Accept: accept || 'application/json' };
  if (current) headers.Authorization = `Bearer ${current}`;
  if (body !== undefined) headers['Content-Type'] = contentType || 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method, headers, signal, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, `Could not reach the server: ${e.message}`);
  }
  if (!res.ok) {
    const err = await errorFrom(res);
    if (res.status === 401) onUnauthorized(err.message);
    throw err;
  }
  return res;
}

/** request() and parse the JSON answer. */
export async function getJSON(path, opts) {
  const res = await request(path, opts);
  return res.json();
}

/** A JSON merge patch (RFC 7386), as the API server accepts for any kind. */
export function mergePatch(path, patch, opts = {}) {
  return getJSON(path, {
    ...opts, method: 'PATCH', body: patch, contentType: 'application/merge-patch+json',
  });
}

/** Resolve after ms, or reject at once when signal aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new DOMException('aborted', 'AbortError'));
    }, { once: true });
  });
}

/**
 * Read a streamed response body line by line. onLines gets each batch of
 * complete, non-empty lines as they arrive; if it throws, reading stops and
 * the error propagates.
 */
export async function readLines(res, onLines) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      const lines = buf.split('\n');
      buf = lines.pop(); // the incomplete tail waits for the next chunk
      const full = lines.map((l) => l.replace(/\r$/, '')).filter((l) => l.trim() !== '');
      if (full.length) onLines(full);
    }
    buf += decoder.decode();
    if (buf.trim()) onLines([buf]);
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** The key a watched object is stored under. */
export const objectKey = (o) => `${o.metadata?.namespace || ''}/${o.metadata?.name}`;

// A watch ERROR event: a Status object; 410 Gone means the resourceVersion
// expired and a fresh list is needed, which is not worth showing.
class WatchError extends Error {
  constructor(status) {
    super(status?.message || 'watch failed');
    this.status = status?.code || 0;
  }
}

/**
 * List path, then watch it from the list's resourceVersion, keeping a map of
 * the objects up to date. onItems(array) is called after the list and after
 * every batch of events; onError(error|null) reports trouble (null = fine
 * again). When the stream ends or fails, it lists and watches again after a
 * short, growing delay. Stops when signal aborts or on a 401.
 */
export function watchList(path, { signal, onItems, onError = () => {} }) {
  const sep = path.includes('?') ? '&' : '?';
  (async () => {
    let delay = 1000;
    while (!signal.aborted) {
      try {
        const list = await getJSON(path, { signal });
        const items = new Map((list.items || []).map((o) => [objectKey(o), o]));
        onItems([...items.values()]);
        onError(null);
        const rv = encodeURIComponent(list.metadata?.resourceVersion || '');
        const res = await request(
          `${path}${sep}watch=1&resourceVersion=${rv}&allowWatchBookmarks=true`, { signal });
        delay = 1000;
        await readLines(res, (lines) => {
          let changed = false;
          for (const line of lines) {
            let ev;
            try { ev = JSON.parse(line); } catch { continue; }
            if (ev.type === 'ERROR') throw new WatchError(ev.object);
            if (!ev.object?.metadata) continue;
            if (ev.type === 'ADDED' || ev.type === 'MODIFIED') {
              items.set(objectKey(ev.object), ev.object);
              changed = true;
            } else if (ev.type === 'DELETED') {
              items.delete(objectKey(ev.object));
              changed = true;
            } // BOOKMARK only moves the resourceVersion, which we do not resume from
          }
          if (changed) onItems([...items.values()]);
        });
      } catch (e) {
        if (signal.aborted || e.name === 'AbortError' || e.status === 401) return;
        if (e instanceof WatchError && e.status === 410) {
          delay = 500;
        } else {
          onError(e);
          delay = Math.min(delay * 2, 30000);
        }
      }
      try { await sleep(delay, signal); } catch { return; }
    }
  })();
}

/**
 * Follow the portal's text/event-stream at path (fetch, because EventSource
 * cannot send the Authorization header). onData(value) is called for every
 * "data:" line. Reconnects when the stream ends or fails; onConnect() is
 * called on every (re)connection so callers can catch up on missed events.
 */
export function followEvents(path, { signal, onData, onConnect = () => {}, onError = () => {} }) {
  (async () => {
    let delay = 1000;
    while (!signal.aborted) {
      try {
        const res = await request(path, { signal, accept: 'text/event-stream' });
        onConnect();
        onError(null);
        delay = 1000;
        await readLines(res, (lines) => {
          for (const line of lines) {
            if (line.startsWith('data:')) onData(line.slice(5).trim());
          }
        });
      } catch (e) {
        if (signal.aborted || e.name === 'AbortError' || e.status === 401) return;
        onError(e);
        delay = Math.min(delay * 2, 30000);
      }
      try { await sleep(delay, signal); } catch { return; }
    }
  })();
}
