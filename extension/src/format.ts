/**
 * Text formatting and DOM helpers shared by the views. The rules match rlmnb/views (Python), so the live
 * widget, the exported HTML and this extension print the same figures the same way.
 */

import { Json, Resumed, Run, Turn } from './fold';

export type Child = Node | string | null | undefined | false;

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

export function fmtInt(n: number): string {
  return Math.trunc(n).toLocaleString('en-US');
}

/** The label of a "show more" button: the next page of `left` items not shown (as rlmnb.views._format). */
export function moreLabel(page: number, left: number): string {
  return left <= page ? `show the last ${fmtInt(left)}` : `show ${fmtInt(page)} more (${fmtInt(left)} left)`;
}

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

/** A cost as rlmnb.views says it (rlmnb/_ground/usage.py cost_text): calls without a price are counted apart,
 * never shown as $0.0000. */
export function fmtCost(cost: number | null | undefined, unpriced = 0): string {
  if (!unpriced) {
    return cost === null || cost === undefined ? '$?' : `$${cost.toFixed(4)}`;
  }
  const missing = `${plural(unpriced, 'call')} to ${unpriced === 1 ? 'a model' : 'models'} with no price`;
  return cost ? `$${cost.toFixed(4)} + unpriced: ${missing}` : `cost unknown: ${missing}`;
}

/** A turn's note for each way the loop asks the root again before running a reply, or ends the turns instead
 * (model_reply notes). */
export const ASKED_AGAIN: Record<string, string> = {
  empty_retried: "asked again: the model's reply was empty",
  echo_retried: "asked again: the model's reply only copied the request",
  repeat_reasked: "asked again: the model's reply would have run an earlier turn's code",
  repeat_ended:
    "not run: the model's reply repeated an earlier turn after it was asked for another step; the turns end here"
};

/** What a turn-loop policy did, by policy_acted's action, as the words after the policy's name in its note. */
export const POLICY_ACTIONS: Record<string, string> = {
  send_back: ' sent the answer back',
  ask_again: ' asked again',
  answer: ' gave the run its answer',
  end_turns: ' ended the turns',
  read_first: ': the sub-model read the inputs first',
  note: ' added a note'
};

/** The policies RLMConfig.evidence_check=False removes: their send-backs say so beside the policies switch. */
export const EVIDENCE_POLICIES = new Set(['unshown_value', 'whole_copy']);

/**
 * A turn's note for one policy_acted event, the twin of rlmnb/views/_format.py policy_note: ['rejected', ...] for
 * a send-back, which also says how to turn the policy off, ['policy', ...] for every other action.
 */
export function policyNote(policy: string, action: string, detail: string): [string, string] {
  const did = Object.prototype.hasOwnProperty.call(POLICY_ACTIONS, action) ? POLICY_ACTIONS[action] : `: ${action}`;
  const text = `${policy}${did}` + (detail ? `: ${detail}` : '');
  if (action !== 'send_back') {
    return ['policy', text];
  }
  let off = `leave '${policy}' out of RLM(..., policies=...)`;
  if (EVIDENCE_POLICIES.has(policy)) {
    off += ' or set evidence_check=False';
  }
  return ['rejected', `${text} (to turn this check off: ${off})`];
}

