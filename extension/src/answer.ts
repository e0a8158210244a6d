/**
 * An answer shown as what it is: text as Markdown, a table (a list of records, or columns of equal length)
 * as a table, anything else as JSON pretty-printed in the key order the run produced.
 */

import { Json, Run } from './fold';
import { Child, copyButton, fmtInt, h } from './format';

export const TABLE_ROWS = 200; // rows of a table answer shown before "N more rows"

/** What the host offers: JupyterLab's Markdown parser and HTML sanitizer (absent in plain tests). */
export interface Env {
  markdown?: (text: string) => Promise<string>;
  sanitize?: (html: string) => string;
}

type Row = { [key: string]: Json };

function isRecord(value: Json | undefined): value is Row {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}

/** Column names and rows when the answer is a table, else null. */
export function asTable(answer: Json | undefined): { columns: string[]; rows: Json[][] } | null {
  if (Array.isArray(answer) && answer.length && answer.every(isRecord)) {
    const columns: string[] = [];
    const seen = new Set<string>();
    for (const row of answer as Row[]) {
      for (const key of Object.keys(row)) {
        if (!seen.has(key)) {
          seen.add(key);
          columns.push(key);
        }
      }
    }
    if (columns.length > 50 || (answer as Row[]).some(row => Object.values(row).some(v => v !== null && typeof v === 'object'))) {
      return null; // nested records read better as JSON
    }
    return { columns, rows: (answer as Row[]).map(row => columns.map(c => (c in row ? row[c] : null))) };
  }
  if (isRecord(answer)) {
    const columns = Object.keys(answer);
    const lists = columns.map(c => answer[c]);
    if (columns.length && columns.length <= 50 && lists.every(Array.isArray)) {
      const length = (lists[0] as Json[]).length;
      if (length && lists.every(l => (l as Json[]).length === length &&
        (l as Json[]).every(v => v === null || typeof v !== 'object'))) {
        return { columns, rows: Array.from({ length }, (_, i) => lists.map(l => (l as Json[])[i])) };
      }
    }
  }
  return null;
}

function cell(value: Json): string {
  return value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value);
}

function tableView(table: { columns: string[]; rows: Json[][] }): HTMLElement {
  const head = h('tr', '', ...table.columns.map(c => h('th', '', c)));
  const body = table.rows.slice(0, TABLE_ROWS).map(row => h('tr', '', ...row.map(v => {
    const td = h('td', '', cell(v));
    if (typeof v === 'number') {
      td.classList.add('rlmnb-num');
    }
    return td;
  })));
  const more = table.rows.length > TABLE_ROWS
    ? h('div', 'rlmnb-muted', `${fmtInt(table.rows.length - TABLE_ROWS)} more rows (the run's answer has them all)`)
    : null;
  return h('div', 'rlmnb-table-box', h('table', 'rlmnb-table', h('thead', '', head), h('tbody', '', ...body)), more);
}

function markdownView(text: string, env: Env): HTMLElement {
  const box = h('div', 'rlmnb-markdown');
  box.textContent = text; // shown at once as text; replaced by the rendered Markdown when it is ready
  if (env.markdown && env.sanitize) {
    const sanitize = env.sanitize;
    env.markdown(text).then(html => {
      box.innerHTML = sanitize(html); // sanitised: an answer may quote hostile data
      box.setAttribute('data-rendered', 'markdown');
    }, () => undefined);
  }
  return box;
}

/** The answer box of a run, or null when it has none. */
export function answerView(run: Run, env: Env): HTMLElement | null {
  if (run.answer === undefined || (run.answer === null && run.status !== 'submitted')) {
    return null;
  }
  const title = run.verified === false ? 'Answer (unverified)' : run.status === 'fallback' ? 'Answer (fallback)' : 'Answer';
  let answer = run.answer;
  if (run.answerJson !== null) {
    try {
      answer = JSON.parse(run.answerJson); // the run's own key order (a saved notebook sorts object keys)
    } catch {
      answer = run.answer;
    }
  }
  let body: Child;
  let kind: string;
  let raw: string;
  const table = asTable(answer);
  if (typeof answer === 'string') {
    kind = 'markdown';
    raw = answer;
    body = markdownView(answer, env);
  } else if (table) {
    kind = 'table';
    raw = run.answerJson ?? JSON.stringify(answer, null, 2);
    body = tableView(table);
  } else {
    kind = 'json';
    raw = run.answerJson ?? JSON.stringify(answer, null, 2) ?? 'null';
    const pre = h('pre', 'rlmnb-pre rlmnb-answer-text rlmnb-json');
    pre.textContent = raw;
    body = pre;
  }
  const box = h('div', `rlmnb-answer rlmnb-status-${run.status}`, h('b', 'rlmnb-answer-title', title), ' ',
    copyButton('copy', () => raw), body);
  box.setAttribute('data-kind', kind);
  return box;
}
