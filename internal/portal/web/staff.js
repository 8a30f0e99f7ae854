// staff.js: the staff page (#/staff): every organization ranked by how close
// it is to full, the pending increase requests to decide, and the
// registrations and grants for reference.

import { useEffect, useRef, useState } from 'preact/hooks';
import { QUOTA, REQUEST_LABEL, followEvents, getJSON, mergePatch } from './api.js';
import {
  Breakable, Collapsible, ErrorBox, Loading, UsageBar, age, consumerText, dimsText, durationText, fmt, html, int,
  navigate, orgHref, overLimitText, useTick, useWatch,
} from './ui.js';

export function StaffView({ me }) {
  return html`
    <main class="staff">
      <div class="page-head">
        <div>
          <h1>Quota overview</h1>
          <p class="muted">Signed in as <strong>${me.user}</strong> (staff)</p>
        </div>
      </div>
      <section aria-labelledby="h-overview">
        <h2 id="h-overview" class="visually-hidden">Organizations</h2>
        <${Overview} />
      </section>
      <section aria-labelledby="h-pending">
        <h2 id="h-pending">Pending increase requests</h2>
        <${Pending} />
      </section>
      <section aria-labelledby="h-reference">
        <h2 id="h-reference">Reference</h2>
        <${Collapsible} id="registrations" title="Resource registrations"><${Registrations} /><//>
        <${Collapsible} id="grants" title="Resource grants"><${Grants} /><//>
      </section>
    </main>`;
}

/** Call fn at most once per `ms` of quiet; returns the debounced function. */
function useDebounced(fn, ms) {
  const timer = useRef(0);
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => () => clearTimeout(timer.current), []);
  return (...args) => {
    clearTimeout(timer.current);
    timer.current = setTimeout(() => latest.current(...args), ms);
  };
}

// ---- overview -----------------------------------------------------------------

