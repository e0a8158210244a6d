/**
 * DataFrames in a turn's output, drawn as the notebook draws a DataFrame where the model read text: the
 * twin of rlmnb/views/_frames.py. The sandbox notes each DataFrame or Series the code printed beside the
 * exact text it wrote (Turn.tables); the output is cut where those texts are, each becomes a styled,
 * scrollable table with its shape, and the text the model read stays one click away. Cells go in as text.
 */

import { Table } from './fold';
import { Child, fmtInt, h } from './format';

/** The output as text and table parts, in order (blank text between parts dropped). */
export function outputParts(stdout: string, tables: Table[]): (string | Table)[] {
  const parts: (string | Table)[] = [];
  let at = 0;
  for (const table of tables) {
    const found = table.text ? stdout.indexOf(table.text, at) : -1;
    if (found < 0) {
      continue;
    }
    if (stdout.slice(at, found).trim()) {
      parts.push(stdout.slice(at, found));
    }
    parts.push(table);
    at = found + table.text.length;
  }
  if (stdout.slice(at).trim() || !parts.length) {
    parts.push(stdout.slice(at));
  }
  return parts;
}

function count(n: number, word: string): string {
  return `${fmtInt(n)} ${word}${n === 1 ? '' : 's'}`;
}

/** "1,000 rows × 3 columns (the first 50 rows shown)", as pandas says a frame's shape. */
export function shapeText(t: Table): string {
  const [rows, cols] = t.shape.length === 2 ? t.shape : [t.rows.length, t.columns.length];
  const cut = [t.rows.length < rows ? `the first ${fmtInt(t.rows.length)} rows` : '',
    t.columns.length < cols ? `the first ${fmtInt(t.columns.length)} columns` : ''].filter(Boolean);
  return `${count(rows, 'row')} × ${count(cols, 'column')}${cut.length ? ` (${cut.join(' and ')} shown)` : ''}`;
}

/** One recorded DataFrame: the table, its shape, and the text the model read (closed). */
export function frameView(t: Table, textBlock: (text: string) => Child): HTMLElement {
  const head = h('tr', '', h('th', ''), ...t.columns.map(c => h('th', '', c)));
  const body = t.rows.map((row, i) => h('tr', '', h('th', '', t.index[i] ?? ''),
    ...row.map(v => h('td', '', v))));
  const text = h('details', 'rlmnb-details rlmnb-frame-text',
    h('summary', 'rlmnb-summary rlmnb-muted rlmnb-small', `${shapeText(t)} · as text (what the model read)`));
  let built = false;
  text.addEventListener('toggle', () => {
    if ((text as HTMLDetailsElement).open && !built) {
      built = true;
      const block = textBlock(t.text);
      if (block) {
        text.appendChild(typeof block === 'string' ? document.createTextNode(block) : block);
      }
    }
  });
  const box = h('div', 'rlmnb-frame', h('div', 'rlmnb-frame-box', h('table', 'rlmnb-frame-table', h('thead', '', head),
    h('tbody', '', ...body))), text);
  box.setAttribute('data-shape', t.shape.join('x'));
  return box;
}
