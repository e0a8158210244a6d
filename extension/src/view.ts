/**
 * The DOM of a run tree. Every piece of recorded text goes in through textContent, never as markup:
 * a trajectory carries model output and data excerpts, which may hold hostile text.
 */

import { Call, Group, Json, Run, Tree, Turn } from './fold';

export const PAGE_SIZE = 50; // sub-calls listed per group before a "show more" button
const TEXT_CHARS = 20_000; // characters of one code, output or reply block shown before "show all"

const STATUS_LABELS: { [status: string]: string } = {
  running: 'not finished', submitted: 'answered', fallback: 'fallback answer',
  budget_exhausted: 'budget exhausted', interrupted: 'interrupted', error: 'error'
};

type Child = Node | string | null | undefined | false;

export function h(tag: string, cls?: string, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  if (cls) {
    el.className = cls;
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    el.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return el;
}

// ---- formatting (the same rules as rlmnb/render.py) ----------------------------------------------------
export function fmtCount(n: number | null | undefined): string {
  if (n === null || n === undefined) {
    return '?';
  }
  n = Math.trunc(n);
  if (n < 100_000) {
    return n.toLocaleString('en-US');
  }
  if (n < 1_000_000) {
    return `${(n / 1e3).toFixed(1)}k`;
  }
  return `${(n / 1e6).toFixed(2)}M`;
}

export function fmtCost(cost: number | null | undefined, unpriced = 0): string {
  let text = cost === null || cost === undefined ? '$?' : `$${cost.toFixed(4)}`;
  if (unpriced) {
    text += ` (+${unpriced.toLocaleString('en-US')} unpriced)`;
  }
  return text;
}

export function fmtSecs(s: number | null | undefined): string {
  if (s === null || s === undefined) {
    return '?';
  }
  if (s < 1) {
    return `${(s * 1000).toFixed(0)} ms`;
  }
  if (s < 60) {
    return `${s.toFixed(1)} s`;
  }
  const total = Math.round(s);
  return `${Math.floor(total / 60)} min ${String(total % 60).padStart(2, '0')} s`;
}

function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

export function answerText(answer: Json | undefined): string {
  if (typeof answer === 'string') {
    return answer;
  }
  try {
    return JSON.stringify(answer, null, 2) ?? 'null';
  } catch {
    return String(answer);
  }
}

function percentile(sorted: number[], q: number): number | null {
  if (!sorted.length) {
    return null;
  }
  const rank = Math.max(0, Math.min(sorted.length - 1, Math.ceil((q / 100) * sorted.length) - 1));
  return sorted[rank];
}

// ---- pieces -----------------------------------------------------------------------------------------
/** A block of recorded text; a long one shows its head with a button for the rest. */
function textBlock(text: string, cls: string, label?: string): HTMLElement {
  const pre = h('pre', `rlmnb-pre ${cls}`);
  if (label) {
    pre.setAttribute('data-label', label);
  }
  if (text.length <= TEXT_CHARS) {
    pre.textContent = text;
    return pre;
  }
  pre.textContent = text.slice(0, TEXT_CHARS);
  const more = h('button', 'rlmnb-more', `show all ${text.length.toLocaleString('en-US')} characters`);
  more.addEventListener('click', () => {
    pre.textContent = text;
    more.remove();
  });
  return h('div', 'rlmnb-long', pre, more);
}

function details(summary: Child[], body: () => Child[], open = false, cls = ''): HTMLElement {
  // spaces between the parts, so the summary also reads (and copies) as text
  const parts = summary.filter(Boolean).flatMap((part, i) => (i ? [' ', part] : [part]));
  const el = h('details', `rlmnb-details ${cls}`.trim(), h('summary', 'rlmnb-summary', ...parts)) as HTMLDetailsElement;
  let built = false;
  const build = () => {
    if (!built) {
      built = true;
      for (const child of body()) {
        if (child) {
          el.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
        }
      }
    }
  };
  if (open) {
    el.open = true;
    build();
  }
  el.addEventListener('toggle', () => el.open && build()); // bodies are built when first opened
  return el;
}

function badge(status: string): HTMLElement {
  const el = h('span', `rlmnb-badge rlmnb-status-${status}`, STATUS_LABELS[status] ?? status);
  el.setAttribute('data-status', status);
  return el;
}

function meter(label: string, used: number, limit: number | null, text: string): HTMLElement {
  const bar = h('div', 'rlmnb-meter-bar');
  const fill = h('div', 'rlmnb-meter-fill');
  const fraction = limit ? Math.max(0, Math.min(1, used / limit)) : 0;
  fill.style.width = `${(fraction * 100).toFixed(1)}%`;
  if (limit && fraction >= 1) {
    fill.classList.add('rlmnb-meter-full');
  }
  bar.appendChild(fill);
  return h('div', 'rlmnb-meter', h('span', 'rlmnb-meter-label', label), bar, h('span', 'rlmnb-meter-text', text));
}

function callRow(c: Call): HTMLElement {
  const bits = [`#${c.index}`];
  if (c.inputTokens !== null) {
    bits.push(`${fmtCount(c.inputTokens)} → ${fmtCount(c.outputTokens)} tokens`);
  }
  bits.push(c.done ? fmtSecs(c.latency) : 'no reply recorded');
  if (c.cost !== null) {
    bits.push(fmtCost(c.cost));
  }
  if (c.cached) {
    bits.push('cached');
  }
  const preview = (c.error ?? c.reply ?? c.prompt).replace(/\s+/g, ' ').slice(0, 120);
  return details(
    [h('span', 'rlmnb-call-meta', bits.join(' · ')), c.error ? h('span', 'rlmnb-error-tag', 'error') : null,
     h('span', 'rlmnb-preview', preview)],
    () => {
      const clipped = c.promptChars > c.prompt.length
        ? h('div', 'rlmnb-muted', `prompt: ${c.promptChars.toLocaleString('en-US')} characters, the first ${c.prompt.length.toLocaleString('en-US')} kept in the record`)
        : null;
      return [
        h('div', 'rlmnb-label', `prompt${c.model ? ` (${c.model})` : ''}`), clipped, textBlock(c.prompt, 'rlmnb-prompt'),
        h('div', 'rlmnb-label', c.error ? 'error' : 'reply'),
        textBlock(c.error ?? c.reply ?? '', c.error ? 'rlmnb-error' : 'rlmnb-reply')
      ];
    },
    false,
    'rlmnb-call'
  );
}

function mapSummary(g: Group): string {
  const m = g.map!;
  const parts = [m.operator, m.items === null ? 'items streamed' : plural(m.items, 'item'), plural(m.packs, 'pack'),
    `${m.reasks} re-asked`, `${m.failures} failed`, plural(g.calls.length, 'sub-call')];
  if (m.stopped) {
    parts.push(`stopped: ${m.stopped}`);
  }
  return parts.join(' · ');
}

function groupSummary(g: Group): string {
  if (g.kind === 'map' && g.map) {
    return mapSummary(g);
  }
  const name = g.kind === 'batch' ? 'llm_query_batched' : 'llm_query';
  const latencies = g.calls.map(c => c.latency).filter((x): x is number => x !== null).sort((a, b) => a - b);
  const input = g.calls.reduce((s, c) => s + (c.inputTokens ?? 0), 0);
  const output = g.calls.reduce((s, c) => s + (c.outputTokens ?? 0), 0);
  const cost = g.calls.reduce((s, c) => s + (c.cost ?? 0), 0);
  const parts = [`${name} × ${g.size || g.calls.length}`];
  if (g.model) {
    parts.push(g.model);
  }
  if (g.errors) {
    parts.push(plural(g.errors, 'error'));
  }
  parts.push(`${fmtCount(input)} → ${fmtCount(output)} tokens`);
  const p50 = percentile(latencies, 50);
  if (p50 !== null) {
    parts.push(`p50 ${fmtSecs(p50)}, p95 ${fmtSecs(percentile(latencies, 95))}`);
  }
  parts.push(fmtCost(cost));
  if (g.refused) {
    parts.push(`refused: ${g.refused}`);
  }
  return parts.join(' · ');
}

export function groupView(g: Group, pageSize = PAGE_SIZE): HTMLElement {
  return details([h('span', 'rlmnb-group-title', groupSummary(g))], () => {
    const list = h('div', 'rlmnb-calls');
    let shown = 0;
    const more = h('button', 'rlmnb-more');
    const page = () => {
      const next = g.calls.slice(shown, shown + pageSize);
      for (const c of next) {
        list.appendChild(callRow(c));
      }
      shown += next.length;
      const left = g.calls.length - shown;
      more.textContent = `show ${Math.min(left, pageSize)} more of ${left.toLocaleString('en-US')}`;
      more.style.display = left > 0 ? '' : 'none';
    };
    more.addEventListener('click', page);
    page();
    return [list, more];
  }, false, 'rlmnb-group');
}

function turnView(tree: Tree, run: Run, t: Turn): HTMLElement {
  const meta: string[] = [];
  if (t.executed) {
    meta.push(fmtSecs(t.duration));
  }
  const calls = t.groups.reduce((s, g) => s + g.calls.length, 0);
  if (calls) {
    meta.push(plural(calls, 'sub-call'));
  }
  if (t.children.length) {
    meta.push(plural(t.children.length, 'child run'));
  }
  const flags = [
    t.submitted ? h('span', 'rlmnb-flag rlmnb-flag-submit', 'submit') : null,
    t.error ? h('span', 'rlmnb-flag rlmnb-flag-error', t.errorType ?? 'error') : null,
    t.timedOut ? h('span', 'rlmnb-flag rlmnb-flag-error', 'timed out') : null,
    t.restarted ? h('span', 'rlmnb-flag rlmnb-flag-error', 'kernel restarted') : null
  ];
  const firstLine = (t.code.split('\n').find(line => line.trim()) ?? '(no code)').slice(0, 100);
  const last = Math.max(...run.turns.keys());
  return details(
    [h('b', '', `Turn ${t.turn}${t.maxTurns ? `/${t.maxTurns}` : ''}`), ...flags,
     h('span', 'rlmnb-muted', meta.join(' · ')), h('code', 'rlmnb-preview', firstLine)],
    () => {
      const body: Child[] = [];
      if (t.reply) {
        const tokens = t.replyTokens ? ` · ${fmtCount(t.replyTokens[0])} → ${fmtCount(t.replyTokens[1])} tokens` : '';
        body.push(details([`model reply · ${fmtSecs(t.replyLatency)}${tokens}`], () => [textBlock(t.reply, 'rlmnb-reply')],
          false, 'rlmnb-model-reply'));
      }
      if (t.code) {
        body.push(h('div', 'rlmnb-label', 'code'), textBlock(t.code, 'rlmnb-code'));
      }
      if (t.stdout) {
        body.push(h('div', 'rlmnb-label', 'output'), textBlock(t.stdout, 'rlmnb-stdout'));
      }
      if (t.stderr) {
        body.push(h('div', 'rlmnb-label', 'stderr'), textBlock(t.stderr, 'rlmnb-stderr'));
      }
      if (t.error) {
        body.push(h('div', 'rlmnb-label', 'error'), textBlock(t.error, 'rlmnb-error'));
      }
      if (t.executed && !t.stdout && !t.stderr && !t.error) {
        body.push(h('div', 'rlmnb-muted', '(no output)'));
      }
      for (const [kind, text] of t.notes) {
        body.push(h('div', `rlmnb-note rlmnb-note-${kind}`, text));
      }
      for (const g of t.groups) {
        body.push(groupView(g));
      }
      for (const id of t.children) {
        const child = tree.runs.get(id);
        if (child) {
          body.push(runView(tree, child));
        }
      }
      return body;
    },
    t.turn === last && run.id === tree.rootId,
    'rlmnb-turn'
  );
}

function answerView(run: Run): HTMLElement | null {
  if (run.answer === undefined || (run.answer === null && run.status !== 'submitted')) {
    return null;
  }
  const title = run.verified === false ? 'Answer (unverified)' : 'Answer';
  return h('div', 'rlmnb-answer', h('div', 'rlmnb-label', title), textBlock(answerText(run.answer), 'rlmnb-answer-text'));
}

/** Wall time of a run: its recorded usage, else its first to last event. */
function runElapsed(tree: Tree, run: Run): number {
  return Math.max(0, run.usage?.wall_s || (run.finished ?? tree.lastTs) - run.started);
}

function runHeader(tree: Tree, run: Run): HTMLElement {
  const elapsed = runElapsed(tree, run);
  const models = run.subModel && run.subModel !== run.model ? `${run.model} → sub ${run.subModel}` : run.model;
  return h('div', 'rlmnb-header',
    run.parentId ? h('b', '', run.label || `child run (depth ${run.depth})`) : h('b', 'rlmnb-brand', 'RLM'), ' ',
    badge(run.status), ' ', h('span', 'rlmnb-muted', `${models} · ${fmtSecs(elapsed)}`));
}

export function runView(tree: Tree, run: Run, above: HTMLElement[] = []): HTMLElement {
  const box = h('div', run.parentId ? 'rlmnb-run rlmnb-child' : 'rlmnb-run');
  box.setAttribute('data-run-id', run.id);
  box.appendChild(runHeader(tree, run));
  if (run.question) {
    box.appendChild(h('div', 'rlmnb-question', run.question));
  }
  for (const el of above) {
    box.appendChild(el); // the root run's meters and search sit between its question and its turns
  }
  const turns = [...run.turns.values()].sort((a, b) => a.turn - b.turn);
  const list = h('div', 'rlmnb-turns');
  for (const t of turns) {
    list.appendChild(turnView(tree, run, t));
  }
  box.appendChild(list);
  const placed = new Set(turns.flatMap(t => t.children));
  for (const id of run.children) {
    const child = tree.runs.get(id);
    if (child && !placed.has(id)) {
      box.appendChild(runView(tree, child)); // refinements and rounds: started by the run, not by a turn
    }
  }
  for (const note of run.notes) {
    box.appendChild(h('div', 'rlmnb-note', note));
  }
  if (run.reason && run.status !== 'submitted') {
    box.appendChild(h('div', 'rlmnb-note rlmnb-note-info', run.reason));
  }
  if (run.error) {
    box.appendChild(textBlock(run.error, 'rlmnb-error'));
  }
  const answer = answerView(run);
  if (answer) {
    box.appendChild(answer);
  }
  return box;
}

export function metersView(tree: Tree): HTMLElement {
  const root = tree.runs.get(tree.rootId!)!;
  const cfg = root.config ?? {};
  const t = tree.totals;
  const turns = root.turns.size ? Math.max(...root.turns.keys()) : 0;
  const maxTurns = cfg.max_iterations ?? null;
  const maxCalls = cfg.max_llm_calls ?? null;
  const tokens = t.inputTokens + t.outputTokens;
  const elapsed = runElapsed(tree, root);
  return h('div', 'rlmnb-meters',
    meter('turns', turns, maxTurns, `${turns}${maxTurns ? `/${maxTurns}` : ''}`),
    meter('sub-calls', t.subCalls, maxCalls,
      `${t.subCalls.toLocaleString('en-US')}${maxCalls ? `/${maxCalls.toLocaleString('en-US')}` : ''}${t.subErrors ? ` (${plural(t.subErrors, 'error')})` : ''}`),
    meter('tokens', tokens, cfg.max_tokens ?? null, `${fmtCount(t.inputTokens)} in / ${fmtCount(t.outputTokens)} out`),
    meter('cost', t.cost, cfg.max_cost ?? null, fmtCost(t.cost, t.unpriced)),
    meter('time', elapsed, cfg.max_time ?? null, fmtSecs(elapsed)));
}

interface Hit {
  call: Call;
  run: Run;
  turn: number;
  group: Group;
}

function everyCall(tree: Tree): Hit[] {
  const hits: Hit[] = [];
  for (const run of tree.runs.values()) {
    for (const t of [...run.turns.values()].sort((a, b) => a.turn - b.turn)) {
      for (const group of t.groups) {
        for (const call of group.calls) {
          hits.push({ call, run, turn: t.turn, group });
        }
      }
    }
  }
  return hits;
}

function hitRow(tree: Tree, hit: Hit): HTMLElement {
  const where = [hit.run.id === tree.rootId ? 'root run' : hit.run.label || `child run (depth ${hit.run.depth})`,
    `turn ${hit.turn}`,
    hit.group.kind === 'map' ? hit.group.map?.operator ?? 'llm_map' : hit.group.kind === 'batch' ? 'llm_query_batched'
      : 'llm_query'];
  const row = callRow(hit.call);
  row.querySelector('summary')!.prepend(h('span', 'rlmnb-where', where.join(' · ')), ' ');
  return row;
}

/** A search over every sub-call of the tree (prompt, reply, error), results listed a page at a time. */
export function searchView(tree: Tree): HTMLElement | null {
  const hits = everyCall(tree);
  if (hits.length < 2) {
    return null;
  }
  const input = h('input', 'rlmnb-search-input') as HTMLInputElement;
  input.type = 'search';
  input.placeholder = `search the ${hits.length.toLocaleString('en-US')} sub-calls (prompts, replies, errors)`;
  input.setAttribute('aria-label', 'search sub-calls');
  input.setAttribute('data-lm-suppress-shortcuts', 'true'); // typing here never triggers notebook shortcuts
  const status = h('span', 'rlmnb-search-status rlmnb-muted');
  const results = h('div', 'rlmnb-search-results');
  const search = () => {
    const query = input.value.trim().toLowerCase();
    results.textContent = '';
    status.textContent = '';
    if (!query) {
      return;
    }
    const found = hits.filter(({ call }) =>
      call.prompt.toLowerCase().includes(query) || (call.reply ?? '').toLowerCase().includes(query) ||
      (call.error ?? '').toLowerCase().includes(query));
    status.textContent = plural(found.length, 'matching sub-call');
    const more = h('button', 'rlmnb-more');
    let shown = 0;
    const page = () => {
      for (const hit of found.slice(shown, shown + PAGE_SIZE)) {
        results.insertBefore(hitRow(tree, hit), more);
      }
      shown = Math.min(found.length, shown + PAGE_SIZE);
      const left = found.length - shown;
      more.textContent = `show ${Math.min(left, PAGE_SIZE)} more of ${left.toLocaleString('en-US')}`;
      more.style.display = left > 0 ? '' : 'none';
    };
    more.addEventListener('click', page);
    results.appendChild(more);
    page();
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(search, 150);
  });
  return h('div', 'rlmnb-search', input, ' ', status, results);
}

/** The whole view of one trajectory. */
export function trajectoryView(tree: Tree): HTMLElement {
  const root = tree.runs.get(tree.rootId!)!;
  const view = h('div', 'rlmnb-view');
  view.setAttribute('data-status', root.status);
  const search = searchView(tree);
  view.appendChild(runView(tree, root, search ? [metersView(tree), search] : [metersView(tree)]));
  const footer = [`${plural(tree.runs.size, 'run')}`, plural(tree.events, 'event'), plural(tree.totals.rootCalls, 'root call')];
  if (tree.totals.concurrency !== null) {
    footer.push(`concurrency ended at ${tree.totals.concurrency}`);
  }
  view.appendChild(h('div', 'rlmnb-footer rlmnb-muted', `${footer.join(' · ')} · rendered by rlmnb-jupyterlab, no kernel needed`));
  return view;
}
