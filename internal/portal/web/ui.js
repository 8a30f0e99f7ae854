// ui.js: small pieces shared by the views: the html tag, formatting,
// the usage bar, error and loading boxes, hash links and the watch hook.

import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { watchList } from './api.js';

export const html = htm.bind(h);

// ---- formatting -----------------------------------------------------------

const numberFormat = new Intl.NumberFormat('en-US');

/** 1234567 -> "1,234,567" (for text; the test hooks hold plain integers). */
export const fmt = (n) => (n === undefined || n === null || n === '' ? '—' : numberFormat.format(n));

/** A plain integer (missing -> 0), for the data hooks. */
export const int = (n) => (Number.isFinite(Number(n)) ? Math.trunc(Number(n)) : 0);

/**
 * How full a bucket is, as the engine says it (the bucket's
 * status.usedPercent, quota.BucketStatus.UsedPercent): pct is allocated as a
 * whole percent of limit, rounded down, above 100 when over the limit, and
 * null when the limit is 0 (no amount is a percent of 0); over is whether
 * allocated exceeds the limit: 2 used of a limit of 0 is over it, not "100 %".
 */
export function usage(allocated, limit) {
  const a = int(allocated), l = int(limit);
  return { pct: l > 0 ? Math.floor((a * 100) / l) : null, over: a > l };
}

/** "over limit: 2 used of 0", what a bucket over its limit shows. */
export const overLimitText = (allocated, limit) => `over limit: ${fmt(int(allocated))} used of ${fmt(int(limit))}`;

/** "40%", "200%, over limit: 4 used of 2", "over limit: 2 used of 0", or "" for 0 of 0. */
export function usageText(allocated, limit) {
  const { pct, over } = usage(allocated, limit);
  const parts = [];
  if (pct !== null) parts.push(`${pct}%`);
  if (over) parts.push(overLimitText(allocated, limit));
  return parts.join(', ');
}

/**
 * A duration as the API writes it back (Go's "168h0m0s", "1h30m0s", "1m0s")
 * without its zero tail, as a person writes it: "168h", "1h30m", "1m".
 */
export const durationText = (d) => String(d ?? '').replace(/m0s$/, 'm').replace(/h0m$/, 'h');

/** "key=value, key2=value2" */
export const dimsText = (dims) => (dims || []).map((d) => `${d.key}=${d.value}`).join(', ');

/** "Kind/name" of a consumerRef */
export const consumerText = (ref) => (ref ? `${ref.kind}/${ref.name}` : '');

/** Time since an RFC 3339 timestamp, short: "45s", "12m", "5h", "3d". */
export function age(ts, now = Date.now()) {
  const t = Date.parse(ts);
  if (!ts || Number.isNaN(t)) return '—';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** Re-render every `ms` so ages stay fresh. */
export function useTick(ms = 30000) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}

// ---- navigation -------------------------------------------------------------

/** Go to a hash route; replace=true keeps it out of the history. */
export function navigate(hash, { replace = false } = {}) {
  if (replace) {
    history.replaceState(null, '', hash);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    location.hash = hash;
  }
}

export const orgHref = (org) => `#/org/${encodeURIComponent(org)}`;

/** The request form's URL, the same one quota refusal messages link to. */
export function requestHref({ org, kind, consumer, resourceType, dimensions }) {
  const q = new URLSearchParams({ org });
  if (kind) q.set('kind', kind);
  if (consumer) q.set('consumer', consumer);
  if (resourceType) q.set('resourceType', resourceType);
  if (dimensions?.length) q.set('dimensions', dimsText(dimensions).replace(/, /g, ','));
  return `#/request?${q}`;
}

// ---- components -------------------------------------------------------------

/** A visible error; renders nothing without a message. */
export function ErrorBox({ error }) {
  if (!error) return null;
  const message = typeof error === 'string' ? error : error.message;
  return html`<p class="error" role="alert">${message}</p>`;
}

export function Loading({ what = 'Loading' }) {
  return html`<p class="loading" role="status"><span class="spinner" aria-hidden="true"></span>${what}…</p>`;
}

/** The usage bar: allocated of limit, coloured by how full it is; full and red over the limit. */
export function UsageBar({ allocated, limit, label }) {
  const { pct, over } = usage(allocated, limit);
  const level = over || pct >= 95 ? 'crit' : pct >= 80 ? 'warn' : 'ok';
  const width = over ? 100 : Math.min(pct ?? 0, 100);
  const text = usageText(allocated, limit);
  return html`
    <div class="bar" role="progressbar" aria-label=${label || 'usage'}
         aria-valuemin="0" aria-valuenow=${int(allocated)} aria-valuemax=${int(limit)}
         aria-valuetext=${`${fmt(allocated)} of ${fmt(limit)}${text ? ` (${text})` : ''}`}>
      <div class=${`fill ${level}`} style=${`width:${width}%`}></div>
    </div>`;
}

/**
 * A collapsible section whose body is only mounted while open, so watches
 * inside it run only while someone is looking.
 */
export function Collapsible({ title, id, open: initiallyOpen = false, children }) {
  const [open, setOpen] = useState(initiallyOpen);
  return html`
    <details id=${id} class="collapsible" open=${open}
             onToggle=${(e) => setOpen(e.currentTarget.open)}>
      <summary>${title}</summary>
      ${open ? html`<div class="collapsible-body">${children}</div>` : null}
    </details>`;
}

/** Text that may wrap after each "/" (long resource type names). */
export function Breakable({ text }) {
  const parts = String(text || '').split('/');
  return parts.map((p, i) => (i < parts.length - 1 ? [p, '/', html`<wbr />`] : p));
}

/** Text with its http(s) URLs turned into links (refusal messages carry them). */
export function Linkified({ text }) {
  const parts = String(text || '').split(/(https?:\/\/[^\s"'<>]+)/g);
  return parts.map((p, i) => (i % 2 === 1
    ? html`<a href=${p} rel="noopener noreferrer">${p}</a>`
    : p));
}

// ---- data -------------------------------------------------------------------

/**
 * List and watch a Kubernetes collection for as long as the component is
 * mounted. Returns {items, error}: items is null until the first list.
 */
export function useWatch(path) {
  const [state, setState] = useState({ items: null, error: null });
  useEffect(() => {
    setState({ items: null, error: null });
    if (!path) return undefined;
    const ac = new AbortController();
    watchList(path, {
      signal: ac.signal,
      onItems: (items) => setState((s) => ({ ...s, items })),
      onError: (error) => setState((s) => ({ ...s, error: error ? error.message : null })),
    });
    return () => ac.abort();
  }, [path]);
  return state;
}
