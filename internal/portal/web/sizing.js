// sizing.js: "How much do you need?" on the request form. The portal asks
// the server a QuotaReview of a claim for that much more (nothing is taken)
// and shows, for each level of the organization, the limit it would need.

import { useEffect, useState } from 'preact/hooks';
import { getJSON } from './api.js';
import { ErrorBox, fmt, html, requestHref } from './ui.js';

export function Sizing({ org, kind, name, resourceType, dims, baseUnit, onUse }) {
  const [need, setNeed] = useState('');
  const [answer, setAnswer] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  // A new consumer or resource type: the old answer no longer applies.
  useEffect(() => { setAnswer(null); setError(null); }, [kind, name, resourceType]);

  const check = async () => {
    setError(null);
    setAnswer(null);
    const n = Number(need);
    if (!resourceType) return setError('Choose a resource type first.');
    if (!Number.isInteger(n) || n < 1) return setError('How much more: a whole number above 0.');
    const q = new URLSearchParams({ organization: org, kind, consumer: name, resourceType, amount: String(n) });
    if (dims.length) q.set('dimensions', dims.map((d) => `${d.key}=${d.value}`).join(','));
    setBusy(true);
    try {
      setAnswer(await getJSON(`/portal/api/size?${q}`));
    } catch (e) {
      if (e.name !== 'AbortError') setError(e);
    } finally {
      setBusy(false);
    }
  };

  const own = answer?.levels?.find((l) => l.kind === kind && l.name === name);
  const above = (answer?.levels || []).filter((l) => l !== own && l.short > 0);
  const unit = baseUnit ? ` ${baseUnit}` : '';
  return html`
    <div id="req-sizing" class="sizing">
      <label for="req-need">How much more do you need?${unit ? ` (${baseUnit})` : ''}</label>
      <div class="sizing-row">
        <input id="req-need" type="number" min="1" step="1" inputmode="numeric" value=${need}
               onInput=${(e) => setNeed(e.currentTarget.value)} />
        <button id="req-size" type="button" onClick=${check} disabled=${busy}>${busy ? 'Checking…' : 'Check'}</button>
      </div>
      <p class="muted small">Checked by the quota engine as a dry run (a QuotaReview): nothing is taken.</p>
      <${ErrorBox} error=${error} />
      ${answer?.message && html`<p id="req-size-message" class="error">${answer.message}</p>`}
      ${answer && !answer.message && html`
        <table id="req-size-levels" class="sizing-levels">
          <thead><tr><th>Level</th><th class="num">Limit</th><th class="num">Allocated</th><th class="num">Needs</th></tr></thead>
          <tbody>${answer.levels.map((l) => html`
            <tr data-level=${`${l.kind}/${l.name}`} class=${l.short > 0 ? 'short' : ''}>
              <td>${l.kind} ${l.name}</td>
              <td class="num limit">${l.unlimited ? 'no limit' : fmt(l.limit)}</td>
              <td class="num allocated">${fmt(l.allocated)}</td>
              <td class="num needed">${fmt(l.needed)}</td>
            </tr>`)}</tbody>
        </table>
        <p id="req-size-verdict">${answer.fits
          ? `${fmt(Number(need))}${unit} more fits now: no increase is needed for it.`
          : own && own.short > 0
            ? html`Ask for a limit of at least <strong>${fmt(own.needed)}</strong>${unit} (${fmt(own.short)} more than now).
                <button id="req-use" type="button" onClick=${() => onUse(own.needed)}>Use ${fmt(own.needed)}</button>`
            : `${kind} ${name}'s own limit is enough; the levels below are short.`}</p>
        ${above.map((l) => html`
          <p class="above-short" data-level=${`${l.kind}/${l.name}`}>${l.kind} ${l.name}'s limit is short too: it needs ${fmt(l.needed)}${unit}.
            <a href=${requestHref({ org, kind: l.kind, consumer: l.name, resourceType, dimensions: dims })}>Request it for ${l.kind} ${l.name}</a></p>`)}
        ${answer.otherLevelShort && html`<p class="muted small">A limit the platform sets above your organization is short too; staff see it when they decide.</p>`}`}
    </div>`;
}