/** A turn's heading; turn 0 holds what the harness did before the root's first step (the first reading). */
export function turnTitle(turn: number, maxTurns: number | null | undefined): string {
  if (turn === 0) {
    return 'Before turn 1: first reading';
  }
  return `Turn ${turn}${maxTurns ? `/${maxTurns}` : ''}`;
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

export function plural(n: number, word: string): string {
  return `${fmtInt(n)} ${word}${n === 1 ? '' : 's'}`;
}

/** A sub-call's images in a few words, as rlmnb.views._format.images_note says them: "2 images (600x800 PNG, ...)". */
export function imagesNote(images: { width?: number; height?: number; mime?: string }[]): string {
  if (!images.length) {
    return '';
  }
  const sizes = images.slice(0, 3).map(i => `${i.width}x${i.height} ${String(i.mime ?? '').split('/').pop()!.toUpperCase()}`)
    .join(', ') + (images.length > 3 ? ', ...' : '');
  return `${images.length} image${images.length > 1 ? 's' : ''} (${sizes})`;
}

/** "1,024 cached, saved $0.0009": input tokens read from the provider's prompt cache; '' when none. */
export function promptCacheText(cachedInputTokens: number, saved: number): string {
  if (!cachedInputTokens) {
    return '';
  }
  return `${fmtCount(cachedInputTokens)} cached${saved ? `, saved $${saved.toFixed(4)}` : ''}`;
}

/** The words of a resumed run's mark, as rlmnb.views._format.resumed_text says them. */
export function resumedText(mark: Resumed): string {
  const name = mark.source.replace(/\\/g, '/').split('/').pop() ?? mark.source;
  const served = `${plural(mark.servedRoot, 'root turn')} and ${plural(mark.servedSub, 'sub-call')} served from the `
    + 'journal at no cost';
  return `Resumed from ${name}: ${served}; ${mark.live ? 'live from here' : 'nothing went live'}`;
}

/** Whether a turn of a resumed run got its model reply from the journal (it sits before the mark). */
export function replayedTurn(mark: Resumed | null, runId: string, turn: number): boolean {
  if (mark === null || mark.runId !== runId) {
    return false;
  }
  return mark.turn === null || turn < mark.turn || (turn === mark.turn && mark.within);
}

export function percentile(sorted: number[], q: number): number | null {
  if (!sorted.length) {
    return null;
  }
  const rank = Math.max(0, Math.min(sorted.length - 1, Math.ceil((q / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** A slow call takes at least this many times the median, whatever p95 says. */
export const SLOW_OVER_MEDIAN = 1.5;

/**
 * The latency above which a sub-call is slow: above p95 and above 1.5x the median, so calls that all took about
 * the same time have no slow one; null below 20 latencies (too few to say). rlmnb.views._format.slow_cutoff.
 */
export function slowCutoff(sorted: number[]): number | null {
  if (sorted.length < 20) {
    return null;
  }
  return Math.max(percentile(sorted, 95) as number, SLOW_OVER_MEDIAN * (percentile(sorted, 50) as number));
}

export const STATUS_LABELS: { [status: string]: string } = {
  running: 'not finished', submitted: 'answered', fallback: 'fallback answer',
  budget_exhausted: 'budget exhausted', interrupted: 'interrupted', error: 'error'
};

const ENDED: { [status: string]: string } = {
  interrupted: 'interrupted', error: 'run failed', budget_exhausted: 'budget exhausted'
};

/**
 * What a turn that never ran its code says: the same words in every view. While the run goes on it is
 * waiting; once the run has ended, the turn was cut short, and the status says how.
 */
export function pendingTurnText(t: Turn, run: Run): string | null {
  if (t.executed || (t.replied && !t.code && !codeOfReply(t.reply))) {
    return null; // ran, or a reply without code (a prose answer, an empty reply): nothing left to run
  }
  if (run.status === 'running') {
    return t.replied ? 'running…' : 'waiting for the model…';
  }
  const how = ENDED[run.status] ?? 'run ended';
  return t.replied ? `${how}: this code did not finish` : `${how} before the model replied`;
}

/** The first fenced code block of a reply (what a turn would have run), or ''. */
export function codeOfReply(reply: string): string {
  const match = /```[ \t]*(?:python|py|repl)?[ \t]*\n([\s\S]*?)```/.exec(reply);
  return match ? match[1].replace(/\n$/, '') : '';
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

/**
 * Copy text to the clipboard; `done` hears whether it worked, once. A clipboard request that neither resolves
 * nor fails within a second (a permission prompt nobody answers, a page without focus) falls back to the
 * selection copy, so the button always says something.
 */
export function copyText(text: string, done: (ok: boolean) => void): void {
  let settled = false;
  const finish = (ok: boolean) => {
    if (!settled) {
      settled = true;
      done(ok);
    }
  };
  const fallback = () => {
    if (settled) {
      return;
    }
    const area = document.createElement('textarea');
    area.value = text;
    area.style.position = 'fixed';
    area.style.opacity = '0';
    document.body.appendChild(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    area.remove();
    finish(ok);
  };
  if (navigator.clipboard?.writeText) {
    navigator.clipboard.writeText(text).then(() => finish(true), fallback);
    setTimeout(fallback, 1000);
  } else {
    fallback();
  }
}

/** What a copy button does when clicked (this view's buttons and the live widget's alike). */
export function copyFrom(button: HTMLElement, label: string, text: string): void {
  copyText(text, ok => {
    button.textContent = ok ? 'copied' : 'copy failed';
    button.setAttribute('data-copied', ok ? 'yes' : 'no');
    setTimeout(() => (button.textContent = label), 1500);
  });
}

/** A small button that copies `text()` and says so for a moment. */
export function copyButton(label: string, text: () => string): HTMLElement {
  const button = h('button', 'rlmnb-button rlmnb-copy', label) as HTMLButtonElement;
  button.title = 'copy to the clipboard';
  button.addEventListener('click', event => {
    event.preventDefault();
    event.stopPropagation();
    copyFrom(button, label, text());
  });
  return button;
}

/**
 * Ask the notebook around this view to insert a code cell below the output (the plugin in plugin.ts
 * listens). Outside a notebook (a trajectory file), the code goes to the clipboard instead.
 */
export const INSERT_EVENT = 'rlmnb:insert-cell';

export interface InsertDetail {
  code: string; // the cell's source; "{run}" is replaced by the run's variable (-o NAME, else _rlm)
  handled: boolean;
  // the run's id, when the view may be a saved output: the plugin then binds the run with
  // rlmnb.saved_run (this kernel's run, else the one saved in the notebook), so a fresh kernel can run it
  runId?: string;
}

export function insertButton(label: string, code: () => string, title: string, runId?: string): HTMLElement {
  const button = h('button', 'rlmnb-button rlmnb-insert', label) as HTMLButtonElement;
  button.title = title;
  button.addEventListener('click', event => {
    event.preventDefault();
    event.stopPropagation();
    requestInsert(button, label, code(), runId);
  });
  return button;
}

/**
 * The cell's source for an insert: "{run}" bound to the run. With the run's id (the extension's view, which a
 * reopened notebook shows too), a first line binds it with rlmnb.saved_run: this kernel's run if it still has
 * it, else the one saved in this notebook's output (the kernel's working folder is the notebook's).
 */
export function insertedCode(code: string, variable: string, runId: string | undefined, notebookPath: string): string {
  if (!code.includes('{run}')) {
    return code;
  }
  if (runId) {
    const name = variable === '_rlm' ? 'run' : variable;
    const file = notebookPath.split('/').pop() ?? '';
    const where = file ? `, notebook=${JSON.stringify(file)}` : '';
    return `from rlmnb import saved_run\n${name} = saved_run(${JSON.stringify(runId)}${where})  `
      + `# this kernel's run, else the one saved in ${file || 'the notebook'}\n`
      + code.replace(/\{run\}/g, name);
  }
  const note = variable === '_rlm' ? '# _rlm: the last %%rlm run of this kernel (add -o NAME to a cell to keep its run)\n' : '';
  return note + code.replace(/\{run\}/g, variable);
}

/** What the run's workspace binds in the notebook (rlmnb/workspace.py PRIMITIVES, same order). */
export const WORKSPACE_NAMES = ['inputs', 'sql', 'llm_query', 'llm_query_batched', 'submit', 'FINAL'];
/** Sandbox names a pasted cell cannot have: they need the run's sandbox and its budget. */
export const SANDBOX_ONLY = ['rlm_query', 'rlm_query_batched', 'llm_map', 'llm_classify', 'llm_filter', 'FINAL_VAR',
  'SHOW_VARS'];

function uses(code: string, name: string): boolean {
  return new RegExp(`(?<![\\w.])${name}(?!\\w)`).test(code);
}

/**
 * A turn's code made runnable in a notebook cell: a header binds the primitives it uses from the run
 * ("{run}", see InsertDetail) with `workspace().take(...)`, sub-calls answered from the run's record; names
 * that exist only in the sandbox are said in a comment. Code that uses none comes back unchanged.
 */
export function runnableCode(code: string): string {
  const used = WORKSPACE_NAMES.filter(n => uses(code, n));
  const missing = SANDBOX_ONLY.filter(n => uses(code, n));
  const lines: string[] = [];
  if (used.length) {
    const names = used.join(', ');
    lines.push('# this turn\'s code, with the run\'s ' + names + ' bound here; sub-calls are answered from the',
      '# run\'s record ({run}.workspace(live=True) sends them to the sub-model instead)',
      `${used.length === 1 ? names + ',' : names} = {run}.workspace().take(${used.map(n => `"${n}"`).join(', ')})`);
  }
  if (missing.length) {
    const one = missing.length === 1;
    lines.push(`# ${missing.join(', ')} ${one ? 'exists' : 'exist'} only in the run's sandbox: this cell fails where it `
      + `calls ${one ? 'it' : 'them'}`);
  }
  return lines.length ? `${lines.join('\n')}\n\n${code}` : code;
}

/**
 * What an insert button does when clicked (this view's buttons and the live widget's alike): ask the
 * notebook for a cell below the output; outside a notebook, copy the code instead.
 */
export function requestInsert(button: HTMLElement, label: string, code: string, runId?: string): void {
  const detail: InsertDetail = { code, handled: false, runId };
  button.dispatchEvent(new CustomEvent(INSERT_EVENT, { bubbles: true, detail }));
  if (detail.handled) {
    flash(button, label, 'cell inserted below');
  } else { // a trajectory file's viewer: nowhere to insert; the code goes to the clipboard, and the button says so
    button.textContent = 'no notebook here: copying the code…';
    copyText(insertedCode(detail.code, '_rlm', runId, ''), ok =>
      flash(button, label, ok ? 'no notebook here: code copied' : 'no notebook here: copy failed'));
  }
}

function flash(button: HTMLElement, label: string, text: string): void {
  button.textContent = text;
  setTimeout(() => (button.textContent = label), 2000);
}
