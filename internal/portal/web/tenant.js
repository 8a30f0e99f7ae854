// tenant.js: an organization's page (#/org/<name>) and the quota increase
// request form (#/request?...). Staff see the same pages for any org.

import { useEffect, useMemo, useState } from 'preact/hooks';
import {
  CONSUMER_GROUP, QUOTA, getJSON, mergePatch, orgNamespace,
} from './api.js';
import {
  Breakable, Collapsible, ErrorBox, Linkified, Loading, UsageBar, age, consumerText, dimsText, durationText, fmt,
  html, int, navigate, orgHref, overLimitText, requestHref, usage, usageText, useTick, useWatch,
} from './ui.js';
import { Sizing } from './sizing.js';

// The name of the request this tab just created, highlighted once in the list.
let justCreated = '';

const sameDims = (a, b) => dimsText(a) === dimsText(b);

/** "k=v,k2=v2" from the request URL -> [{key, value}] */
function parseDims(text) {
  return (text || '').split(',').map((s) => s.trim()).filter(Boolean).map((kv) => {
    const i = kv.indexOf('=');
    return i < 0 ? { key: kv, value: '' } : { key: kv.slice(0, i), value: kv.slice(i + 1) };
  });
}

/** Organization before projects, then by kind and name. */
function consumerOrder(a, b) {
  const rank = (k) => (k === 'Organization' ? 0 : 1);
  return rank(a.kind) - rank(b.kind) || a.kind.localeCompare(b.kind) || a.name.localeCompare(b.name);
}

/** The state a request is in; one without status yet is Pending. */
const stateOf = (r) => r.status?.state || 'Pending';

// A duration as the API reads spec.for (Go's time.ParseDuration): numbers,
// each with its unit: "168h", "1h30m", "90m", "45s". Anything else the API
// refuses only as an undecodable body, so the form says so itself.
const DURATION = /^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$/;

/** A request's spec.for, as the tables show it ("for 168h"); '' for a permanent one. */
const forText = (spec) => (spec?.for ? `for ${durationText(spec.for)}` : '');

/** A field's error, under the field (its id is the input's aria-describedby). */
function FieldError({ id, message }) {
  if (!message) return null;
  return html`<p id=${id} class="error field-error" role="alert">${message}</p>`;
}

// ---- the organization page ------------------------------------------------

export function OrgView({ org, me }) {
  const ns = orgNamespace(org);
  const buckets = useWatch(`${QUOTA}/namespaces/${ns}/allowancebuckets`);
  const requests = useWatch(`${QUOTA}/namespaces/${ns}/quotarequests`);

  return html`
    <main class="org">
      <div class="page-head">
        <div>
          <h1>Organization <span id="org-name">${org}</span></h1>
          <p class="muted">Signed in as <strong>${me.user}</strong>${me.staff ? ' (staff)' : ''}</p>
        </div>
        <div class="head-actions">
          ${me.staff && html`<a class="button" href="#/staff">← Overview</a>`}
          <a class="button primary" href=${requestHref({ org, kind: 'Organization', consumer: org })}>Request increase</a>
        </div>
      </div>

      <section aria-labelledby="h-buckets">
        <h2 id="h-buckets">Quota</h2>
        <${ErrorBox} error=${buckets.error} />
        ${buckets.items === null
          ? !buckets.error && html`<${Loading} what="Loading quota" />`
          : html`<${Buckets} org=${org} buckets=${buckets.items} requests=${requests.items || []} />`}
      </section>

      <section aria-labelledby="h-requests">
        <h2 id="h-requests">Increase requests</h2>
        <${Requests} ns=${ns} state=${requests} />
      </section>

      <section aria-labelledby="h-claims">
        <h2 id="h-claims">Claims</h2>
        <${Collapsible} id="claims" title="Claims by resource type">
          <${Claims} ns=${ns} />
        <//>
      </section>

      <section aria-labelledby="h-refusals">
        <h2 id="h-refusals">Recent refusals</h2>
        <${Refusals} org=${org} />
      </section>
    </main>`;
}