function Overview() {
  const [type, setType] = useState('');
  const [orgText, setOrgText] = useState(''); // what is typed
  const [orgFilter, setOrgFilter] = useState(''); // what is queried, debounced
  const [refresh, setRefresh] = useState(0); // bumped by the event stream
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const [eventsError, setEventsError] = useState(null);
  const [busy, setBusy] = useState(false);

  const applyOrgFilter = useDebounced((v) => setOrgFilter(v), 300);
  const changed = useDebounced(() => setRefresh((n) => n + 1), 300);

  // (Re)query whenever a filter changes or the server says something changed.
  // A newer query aborts an older one still in flight.
  useEffect(() => {
    const ac = new AbortController();
    const q = new URLSearchParams();
    if (type) q.set('resourceType', type);
    if (orgFilter) q.set('organization', orgFilter);
    setBusy(true);
    getJSON(`/portal/api/overview?${q}`, { signal: ac.signal })
      .then((d) => { setData(d); setError(null); setBusy(false); })
      .catch((e) => { if (e.name !== 'AbortError') { setError(e); setBusy(false); } });
    return () => ac.abort();
  }, [type, orgFilter, refresh]);

  // The portal's change feed: "data: changed" -> re-fetch (debounced). After
  // a reconnection, re-fetch too, since changes may have been missed.
  useEffect(() => {
    const ac = new AbortController();
    let connections = 0;
    followEvents('/portal/api/events', {
      signal: ac.signal,
      onData: (d) => { if (d === 'changed') changed(); },
      onConnect: () => { if (connections++ > 0) changed(); },
      onError: (e) => setEventsError(e ? `Live updates interrupted: ${e.message}` : null),
    });
    return () => ac.abort();
  }, []);

  const types = [...new Set([...(data?.resourceTypes || []), ...(type ? [type] : [])])].sort();
  const orgs = data?.organizations || [];
  const others = data?.others || [];

  return html`
    <form class="filters" onSubmit=${(e) => e.preventDefault()} role="search">
      <label>
        <span>Resource type</span>
        <select id="filter-type" value=${type} onChange=${(e) => setType(e.currentTarget.value)}>
          <option value="">All resource types</option>
          ${types.map((t) => html`<option value=${t}>${t}</option>`)}
        </select>
      </label>
      <label>
        <span>Organization</span>
        <input id="filter-org" type="search" placeholder="name contains…" value=${orgText}
               onInput=${(e) => { setOrgText(e.currentTarget.value); applyOrgFilter(e.currentTarget.value.trim()); }} />
      </label>
      <span class="muted small" aria-live="polite">
        ${data && `${fmt(orgs.length)} of ${fmt(data.total)} organizations`}${busy && data ? ' · refreshing…' : ''}
      </span>
    </form>
    <${ErrorBox} error=${error} />
    <${ErrorBox} error=${eventsError} />
    ${data === null ? !error && html`<${Loading} what="Loading organizations" />` : html`
      <div class="table-wrap">
        <table id="orgs" class="clickable">
          <thead><tr>
            <th>Organization</th><th class="usage-col">Usage (closest to full)</th><th class="num">%</th>
            <th>Full in</th><th>Closest to full</th><th class="num">Pending</th><th class="num">Buckets</th><th>Type</th>
          </tr></thead>
          <tbody>
            ${orgs.length === 0 && html`<tr class="empty"><td colspan="8" class="muted">No organizations match.</td></tr>`}
            ${orgs.map((o) => html`<${OrgRow} key=${o.name} o=${o} />`)}
          </tbody>
        </table>
      </div>
      ${others.length > 0 && html`
        <h3>Other consumers</h3>
        <p class="muted small">Namespaces and other consumers outside any organization; their limits come from the platform's grants.</p>
        <div class="table-wrap">
          <table id="others">
            <thead><tr>
              <th>Consumer</th><th class="usage-col">Usage (closest to full)</th><th class="num">%</th>
              <th>Full in</th><th>Resource type</th><th class="num">Buckets</th>
            </tr></thead>
            <tbody>
              ${others.map((o) => {
                const w = o.worst;
                return html`
                  <tr key=${`${o.kind}/${o.name}`} data-consumer=${`${o.kind}/${o.name}`}>
                    <td>${o.kind} ${o.name}</td>
                    <td class="usage-col">${w && html`
                      <${UsageBar} allocated=${w.allocated} limit=${w.limit} label=${`${o.kind} ${o.name} closest to full`} />
                      <div class="muted small">${fmt(w.allocated)} / ${fmt(w.limit)}</div>`}</td>
                    <td class="num percent">${w && html`<${WorstPercent} w=${w} />`}</td>
                    <td>${o.fullIn || '—'}</td>
                    <td>${w ? html`<${Breakable} text=${w.resourceType} />` : '—'}</td>
                    <td class="num">${fmt(o.buckets)}</td>
                  </tr>`;
              })}
            </tbody>
          </table>
        </div>`}`}`;
}

/**
 * The % column: the worst bucket's used percent from the overview (none
 * when its limit is 0), and "over limit" when it uses more than its limit.
 */
function WorstPercent({ w }) {
  const pct = w.percent ?? null;
  if (!w.overLimit) return pct === null ? '—' : String(int(pct));
  return html`${pct !== null && String(int(pct))}<div class="usage-over small" title=${overLimitText(w.allocated, w.limit)}>over limit</div>`;
}

function OrgRow({ o }) {
  const w = o.worst;
  return html`
    <tr data-org=${o.name} onClick=${(e) => { if (!e.target.closest('a')) navigate(orgHref(o.name)); }}>
      <td><a href=${orgHref(o.name)}>${o.name}</a></td>
      <td class="usage-col">${w ? html`
        <${UsageBar} allocated=${w.allocated} limit=${w.limit} label=${`${o.name} closest to full`} />
        <div class="muted small">${fmt(w.allocated)} / ${fmt(w.limit)}</div>` : html`<span class="muted">no buckets</span>`}</td>
      <td class="num percent">${w && html`<${WorstPercent} w=${w} />`}</td>
      <td>${o.fullIn || '—'}</td>
      <td>${w ? html`${w.consumerKind}/${w.consumerName}<div class="muted small"><${Breakable} text=${w.resourceType} /></div>` : '—'}</td>
      <td class="num">${o.pendingRequests ? html`<span class="badge pending">${fmt(o.pendingRequests)}</span>` : '0'}</td>
      <td class="num">${fmt(o.buckets)}</td>
      <td>${o.type || '—'}</td>
    </tr>`;
}

// ---- pending requests -------------------------------------------------------------

