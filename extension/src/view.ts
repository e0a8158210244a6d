/**
 * The DOM of a run tree. Every piece of recorded text goes in through textContent, never as markup:
 * a trajectory carries model output and data excerpts, which may hold hostile text.
 */

import { Env, answerView } from './answer';
import { Group, Resumed, Run, Tree, Turn, groupFigures, outCounts, runElapsed, slotsRecorded } from './fold';
import {
  Child, STATUS_LABELS, codeOfReply, copyButton, fmtCost, fmtCount, fmtInt, fmtSecs, h, insertButton, runnableCode,
  moreLabel, pendingTurnText, plural, promptCacheText, replayedTurn, resumedText, turnTitle
} from './format';
import { frameView, outputParts } from './frames';
import { PAGE_SIZE, callRow, traceView } from './trace';

export { Env } from './answer';
export { h } from './format';
export { PAGE_SIZE } from './trace';
const TEXT_CHARS = 20_000; // characters of one code, output or reply block shown before "show all"

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

/** A meter: a label, the figures, and a bar only when the limit was set (no empty grey bars). */
function meter(label: string, text: string, used: number, limit: number | null, ahead = 0): HTMLElement {
  const el = h('div', 'rlmnb-meter', h('span', 'rlmnb-meter-label', label), h('span', 'rlmnb-meter-text', text));
  if (limit) {
    const bar = h('div', 'rlmnb-meter-bar');
    const fraction = Math.max(0, Math.min(1, used / limit));
    const fill = h('div', 'rlmnb-meter-fill');
    fill.style.width = `${(fraction * 100).toFixed(1)}%`;
    if (fraction >= 1) {
      fill.classList.add('rlmnb-meter-full');
    }
    bar.appendChild(fill);
    if (ahead > 0) {
      const sent = h('div', 'rlmnb-meter-ahead');
      sent.style.width = `${(Math.max(0, Math.min(1 - fraction, ahead / limit)) * 100).toFixed(1)}%`;
      bar.appendChild(sent);
    }
    el.appendChild(bar);
  }
  return el;
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

function groupSummary(g: Group, ended = false): string {
  if (g.kind === 'map' && g.map) {
    return mapSummary(g);
  }
  const name = g.kind === 'batch' ? 'llm_query_batched' : 'llm_query';
  const f = groupFigures(g);
  const parts = [`${name} × ${fmtInt(g.size || f.started)}`];
  if (f.finished < f.started) {
    parts.push(`${fmtInt(f.finished)} of ${fmtInt(f.started)} replied`);
  }
  const queueParts: string[] = [];
  if (f.finished < f.started) {
    const [flying, waiting] = ended ? ['cancelled', 'not sent'] : ['in flight', 'queued']; // an ended run has none out
    queueParts.push(`${fmtInt(f.inFlight)} ${flying}${f.queued ? ` · ${fmtInt(f.queued)} ${waiting}` : ''}`);
  }
  if (f.queuedP95 !== null && f.queuedP95 >= 0.001) {
    queueParts.push(`queued p50 ${fmtSecs(f.queuedP50)} · p95 ${fmtSecs(f.queuedP95)}`);
  }
  if (g.errors) {
    parts.push(`${fmtInt(g.errors)} failed`);
  }
  if (f.retried) {
    parts.push(`${fmtInt(f.retried)} retried`);
  }
  if (f.p50 !== null) {
    parts.push(`p50 ${fmtSecs(f.p50)} · p95 ${fmtSecs(f.p95)}`);
  }
  parts.push(...queueParts);
  parts.push(`${fmtCount(f.inputTokens)} → ${fmtCount(f.outputTokens)} tokens`);
  const cache = promptCacheText(f.cachedInputTokens, f.saved);
  if (cache) {
    parts.push(`prompt cache: ${cache}`);
  }
  parts.push(fmtCost(f.cost, f.unpriced));
  if (f.cached - f.journal) {
    parts.push(`${fmtInt(f.cached - f.journal)} cached`);
  }
  if (f.journal) {
    parts.push(`${fmtInt(f.journal)} from the journal`);
  }
  if (g.wall !== null) {
    parts.push(`wall ${fmtSecs(g.wall)}`);
  }
  if (g.refused) {
    parts.push(`refused: ${g.refused}`);
  }
  return parts.join(' · ');
}

export function groupView(g: Group, pageSize = PAGE_SIZE, ended = false): HTMLElement {
  return details([h('span', 'rlmnb-group-title', groupSummary(g, ended))], () => {
    const list = h('div', 'rlmnb-calls');
    let shown = 0;
    const more = h('button', 'rlmnb-more');
    const page = () => {
      const next = g.calls.slice(shown, shown + pageSize);
      for (const c of next) {
        list.appendChild(callRow(c, null, undefined, slotsRecorded(g)));
      }
      shown += next.length;
      const left = g.calls.length - shown;
      more.textContent = moreLabel(pageSize, left);
      more.style.display = left > 0 ? '' : 'none';
    };
    more.addEventListener('click', page);
    page();
    return [list, more];
  }, false, 'rlmnb-group');
}

/** One turn, laid out as the Python views lay it out: a title line, then reply, code, output, sub-calls. */
function turnView(tree: Tree, run: Run, t: Turn): HTMLElement {
  const meta: string[] = [];
  if (t.replyLatency !== null) {
    meta.push(`reply ${fmtSecs(t.replyLatency)}`);
  }
  if (t.replyTokens) {
    const cache = promptCacheText(t.replyCache[0], t.replyCache[1]);
    meta.push(`${fmtCount(t.replyTokens[0])} → ${fmtCount(t.replyTokens[1])} tokens${cache ? ` (${cache})` : ''}`);
  }
  if (t.executed) {
    meta.push(`code ${fmtSecs(t.duration)}`);
  }
  const pending = pendingTurnText(t, run);
  const title = h('div', 'rlmnb-turn-title', h('b', '', turnTitle(t.turn, t.maxTurns)), ' ',
    h('span', 'rlmnb-muted', meta.join(' · ')),
    pending ? h('span', `rlmnb-flag rlmnb-flag-pending${run.status === 'running' ? '' : ' rlmnb-flag-ended'}`, pending) : null,
    t.error ? h('span', 'rlmnb-flag rlmnb-flag-error', t.errorType ?? 'error') : null,
    t.timedOut ? h('span', 'rlmnb-flag rlmnb-flag-error', 'timed out') : null,
    t.restarted ? h('span', 'rlmnb-flag rlmnb-flag-warn', 'sandbox restarted') : null,
    t.submitted ? h('span', 'rlmnb-flag rlmnb-flag-submit', 'submitted') : null,
    replayedTurn(tree.resumed, run.id, t.turn) ? h('span', 'rlmnb-flag rlmnb-flag-journal', 'from the journal') : null);
  const box = h('div', 'rlmnb-turn', title);
  box.setAttribute('data-turn', String(t.turn));
  const code = t.code || codeOfReply(t.reply);
  if (t.reply) {
    box.appendChild(details([`model reply (${fmtInt(t.reply.length)} characters)`],
      () => [textBlock(t.reply, 'rlmnb-reply')], false, 'rlmnb-model-reply'));
  }
  if (code) {
    box.appendChild(h('div', 'rlmnb-label', 'code ', copyButton('copy', () => code),
      insertButton('copy code to a new cell', () => runnableCode(code), 'insert a cell below with this turn\'s code, '
        + 'runnable there', tree.rootId ?? undefined)));
    box.appendChild(textBlock(code, 'rlmnb-code'));
  } else if (t.reply) {
    box.appendChild(h('div', 'rlmnb-muted', '(no code in this reply)'));
  }
  if (t.executed) {
    if (t.stdout) { // DataFrames the code printed as tables, the rest as text
      box.append(h('div', 'rlmnb-label', 'output'), ...outputParts(t.stdout, t.tables).map(part =>
        typeof part === 'string' ? textBlock(part, 'rlmnb-stdout') : frameView(part, text => textBlock(text, 'rlmnb-stdout'))));
    }
    const errors = [t.stderr, t.error ?? ''].filter(Boolean).join('\n');
    if (errors) {
      box.appendChild(textBlock(errors, 'rlmnb-error'));
    }
    if (t.told) { // a timed-out turn: what the model was told about it
      box.appendChild(h('div', 'rlmnb-note rlmnb-note-rejected', `told the model: ${t.told}`));
    } else if (!t.stdout && !errors) {
      box.appendChild(h('div', 'rlmnb-muted rlmnb-small', '(no output)'));
    }
  } else if (t.streamedStdout || t.streamedStderr) { // printed before the run stopped (or the output was saved)
    box.appendChild(h('div', 'rlmnb-label', run.status === 'running' ? 'output so far' : 'output before it stopped'));
    if (t.streamedStdout) {
      box.appendChild(textBlock(t.streamedStdout, 'rlmnb-stdout'));
    }
    if (t.streamedStderr) {
      box.appendChild(textBlock(t.streamedStderr, 'rlmnb-error'));
    }
  }
  for (const [kind, text] of t.notes) {
    box.appendChild(h('div', `rlmnb-note rlmnb-note-${kind}`, text));
  }
  const mark = markHere(tree.resumed, run, t.turn, true);
  if (mark) {
    box.appendChild(mark); // it went live during this turn's sub-calls: after its reply and code
  }
  for (const g of t.groups) {
    box.appendChild(groupView(g, PAGE_SIZE, run.status !== 'running'));
  }
  for (const id of t.children) {
    const child = tree.runs.get(id);
    if (child) {
      box.appendChild(runView(tree, child, {}));
    }
  }
  return box;
}

function runHeader(tree: Tree, run: Run): HTMLElement {
  const elapsed = runElapsed(tree, run);
  const models = run.subModel && run.subModel !== run.model ? `${run.model} → sub ${run.subModel}` : run.model;
  const setup = run.id === tree.rootId && tree.opened !== null ? run.started - tree.opened : 0;
  return h('div', 'rlmnb-header',
    run.parentId ? h('b', '', run.label || `child run (depth ${run.depth})`) : h('b', 'rlmnb-brand', 'RLM'), ' ',
    badge(run.status), ' ', h('span', '', models), ' ', h('span', 'rlmnb-muted rlmnb-elapsed', fmtSecs(elapsed)),
    setup >= 0.5 ? h('span', 'rlmnb-muted', `(set-up ${fmtSecs(setup)})`) : null);
}

/** A resumed run's mark if it sits here: before turn `turn`, inside it (`within`), or after the last (null). */
function markHere(mark: Resumed | null, run: Run, turn: number | null, within: boolean): HTMLElement | null {
  if (mark === null || mark.runId !== run.id || mark.turn !== turn || (turn !== null && mark.within !== within)) {
    return null;
  }
  const el = h('div', 'rlmnb-resumed', `⟳ ${resumedText(mark)}`);
  el.title = mark.source;
  return el;
}

/** Why a run ended without an answer, in the same words as the Python views. */
function endingView(run: Run): HTMLElement | null {
  if (run.status === 'running' || run.status === 'submitted' || run.status === 'fallback') {
    return null;
  }
  const title = { interrupted: 'Interrupted', error: 'Run failed', budget_exhausted: 'Budget exhausted' }[run.status] ?? run.status;
  const box = h('div', `rlmnb-ending rlmnb-status-${run.status}`, h('b', '', title));
  const why = run.error || run.reason;
  if (why) {
    box.appendChild(h('div', 'rlmnb-ending-text', why));
  }
  if (run.status === 'interrupted') {
    box.appendChild(h('div', 'rlmnb-muted', 'The partial trajectory above is kept.'));
  }
  return box;
}

export function runView(tree: Tree, run: Run, env: Env, above: HTMLElement[] = []): HTMLElement {
  const box = h('div', run.parentId ? 'rlmnb-run rlmnb-child' : 'rlmnb-run');
  box.setAttribute('data-run-id', run.id);
  box.appendChild(runHeader(tree, run));
  if (run.question) {
    box.appendChild(h('div', 'rlmnb-question', run.question));
  }
  for (const el of above) {
    box.appendChild(el); // the root run's meters and trace panel sit between its question and its turns
  }
  const turns = [...run.turns.values()].sort((a, b) => a.turn - b.turn);
  const list = h('div', 'rlmnb-turns');
  for (const t of turns) {
    const mark = markHere(tree.resumed, run, t.turn, false);
    if (mark) {
      list.appendChild(mark); // it went live with this turn's root request
    }
    list.appendChild(turnView(tree, run, t));
  }
  const end = markHere(tree.resumed, run, null, false);
  if (end) {
    list.appendChild(end); // nothing went live
  }
  box.appendChild(list);
  const placed = new Set(turns.flatMap(t => t.children));
  for (const id of run.children) {
    const child = tree.runs.get(id);
    if (child && !placed.has(id)) {
      box.appendChild(runView(tree, child, env)); // refinements and rounds: started by the run, not by a turn
    }
  }
  for (const note of run.notes) {
    box.appendChild(h('div', 'rlmnb-note', note));
  }
  const ending = endingView(run);
  if (ending) {
    box.appendChild(ending);
  }
  const answer = answerView(run, env);
  if (answer) {
    box.appendChild(answer);
  }
  return box;
}

function limitText(limit: number | null, fmt: (n: number) => string): string {
  return limit ? ` / ${fmt(limit)}` : '';
}

export function metersView(tree: Tree): HTMLElement {
  const root = tree.runs.get(tree.rootId!)!;
  const cfg = root.config ?? {};
  const t = tree.totals;
  const turns = root.turns.size ? Math.max(...root.turns.keys()) : 0;
  const maxTurns = num(cfg.max_iterations);
  const maxCalls = num(cfg.max_llm_calls);
  const maxTokens = num(cfg.max_tokens);
  const maxCost = num(cfg.max_cost);
  const maxTime = num(cfg.max_time);
  const tokens = t.inputTokens + t.outputTokens;
  const elapsed = runElapsed(tree, root);
  const [inFlight, queued] = outCounts(t.subCalls, t.subDone, t.subSent, t.subSentDone, t.queueRecorded);
  const ended = root.status !== 'running'; // nothing is in flight after the end: cancelled, or never sent
  const out = [[inFlight, 'in flight'], [queued, 'queued']].filter(([n]) => (n as number) > 0)
    .map(([n, word]) => `+${fmtInt(n as number)} ${word}`);
  const gone = [[inFlight, 'cancelled'], [queued, 'not sent']].filter(([n]) => (n as number) > 0)
    .map(([n, word]) => `${fmtInt(n as number)} ${word}`);
  const calls = `${fmtInt(t.subDone)}${out.length && !ended ? ` (${out.join(', ')})` : ''}` +
    `${limitText(maxCalls, fmtInt)}${t.subErrors ? ` · ${fmtInt(t.subErrors)} failed` : ''}` +
    `${ended && gone.length ? ` · ${gone.join(', ')}` : ''}`;
  return h('div', 'rlmnb-meters',
    meter('turns', `${turns}${limitText(maxTurns, fmtInt)}`, turns, maxTurns),
    meter('sub-calls', calls, t.subDone, maxCalls, ended ? 0 : inFlight + queued),
    meter('tokens', `${fmtCount(t.inputTokens)} in${t.cachedInputTokens ? ` (${fmtCount(t.cachedInputTokens)} cached)` : ''}`
      + ` · ${fmtCount(t.outputTokens)} out${limitText(maxTokens, fmtCount)}`, tokens, maxTokens),
    meter('cost', `${fmtCost(t.cost, t.unpriced)}${limitText(maxCost, c => `$${c}`)}`
      + `${t.saved ? ` · saved $${t.saved.toFixed(4)}` : ''}`, t.cost, maxCost),
    meter('time', `${fmtSecs(elapsed)}${limitText(maxTime, fmtSecs)}`, elapsed, maxTime));
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : null;
}

/** The whole view of one trajectory. */
export function trajectoryView(tree: Tree, env: Env = {}): HTMLElement {
  const root = tree.runs.get(tree.rootId!)!;
  // mathjax_ignore / tex2jax_ignore: the notebook's math renderer leaves "$0.25 ... $2" alone in here
  const view = h('div', 'rlmnb-view mathjax_ignore tex2jax_ignore');
  view.setAttribute('data-status', root.status);
  if (tree.snapshot) { // saved while the run was still going: where its journal is and how to go on
    view.appendChild(h('div', 'rlmnb-snapshot', 'This run was still going when this output was saved. If it stopped '
      + 'there (the kernel restarted or was lost), its journal ', h('code', '', tree.snapshot.journal),
      ' holds it: go on with ', h('code', '', tree.snapshot.resume), ' ', copyButton('copy', () => tree.snapshot!.resume),
      ' in a cell, with the question below it and the same inputs defined.'));
  }
  const trace = traceView(tree);
  view.appendChild(runView(tree, root, env, trace ? [metersView(tree), trace] : [metersView(tree)]));
  const footer = [`${plural(tree.runs.size, 'run')}`, plural(tree.events, 'event'), plural(tree.totals.rootCalls, 'root call')];
  if (tree.totals.concurrency !== null) {
    footer.push(`at most ${plural(tree.totals.concurrency, 'sub-call')} in flight at the end (adaptive limit)`);
  }
  view.appendChild(h('div', 'rlmnb-footer rlmnb-muted', `${footer.join(' · ')} · rendered by rlmnb-jupyterlab, no kernel needed`));
  return view;
}