/** Buckets grouped by consumer, the organization's first. */
function Buckets({ org, buckets, requests }) {
  const groups = useMemo(() => {
    const byConsumer = new Map();
    for (const b of buckets) {
      const ref = b.spec?.consumerRef || {};
      const key = consumerText(ref);
      if (!byConsumer.has(key)) byConsumer.set(key, { ref, buckets: [] });
      byConsumer.get(key).buckets.push(b);
    }
    const list = [...byConsumer.values()].sort((a, b) => consumerOrder(a.ref, b.ref));
    for (const g of list) {
      g.buckets.sort((a, b) => a.spec.resourceType.localeCompare(b.spec.resourceType)
        || dimsText(a.spec.dimensions).localeCompare(dimsText(b.spec.dimensions)));
    }
    return list;
  }, [buckets]);

  if (!groups.length) return html`<p class="muted" id="no-buckets">No quota buckets yet.</p>`;

  const pendingFor = (b) => requests.filter((r) => stateOf(r) === 'Pending' && !r.spec?.withdrawn
    && consumerText(r.spec?.consumerRef) === consumerText(b.spec.consumerRef)
    && r.spec?.resourceType === b.spec.resourceType && sameDims(r.spec?.dimensions, b.spec.dimensions));

  return html`<div id="buckets">${groups.map((g) => html`
    <div class="consumer-group" data-consumer-group=${consumerText(g.ref)}>
      <h3>${g.ref.kind} <span class="consumer-name">${g.ref.name}</span></h3>
      ${g.buckets.map((b) => html`<${BucketRow} key=${b.metadata.name} org=${org} bucket=${b}
                                                pending=${pendingFor(b)} />`)}
    </div>`)}</div>`;
}

function BucketRow({ org, bucket, pending }) {
  const { spec, status = {} } = bucket;
  const ref = spec.consumerRef || {};
  const { pct, over: usedOver } = usage(status.allocated, status.limit);
  const dims = dimsText(spec.dimensions);
  const unit = status.baseUnit ? ` ${status.baseUnit}` : '';
  // What the engine says of the bucket's limit in time: over it (a grant
  // lowered or expired under usage), or a grant about to expire.
  const raised = (type) => (status.conditions || []).find((c) => c.type === type && c.status === 'True');
  const over = raised('OverLimit');
  const soon = raised('ExpiringSoon');
  return html`
    <div class="bucket" data-consumer=${consumerText(ref)} data-resource-type=${spec.resourceType}
         data-dimensions=${dims}>
      <div class="bucket-name">
        <span class="rt">${spec.resourceType}</span>
        ${dims && html` <span class="dims">${dims}</span>`}
      </div>
      <${UsageBar} allocated=${status.allocated} limit=${status.limit}
                   label=${`${spec.resourceType} usage of ${consumerText(ref)}`} />
      <div class="numbers">
        <span title=${`${fmt(status.allocated)} of ${fmt(status.limit)}${unit}`}>
          <span class="allocated">${int(status.allocated)}</span> / <span class="limit">${int(status.limit)}</span>${unit}
          ${pct !== null && html` (<span class="percent">${pct}</span>%)`}
        </span>
        ${usedOver && html`<span class="usage-over">${overLimitText(status.allocated, status.limit)}</span>`}
        <span class="avail"><span class="available">${int(status.available)}</span> available</span>
        ${(status.usageTrend || status.fullIn) && html`
          <span class="trend muted">
            ${status.usageTrend && html`<span class="usage-trend">${status.usageTrend}</span>`}
            ${status.usageTrend && status.fullIn && ' · '}
            ${status.fullIn && html`<span class="full-in">full in: ${status.fullIn}</span>`}
          </span>`}
        ${pending.length > 0 && html`<span class="badge pending">${pending.length} pending request${pending.length > 1 ? 's' : ''}</span>`}
      </div>
      <a class="button request-increase"
         href=${requestHref({ org, kind: ref.kind, consumer: ref.name, resourceType: spec.resourceType, dimensions: spec.dimensions })}>
        Request increase
      </a>
      ${over && html`<p class="bucket-warning over-limit" role="alert"><strong>Over its limit:</strong> ${over.message}</p>`}
      ${soon && html`<p class="bucket-warning expiring-soon"><strong>Expiring soon:</strong> ${soon.message}</p>`}
    </div>`;
}