const isPending = (r) => !r.status?.state || r.status.state === 'Pending';
const orgOf = (ns) => (ns || '').replace(/^organization-/, '');

function Pending() {
  const now = useTick();
  const { items, error } = useWatch(`${QUOTA}/quotarequests`);
  if (items === null) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} what="Loading requests" />`}`;
  // Oldest first: first come, first decided.
  const rows = items.filter(isPending).sort((a, b) =>
    (a.metadata.creationTimestamp || '').localeCompare(b.metadata.creationTimestamp || ''));
  return html`
    <${ErrorBox} error=${error} />
    <div class="table-wrap">
      <table id="pending">
        <thead><tr>
          <th>Org / consumer / resource type</th><th class="num">At request<br />limit / allocated</th>
          <th class="num">Requested</th><th>Justification / contact</th><th>Decision</th>
        </tr></thead>
        <tbody>
          ${rows.length === 0 && html`<tr class="empty"><td colspan="5" class="muted">Nothing waiting.</td></tr>`}
          ${rows.map((r) => html`<${PendingRow} key=${`${r.metadata.namespace}/${r.metadata.name}`} r=${r} now=${now} />`)}
        </tbody>
      </table>
    </div>`;
}

function PendingRow({ r, now }) {
  const [grant, setGrant] = useState('');
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const reasonInput = useRef(null);
  const { namespace: ns, name } = r.metadata;
  const spec = r.spec || {};
  const at = r.status?.atRequest;
  const decided = r.status?.decision?.verdict; // recorded, not yet applied
  const dims = dimsText(spec.dimensions);

  const decide = async (decision) => {
    setBusy(true);
    setError(null);
    try {
      await mergePatch(
        `${QUOTA}/namespaces/${encodeURIComponent(ns)}/quotarequests/${encodeURIComponent(name)}/status`,
        // The resourceVersion the staff member saw: if the tenant changed
        // the request since, the API server refuses with a conflict rather
        // than approve what nobody read.
        { metadata: { resourceVersion: r.metadata.resourceVersion }, status: { decision } });
      // The watch removes the row once the request is no longer Pending.
    } catch (e) {
      if (e.name !== 'AbortError') setError(e);
    } finally {
      setBusy(false);
    }
  };

  const approve = () => {
    const text = grant.trim();
    // In full: the amount shown, explicitly.
    if (text === '') return decide({ verdict: 'Approve', grantedLimit: spec.requestedLimit });
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) return setError('The granted limit must be a whole number above 0.');
    return decide({ verdict: 'Approve', grantedLimit: n });
  };

  const deny = () => {
    if (!reason.trim()) {
      setError('Give a reason to deny.');
      reasonInput.current?.focus();
      return undefined;
    }
    return decide({ verdict: 'Deny', reason: reason.trim() });
  };

  const idBase = `${ns}-${name}`;
  return html`
    <tr data-request=${`${ns}/${name}`}>
      <td class="what" data-label="Request">
        <a class="org" href=${orgHref(orgOf(ns))}>${orgOf(ns)}</a>
        <div class="consumer">${consumerText(spec.consumerRef)}</div>
        <div class="rt"><${Breakable} text=${spec.resourceType} /></div>
        ${dims && html`<div class="dims">${dims}</div>`}
      </td>
      <td class="num at-request" data-label="At request (limit / allocated)">${at ? `${fmt(at.limit)} / ${fmt(at.allocated)}` : '—'}</td>
      <td class="num requested" data-label="Requested">${fmt(spec.requestedLimit)}${spec.for && html`<div class="muted small for" title="a temporary increase (spec.for)">for ${durationText(spec.for)}</div>`}</td>
      <td class="justification" data-label="Justification">
        <div>${spec.justification}</div>
        <div class="muted small">
          <span class="contact">${spec.contact ? `contact: ${spec.contact}` : 'no contact given'}</span>
          ${' · by '}${r.status?.requestedBy || '—'}
          ${' · '}<span title=${r.metadata.creationTimestamp}>${age(r.metadata.creationTimestamp, now)} ago</span>
        </div>
      </td>
      <td class="decide" data-label="Decision">
        ${spec.withdrawn && html`<p class="muted small">Withdrawn by the requester.</p>`}
        ${decided && html`<p class="muted small">${decided} recorded, being applied…</p>`}
        <div class="decide-row">
          <label class="visually-hidden" for=${`grant-${idBase}`}>Limit to grant</label>
          <input id=${`grant-${idBase}`} class="grant-limit" type="number" min="1" step="1" inputmode="numeric"
                 placeholder=${String(int(spec.requestedLimit))} value=${grant}
                 onInput=${(e) => setGrant(e.currentTarget.value)} />
          <button type="button" class="approve primary" disabled=${busy || !!decided} onClick=${approve}>Approve</button>
        </div>
        <div class="decide-row">
          <label class="visually-hidden" for=${`reason-${idBase}`}>Reason to deny</label>
          <input id=${`reason-${idBase}`} class="deny-reason" type="text" placeholder="reason (required to deny)"
                 ref=${reasonInput} value=${reason} onInput=${(e) => setReason(e.currentTarget.value)} />
          <button type="button" class="deny danger" disabled=${busy || !!decided} onClick=${deny}>Deny</button>
        </div>
        <${ErrorBox} error=${error} />
      </td>
    </tr>`;
}

