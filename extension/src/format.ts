/**
 * Text formatting and DOM helpers shared by the views. The rules match rlmnb/views (Python), so the live
 * widget, the exported HTML and this extension print the same figures the same way.
 */

import { Json, Run, Turn } from './fold';

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

/** A cost; calls without a price are counted apart, never shown as $0.0000. */
export function fmtCost(cost: number | null | undefined, unpriced = 0): string {
  if (unpriced && !cost) {
    return `unpriced (${plural(unpriced, 'call')})`;
  }
  let text = cost === null || cost === undefined ? '$?' : `$${cost.toFixed(4)}`;
  if (unpriced) {
    text += ` + ${fmtInt(unpriced)} unpriced`;
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

export function plural(n: number, word: string): string {
  return `${fmtInt(n)} ${word}${n === 1 ? '' : 's'}`;
}

export function percentile(sorted: number[], q: number): number | null {
  if (!sorted.length) {
    return null;
  }
  const rank = Math.max(0, Math.min(sorted.length - 1, Math.ceil((q / 100) * sorted.length) - 1));
  return sorted[rank];
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
  if (t.executed) {
    return null;
  }
  if (run.status === 'running') {
    return t.reply ? 'running…' : 'waiting for the model…';
  }
  const how = ENDED[run.status] ?? 'run ended';
  return t.reply ? `${how}: this code did not finish` : `${how} before the model replied`;
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

/** Copy text to the clipboard; `done` hears whether it worked. */
export function copyText(text: string, done: (ok: boolean) => void): void {
  const fallback = () => {
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
    done(ok);
  };
  if (navigator.clipboard?.writeText) {
    navigator.clipboard.writeText(text).then(() => done(true), fallback);
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
}

export function insertButton(label: string, code: () => string, title: string): HTMLElement {
  const button = h('button', 'rlmnb-button rlmnb-insert', label) as HTMLButtonElement;
  button.title = title;
  button.addEventListener('click', event => {
    event.preventDefault();
    event.stopPropagation();
    requestInsert(button, label, code());
  });
  return button;
}

/**
 * What an insert button does when clicked (this view's buttons and the live widget's alike): ask the
 * notebook for a cell below the output; outside a notebook, copy the code instead.
 */
export function requestInsert(button: HTMLElement, label: string, code: string): void {
  const detail: InsertDetail = { code, handled: false };
  button.dispatchEvent(new CustomEvent(INSERT_EVENT, { bubbles: true, detail }));
  if (detail.handled) {
    flash(button, label, 'cell inserted below');
  } else {
    copyText(detail.code.replace(/\{run\}/g, '_rlm'), ok =>
      flash(button, label, ok ? 'no notebook here: code copied' : 'no notebook here'));
  }
}

function flash(button: HTMLElement, label: string, text: string): void {
  button.textContent = text;
  setTimeout(() => (button.textContent = label), 2000);
}