/** The organization's increase requests, newest first, live. */
function Requests({ ns, state }) {
  const now = useTick();
  const [busy, setBusy] = useState({});
  const [error, setError] = useState(null);

  const withdraw = async (r) => {
    const name = r.metadata.name;
    setBusy((b) => ({ ...b, [name]: true }));
    setError(null);
    try {
      await mergePatch(`${QUOTA}/namespaces/${ns}/quotarequests/${encodeURIComponent(name)}`,
        { spec: { withdrawn: true } });
    } catch (e) {
      if (e.name !== 'AbortError') setError(e);
    } finally {
      setBusy((b) => ({ ...b, [name]: false }));
    }
  };

  if (state.items === null) {
    return html`<${ErrorBox} error=${state.error} />${!state.error && html`<${Loading} what="Loading requests" />`}`;
  }
  const rows = [...state.items].sort((a, b) =>
    (b.metadata.creationTimestamp || '').localeCompare(a.metadata.creationTimestamp || ''));
  return html`
    <${ErrorBox} error=${error || state.error} />
    <div class="table-wrap">
      <table id="requests">
        <thead><tr>
          <th>Consumer</th><th>Resource type</th><th class="num">Requested</th><th class="num">Granted</th>
          <th>State</th><th>Requested by</th><th>Decided by</th><th>Reason / message</th><th>Age</th><th></th>
        </tr></thead>
        <tbody>
          ${rows.length === 0 && html`<tr class="empty"><td colspan="10" class="muted">No requests yet.</td></tr>`}
          ${rows.map((r) => {
            const st = r.status || {};
            const d = st.decision || {};
            const s = stateOf(r);
            const granted = st.grantedLimit ?? d.grantedLimit;
            const pending = s === 'Pending' && !r.spec?.withdrawn;
            const dims = dimsText(r.spec?.dimensions);
            return html`
              <tr data-request=${r.metadata.name} class=${r.metadata.name === justCreated ? 'new' : ''}>
                <td>${consumerText(r.spec?.consumerRef)}</td>
                <td><${Breakable} text=${r.spec?.resourceType} />${dims && html`<div class="dims">${dims}</div>`}</td>
                <td class="num requested">${fmt(r.spec?.requestedLimit)}${r.spec?.for && html`<div class="muted small for" title="a temporary increase (spec.for)">${forText(r.spec)}</div>`}</td>
                <td class="num">${granted === undefined ? '—' : fmt(granted)}</td>
                <td class=${`state state-${s.toLowerCase()}`}>${s}</td>
                <td class="who">${st.requestedBy || r.metadata.annotations?.['quota.miloapis.com/requested-by'] || '—'}</td>
                <td class="who">${d.decidedBy || '—'}${d.rule && html`<div class="muted small">rule ${d.rule}</div>`}</td>
                <td class="message">
                  ${d.reason && html`<div>${d.reason}</div>`}
                  ${st.message && st.message !== d.reason && html`<div class="muted">${st.message}</div>`}
                </td>
                <td title=${r.metadata.creationTimestamp}>${age(r.metadata.creationTimestamp, now)}</td>
                <td>${pending && html`
                  <button type="button" class="withdraw" disabled=${busy[r.metadata.name]}
                          onClick=${() => withdraw(r)}>Withdraw</button>`}</td>
              </tr>`;
          })}
        </tbody>
      </table>
    </div>`;
}

