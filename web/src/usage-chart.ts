/**
 * A key's last 30 days as two small bar charts (spend; input and output tokens), drawn as SVG with
 * attributes only (no inline style: the console's CSP allows none), with the same numbers as text:
 * a summary line anyone sees and a table for screen readers (the charts themselves are one image
 * each, named by that summary).
 */
import { html, svg, type TemplateResult } from 'lit-html';
import type { KeyDay } from './api.ts';
import { money } from './format.ts';

const W = 300;
const H = 48;

/** Bars of `values` in a W×H box; a second series is stacked on the first. */
function bars(values: readonly number[], stacked: readonly number[] | null, cls: string, cls2: string): TemplateResult {
  const n = values.length;
  const max = Math.max(1, ...values.map((v, i) => v + (stacked ? stacked[i]! : 0)));
  const slot = W / Math.max(1, n);
  const bw = Math.max(1, slot - 2);
  return svg`${values.map((v, i) => {
    const h1 = (v / max) * (H - 2);
    const h2 = stacked ? (stacked[i]! / max) * (H - 2) : 0;
    const x = (i * slot + 1).toFixed(1);
    return svg`<rect class=${cls} x=${x} y=${(H - h1).toFixed(1)} width=${bw.toFixed(1)} height=${h1.toFixed(1)}></rect>${
      stacked ? svg`<rect class=${cls2} x=${x} y=${(H - h1 - h2).toFixed(1)} width=${bw.toFixed(1)} height=${h2.toFixed(1)}></rect>` : ''
    }`;
  })}<line class="axis" x1="0" y1=${H - 0.5} x2=${W} y2=${H - 0.5}></line>`;
}

const n = (x: number) => x.toLocaleString();

/** The summary line: the 30 days' totals in words. */
export function usageSummary(days: readonly KeyDay[], currency: string): string {
  const t = days.reduce((a, d) => ({ amount: a.amount + d.amount_micros, req: a.req + d.requests, input: a.input + d.input_tokens, output: a.output + d.output_tokens }), { amount: 0, req: 0, input: 0, output: 0 });
  return `Last ${days.length} days: ${money(t.amount)} ${currency} spent, ${n(t.req)} ${t.req === 1 ? 'request' : 'requests'}, ${n(t.input)} input and ${n(t.output)} output tokens.`;
}

/** The chart panel of one key (`id`: a prefix for element ids). */
export function usageChart(id: string, keyName: string, days: readonly KeyDay[], currency: string): TemplateResult {
  const summary = usageSummary(days, currency);
  const first = days[0]?.day ?? '';
  const last = days[days.length - 1]?.day ?? '';
  return html`<div class="usage-chart">
    <p id="${id}-summary">${summary}</p>
    <div class="charts" aria-hidden="true">
      <figure>
        <figcaption>Spend per day (${currency})</figcaption>
        <svg viewBox="0 0 ${W} ${H}" width=${W} height=${H} focusable="false">${bars(days.map((d) => d.amount_micros), null, 'spend', '')}</svg>
      </figure>
      <figure>
        <figcaption><span class="swatch input"></span>Input and <span class="swatch output"></span>output tokens per day</figcaption>
        <svg viewBox="0 0 ${W} ${H}" width=${W} height=${H} focusable="false">${bars(days.map((d) => d.input_tokens), days.map((d) => d.output_tokens), 'input', 'output')}</svg>
      </figure>
      <p class="muted range">${first} – ${last} (UTC days)</p>
    </div>
    <table class="visually-hidden">
      <caption>Usage of ${keyName} per UTC day, ${first} to ${last}</caption>
      <thead><tr><th scope="col">Day</th><th scope="col">Spend (${currency})</th><th scope="col">Requests</th><th scope="col">Input tokens</th><th scope="col">Output tokens</th></tr></thead>
      <tbody>
        ${days.map((d) => html`<tr><th scope="row">${d.day}</th><td>${money(d.amount_micros)}</td><td>${n(d.requests)}</td><td>${n(d.input_tokens)}</td><td>${n(d.output_tokens)}</td></tr>`)}
      </tbody>
    </table>
  </div>`;
}