// ---- reference lists ------------------------------------------------------------

function Registrations() {
  const { items, error } = useWatch(`${QUOTA}/resourceregistrations`);
  if (items === null) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const rows = [...items].sort((a, b) => (a.spec?.resourceType || '').localeCompare(b.spec?.resourceType || ''));
  return html`
    <${ErrorBox} error=${error} />
    <div class="table-wrap">
      <table id="registrations-table">
        <thead><tr><th>Resource type</th><th>Consumer</th><th>Base unit</th><th>Display unit</th><th>Description</th></tr></thead>
        <tbody>${rows.map((r) => html`
          <tr data-registration=${r.metadata.name}>
            <td>${r.spec?.resourceType}</td>
            <td>${r.spec?.consumerType?.kind}${r.spec?.consumerType?.apiGroup && html`<div class="muted small">${r.spec.consumerType.apiGroup}</div>`}</td>
            <td>${r.spec?.baseUnit}</td><td>${r.spec?.displayUnit || '—'}</td>
            <td>${r.spec?.description || ''}</td>
          </tr>`)}</tbody>
      </table>
    </div>`;
}

function Grants() {
  const { items, error } = useWatch(`${QUOTA}/resourcegrants`);
  const [filter, setFilter] = useState('');
  if (items === null) return html`<${ErrorBox} error=${error} />${!error && html`<${Loading} />`}`;
  const f = filter.trim().toLowerCase();
  const LIMIT = 500;
  const rows = [...items]
    .filter((g) => !f || JSON.stringify([g.metadata.namespace, g.metadata.name, g.spec]).toLowerCase().includes(f))
    .sort((a, b) => `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`));
  return html`
    <${ErrorBox} error=${error} />
    <div class="filters">
      <label><span>Filter</span>
        <input id="filter-grants" type="search" placeholder="namespace, consumer, resource type…"
               value=${filter} onInput=${(e) => setFilter(e.currentTarget.value)} /></label>
      <span class="muted small">${fmt(rows.length)} grant${rows.length === 1 ? '' : 's'}</span>
    </div>
    <div class="table-wrap">
      <table id="grants-table">
        <thead><tr><th>Namespace / name</th><th>Consumer</th><th>Allowances</th><th>From request</th></tr></thead>
        <tbody>${rows.slice(0, LIMIT).map((g) => html`
          <tr data-grant=${`${g.metadata.namespace}/${g.metadata.name}`}>
            <td>${g.metadata.namespace}/${g.metadata.name}</td>
            <td>${consumerText(g.spec?.consumerRef) || (g.spec?.consumerSelector ? 'by selector' : '—')}</td>
            <td><ul class="plain">${(g.spec?.allowances || []).map((a) => html`
              <li>${a.resourceType}: ${(a.buckets || []).map((b) =>
                `${fmt(b.amount)}${b.dimensions?.length ? ` [${dimsText(b.dimensions)}]` : ''}`).join(', ')}</li>`)}</ul></td>
            <td>${g.metadata.labels?.[REQUEST_LABEL] || '—'}</td>
          </tr>`)}</tbody>
      </table>
    </div>
    ${rows.length > LIMIT && html`<p class="muted">…and ${fmt(rows.length - LIMIT)} more; narrow the filter.</p>`}`;
}