/** Claims in the org namespace, one collapsible list per resource type. */
function Claims({ ns }) {
  const claims = useWatch(`${QUOTA}/namespaces/${ns}/resourceclaims`);
  if (claims.items === null) {
    return html`<${ErrorBox} error=${claims.error} />${!claims.error && html`<${Loading} what="Loading claims" />`}`;
  }
  // A claim asks for one or more resource types; it is listed under each.
  const byType = new Map();
  for (const c of claims.items) {
    for (const req of c.spec?.requests || []) {
      if (!byType.has(req.resourceType)) byType.set(req.resourceType, []);
      byType.get(req.resourceType).push({ claim: c, req });
    }
  }
  const types = [...byType.keys()].sort();
  if (!types.length) return html`<${ErrorBox} error=${claims.error} /><p class="muted">No claims.</p>`;
  const LIMIT = 200; // rows shown per type; the rest are counted
  return html`
    <${ErrorBox} error=${claims.error} />
    ${types.map((rt) => {
      const rows = byType.get(rt);
      const granted = rows.filter(({ claim }) => grantedCondition(claim)?.status === 'True').length;
      return html`
        <${Collapsible} key=${rt} title=${`${rt} — ${fmt(rows.length)} claim${rows.length === 1 ? '' : 's'}, ${fmt(granted)} granted`}>
          <div class="table-wrap">
            <table class="claims" data-resource-type=${rt}>
              <thead><tr><th>Object</th><th>Consumer</th><th class="num">Amount</th><th>Granted</th><th>Message</th></tr></thead>
              <tbody>${rows.slice(0, LIMIT).map(({ claim, req }) => {
                const ref = claim.spec?.resourceRef;
                const cond = grantedCondition(claim);
                return html`
                  <tr data-claim=${claim.metadata.name}>
                    <td>${ref ? `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}` : claim.metadata.name}</td>
                    <td>${consumerText(claim.spec?.consumerRef)}</td>
                    <td class="num">${fmt(req.amount)}</td>
                    <td class=${`granted-${(cond?.status || 'unknown').toLowerCase()}`}>
                      ${cond ? (cond.status === 'True' ? 'Yes' : cond.status === 'False' ? 'No' : cond.status) : 'Pending'}
                    </td>
                    <td class="message">${cond?.message || ''}</td>
                  </tr>`;
              })}</tbody>
            </table>
          </div>
          ${rows.length > LIMIT && html`<p class="muted">…and ${fmt(rows.length - LIMIT)} more.</p>`}
        <//>`;
    })}`;
}

const grantedCondition = (claim) => (claim.status?.conditions || []).find((c) => c.type === 'Granted');

/** The last refusals for this organization, from the portal's history. */
function Refusals({ org }) {
  const [state, setState] = useState({ items: null, error: null });
  const [reload, setReload] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    setState((s) => ({ ...s, error: null }));
    getJSON(`/portal/api/history?organization=${encodeURIComponent(org)}`, { signal: ac.signal })
      .then((d) => setState({ items: (d.refusals || []).slice(0, 20), error: null }))
      .catch((e) => { if (e.name !== 'AbortError') setState((s) => ({ ...s, error: e })); });
    return () => ac.abort();
  }, [org, reload]);

  return html`
    <div class="section-tools"><button type="button" onClick=${() => setReload((n) => n + 1)}>Refresh</button></div>
    <${ErrorBox} error=${state.error} />
    ${state.items === null ? !state.error && html`<${Loading} what="Loading refusals" />`
      : state.items.length === 0 ? html`<p class="muted">No recent refusals.</p>`
      : html`
        <div class="table-wrap">
          <table id="refusals">
            <thead><tr><th>When</th><th>Consumer</th><th>Resource type</th><th>Object</th><th>Message</th></tr></thead>
            <tbody>${state.items.map((r) => html`
              <tr>
                <td title=${r.time}>${age(r.time)} ago</td>
                <td>${r.consumer}</td><td><${Breakable} text=${r.resourceType} /></td><td>${r.object}</td>
                <td class="message"><${Linkified} text=${r.message} /></td>
              </tr>`)}</tbody>
          </table>
        </div>`}`;
}

// ---- the request form -----------------------------------------------------

// The spec fields the form has, by the path the server's field errors name,
// with what the form calls them.
const FORM_FIELDS = {
  'spec.requestedLimit': 'the requested limit',
  'spec.for': 'for how long',
  'spec.justification': 'the justification',
  'spec.contact': 'the contact',
};

// RequestForm: a refusal's link names a project but not its organization;
// the portal finds it (only for whoever may read that organization).
export function RequestForm({ route, me }) {
  const [org, setOrg] = useState(route.org || (route.kind === 'Organization' ? route.consumer : ''));
  const [error, setError] = useState(null);
  useEffect(() => {
    if (org || !route.consumer) return undefined;
    const ac = new AbortController();
    getJSON(`/portal/api/locate?project=${encodeURIComponent(route.consumer)}`, { signal: ac.signal })
      .then((r) => setOrg(r.organization))
      .catch((e) => { if (e.name !== 'AbortError') setError(e); });
    return () => ac.abort();
  }, [org, route.consumer]);
  if (!org) {
    return html`<main>${error ? html`<${ErrorBox} error=${error} />`
      : route.consumer ? html`<${Loading} />`
        : html`<p class="error">The request link names no organization or consumer.</p>`}</main>`;
  }
  return html`<${RequestFormIn} route=${route} me=${me} org=${org} />`;
}

function RequestFormIn({ route, me, org }) {
  const ns = orgNamespace(org);
  const buckets = useWatch(`${QUOTA}/namespaces/${ns}/allowancebuckets`);
  const [regs, setRegs] = useState(null); // registrations; [] when not readable
  const [consumer, setConsumer] = useState(
    route.kind && route.consumer ? `${route.kind}/${route.consumer}` : `Organization/${org}`);
  const [resourceType, setResourceType] = useState(route.resourceType || '');
  const dims = useMemo(() => parseDims(route.dimensions), [route.dimensions]);
  const [limit, setLimit] = useState('');
  const [duration, setDuration] = useState(''); // spec.for; blank: a permanent limit
  const [justification, setJustification] = useState('');
  const [contact, setContact] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  // The server's field errors (and the form's own for spec.for), by field
  // path, each shown under its field.
  const [fieldErrors, setFieldErrors] = useState({});
  const editing = (path, set) => (e) => {
    set(e.currentTarget.value);
    if (fieldErrors[path]) setFieldErrors((f) => ({ ...f, [path]: undefined }));
  };

  useEffect(() => {
    const ac = new AbortController();
    getJSON(`${QUOTA}/resourceregistrations`, { signal: ac.signal })
      .then((l) => setRegs(l.items || []))
      .catch(() => setRegs([])); // not readable: fall back to the buckets' types
    return () => ac.abort();
  }, []);

  const items = buckets.items || [];
  const [kind, name] = [consumer.slice(0, consumer.indexOf('/')), consumer.slice(consumer.indexOf('/') + 1)];

  // Consumers: the organization, its projects that have buckets, and the
  // one the URL names.
  const consumers = useMemo(() => {
    const m = new Map([[`Organization/${org}`, { kind: 'Organization', name: org }]]);
    for (const b of items) m.set(consumerText(b.spec.consumerRef), b.spec.consumerRef);
    if (!m.has(consumer)) m.set(consumer, { kind, name });
    return [...m.values()].sort(consumerOrder);
  }, [items, org, consumer]);

  // Resource types: registered ones for this kind of consumer, else those of
  // its buckets; always the one already chosen.
  const types = useMemo(() => {
    const set = new Set();
    for (const r of regs || []) {
      if (!r.spec?.consumerType?.kind || r.spec.consumerType.kind === kind) set.add(r.spec.resourceType);
    }
    if (!set.size) for (const b of items) if (b.spec.consumerRef?.kind === kind) set.add(b.spec.resourceType);
    if (resourceType) set.add(resourceType);
    return [...set].sort();
  }, [regs, items, kind, resourceType]);

  // Switching consumer keeps the resource type only if it applies to the
  // new consumer's kind.
  const changeConsumer = (next) => {
    const nextKind = next.slice(0, next.indexOf('/'));
    const applies = (regs || []).some((r) => r.spec?.resourceType === resourceType
        && (!r.spec.consumerType?.kind || r.spec.consumerType.kind === nextKind))
      || items.some((b) => consumerText(b.spec.consumerRef) === next && b.spec.resourceType === resourceType);
    if (!applies) setResourceType('');
    setConsumer(next);
  };

  const bucket = items.find((b) => consumerText(b.spec.consumerRef) === consumer
    && b.spec.resourceType === resourceType && sameDims(b.spec.dimensions, dims));
  const reg = (regs || []).find((r) => r.spec?.resourceType === resourceType);
  const st = bucket?.status || {};

  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setFieldErrors({});
    const n = Number(limit);
    const forValue = duration.trim();
    if (!resourceType) return setError('Choose a resource type.');
    if (!Number.isInteger(n) || n < 1) return setError('The requested limit must be a whole number above 0.');
    if (forValue && !DURATION.test(forValue)) {
      return setFieldErrors({
        'spec.for': `"${forValue}" is not a duration: write a number with its unit, h, m or s `
          + '(168h is 7 days, 720h 30 days, 1h30m an hour and a half), or leave it blank to ask for a permanent limit.',
      });
    }
    if (!justification.trim()) return setError('A justification is required.');
    const ref = bucket?.spec.consumerRef || consumers.find((c) => consumerText(c) === consumer) || {};
    const spec = {
      consumerRef: { apiGroup: ref.apiGroup || CONSUMER_GROUP, kind, name },
      resourceType,
      requestedLimit: n,
      justification: justification.trim(),
    };
    if (dims.length) spec.dimensions = dims;
    if (contact.trim()) spec.contact = contact.trim();
    if (forValue) spec.for = forValue;
    setBusy(true);
    try {
      const created = await getJSON(`${QUOTA}/namespaces/${ns}/quotarequests`, {
        method: 'POST',
        body: {
          apiVersion: 'quota.miloapis.com/v1alpha1', kind: 'QuotaRequest',
          metadata: { generateName: 'increase-' }, spec,
        },
      });
      justCreated = created?.metadata?.name || '';
      navigate(orgHref(org));
    } catch (err) {
      setBusy(false);
      if (err.name === 'AbortError') return;
      // Each field error the server gave for a field of this form goes under
      // that field, saying what was asked; any other error stays whole below.
      const asked = { 'spec.requestedLimit': String(n), 'spec.for': forValue, 'spec.contact': spec.contact };
      const mine = {};
      for (const c of err.causes || []) {
        if (!Object.hasOwn(FORM_FIELDS, c.field)) continue;
        const value = asked[c.field];
        mine[c.field] = [mine[c.field], value ? `The server refused "${value}": ${c.message}` : `The server refused it: ${c.message}`]
          .filter(Boolean).join('\n');
      }
      const others = (err.causes || []).some((c) => !Object.hasOwn(FORM_FIELDS, c.field));
      setFieldErrors(mine);
      setError(Object.keys(mine).length && !others
        ? `Not sent: the server refused ${Object.keys(mine).map((f) => FORM_FIELDS[f]).join(' and ')} (marked above); correct it and send again.`
        : err);
    }
  };

  return html`
    <main class="request">
      <div class="page-head">
        <div>
          <h1>Request a quota increase</h1>
          <p class="muted">Organization <strong>${org}</strong> · signed in as <strong>${me.user}</strong></p>
        </div>
        <div class="head-actions"><a class="button" href=${orgHref(org)}>← Back to ${org}</a></div>
      </div>
      <div class="request-layout">
        <form id="request-form" class="card" onSubmit=${submit} novalidate>
          <label for="req-consumer">Consumer</label>
          <select id="req-consumer" value=${consumer} onChange=${(e) => changeConsumer(e.currentTarget.value)}>
            ${consumers.map((c) => html`<option value=${consumerText(c)}>${c.kind} ${c.name}</option>`)}
          </select>

          <label for="req-resource-type">Resource type</label>
          <select id="req-resource-type" value=${resourceType} onChange=${(e) => setResourceType(e.currentTarget.value)}>
            ${!resourceType && html`<option value="">Choose…</option>`}
            ${types.map((t) => html`<option value=${t}>${t}</option>`)}
          </select>
          ${dims.length > 0 && html`<p class="muted small">Dimensions: <span class="dims">${dimsText(dims)}</span></p>`}

          <${Sizing} org=${org} kind=${kind} name=${name} resourceType=${resourceType} dims=${dims}
                     baseUnit=${st.baseUnit || reg?.spec?.baseUnit || ''} onUse=${(n) => setLimit(String(n))} />

          <label for="req-limit">Requested limit${st.baseUnit || reg?.spec?.baseUnit ? ` (${st.baseUnit || reg.spec.baseUnit})` : ''}</label>
          <input id="req-limit" type="number" min="1" step="1" inputmode="numeric" required
                 placeholder=${bucket ? `more than ${fmt(st.limit)}` : ''} value=${limit}
                 onInput=${editing('spec.requestedLimit', setLimit)} />
          <p class="muted small">The new total limit you need, not the amount to add.</p>
          <${FieldError} id="req-limit-error" message=${fieldErrors['spec.requestedLimit']} />

          <label for="req-for">For how long <span class="muted">(optional: a temporary increase)</span></label>
          <input id="req-for" type="text" inputmode="text" autocomplete="off" spellcheck=${false} value=${duration}
                 placeholder="blank: permanent; or 168h, 720h, 90m" aria-describedby="req-for-help req-for-error"
                 aria-invalid=${fieldErrors['spec.for'] ? 'true' : 'false'} onInput=${editing('spec.for', setDuration)} />
          <p id="req-for-help" class="muted small">
            Blank asks for a permanent limit. A duration (hours, minutes or seconds: 168h is 7 days, at least 10s)
            asks for a temporary increase: once approved, its grant expires that long after the approval (spec.for).
          </p>
          <${FieldError} id="req-for-error" message=${fieldErrors['spec.for']} />

          <label for="req-justification">Justification</label>
          <textarea id="req-justification" rows="4" required value=${justification}
                    placeholder="What the extra quota is for and why now"
                    onInput=${editing('spec.justification', setJustification)}></textarea>
          <${FieldError} id="req-justification-error" message=${fieldErrors['spec.justification']} />

          <label for="req-contact">Contact <span class="muted">(optional)</span></label>
          <input id="req-contact" type="text" autocomplete="email" value=${contact}
                 placeholder="email or chat handle" onInput=${editing('spec.contact', setContact)} />
          <${FieldError} id="req-contact-error" message=${fieldErrors['spec.contact']} />

          <${ErrorBox} error=${error} />
          <div class="actions">
            <button id="req-submit" type="submit" class="primary" disabled=${busy}>
              ${busy ? 'Sending…' : 'Send request'}
            </button>
            <a href=${orgHref(org)}>Cancel</a>
          </div>
        </form>

        <aside class="card current" aria-label="Current usage">
          <h2>Now</h2>
          <${ErrorBox} error=${buckets.error} />
          ${buckets.items === null && !buckets.error ? html`<${Loading} />`
            : !resourceType ? html`<p class="muted">Choose a resource type.</p>`
            : bucket ? html`
              <p><strong>${consumer}</strong><br /><span class="rt">${resourceType}</span></p>
              <${UsageBar} allocated=${st.allocated} limit=${st.limit} label="current usage" />
              <dl class="facts">
                <dt>Limit</dt><dd id="current-limit">${fmt(st.limit)} ${st.baseUnit || ''}</dd>
                <dt>Allocated</dt><dd id="current-allocated">${fmt(st.allocated)}${usageText(st.allocated, st.limit) && ` (${usageText(st.allocated, st.limit)})`}</dd>
                <dt>Available</dt><dd>${fmt(st.available)}</dd>
                ${st.usageTrend && html`<dt>Trend</dt><dd>${st.usageTrend}</dd>`}
                ${st.fullIn && html`<dt>Full in</dt><dd>${st.fullIn}</dd>`}
              </dl>`
            : html`<p class="muted">${consumer} has no bucket for ${resourceType} yet: its limit is 0.</p>`}
          ${reg?.spec?.description && html`<p class="muted small">${reg.spec.description}</p>`}
        </aside>
      </div>
    </main>`;
}
