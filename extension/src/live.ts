/**
 * The live widget's buttons. rlmnb's live view is built from ipywidgets core widgets, which have no
 * clipboard or notebook access, and a click the kernel must handle waits until the cell has finished. So
 * its copy and insert buttons are plain HTML carrying data attributes (rlmnb.views._actions), and one
 * click handler on the document, installed when the app starts, acts on them at once, while the run
 * goes on, through the same functions as the buttons of the finished view (copyFrom, requestInsert).
 *
 *   data-rlmnb-action="copy"    copy the text of the <pre> in the button's [data-rlmnb-block]
 *   data-rlmnb-action="insert"  insert a code cell below the output: data-rlmnb-code ("{run}" is the
 *                               run's variable), or the text of the <pre> in the button's block
 *
 * The handler runs in the capture phase and marks the click handled (preventDefault), so the copy
 * button's own inline fallback (for front ends without this extension) steps aside.
 *
 * A live HTML piece is redrawn whole when the run changes it (ipywidgets sets its innerHTML), which would
 * close a list of calls or a call the user has just opened. So the <details> carrying data-rlmnb-key
 * are remembered when opened, and opened again after each redraw of the piece they sit in.
 *
 * The live trace toolbar (rlmnb/_notebook/trace_panel.py, .rlmnb-live-toolbar with data-rlmnb-run) has the
 * finished view's search, sort, filter and timeline. The calls are in the kernel, busy with the run, so the
 * list waits for the end; what the user chooses is kept per run (liveChoice) and the finished view, which
 * takes the widget's place when the run ends, opens with it (trace.ts).
 */

import { copyFrom, requestInsert, runnableCode } from './format';

export const ACTION = 'data-rlmnb-action';
export const LIVE_VIEW = '.rlmnb-widget';

function blockText(button: Element): string | null {
  const pre = button.closest('[data-rlmnb-block]')?.querySelector('pre');
  return pre ? pre.textContent ?? '' : null;
}

/** Handle one click; true when it was a live widget's button. */
export function handleLiveClick(event: MouseEvent): boolean {
  const target = event.target as Element | null;
  const button = target?.closest?.(`[${ACTION}]`) as HTMLElement | null;
  if (!button || !button.closest(LIVE_VIEW)) {
    return false;
  }
  event.preventDefault();
  event.stopPropagation();
  // the label to restore after "copied" / "cell inserted below", kept from the first click
  const label = button.getAttribute('data-rlmnb-label') ?? button.textContent ?? '';
  button.setAttribute('data-rlmnb-label', label);
  const action = button.getAttribute(ACTION);
  if (action === 'copy') {
    const text = blockText(button);
    if (text !== null) {
      copyFrom(button, label, text);
    }
  } else if (action === 'insert') {
    const fixed = button.getAttribute('data-rlmnb-code');
    const code = fixed ?? blockText(button);
    if (code !== null) {
      requestInsert(button, label, fixed === null ? runnableCode(code) : code); // a turn's code: runnable here
    }
  }
  return true;
}

/** What was chosen in a run's live toolbar: the finished view of that run starts from it. */
export interface Choice {
  search: string;
  sort: string;
  filter: string;
  timeline: boolean;
}

export const CHOICE = 'data-rlmnb-choice';
export const CHOICE_REASON = 'kept: the list shows when the run ends (the kernel is busy with it)';
// one store for the page, whichever bundle chunk asks (the view and the plugin are two entry points)
const STORE = Symbol.for('rlmnb.liveChoices');
function choices(): Map<string, Choice> {
  const holder = globalThis as unknown as { [STORE]?: Map<string, Choice> };
  return (holder[STORE] ??= new Map());
}

/** The choice made in the live toolbar of run `runId`, if any (the finished view applies it once). */
export function liveChoice(runId: string | null | undefined): Choice | undefined {
  return runId ? choices().get(runId) : undefined;
}

/** Keep what the user changed in a live toolbar; say it is kept. True when it was one. */
export function handleLiveChoice(event: Event): boolean {
  const control = (event.target as Element | null)?.closest?.(`[${CHOICE}]`) as HTMLElement | null;
  const toolbar = control?.closest('.rlmnb-live-toolbar');
  const runId = toolbar?.getAttribute('data-rlmnb-run');
  if (!control || !toolbar || !runId || !toolbar.closest(LIVE_VIEW)) {
    return false;
  }
  const kind = control.getAttribute(CHOICE);
  const was = choices().get(runId) ?? { search: '', sort: 'order', filter: 'all', timeline: false };
  const now = { ...was };
  if (kind === 'timeline') {
    if (event.type !== 'click') {
      return false;
    }
    now.timeline = !was.timeline;
    control.classList.toggle('rlmnb-on', now.timeline);
  } else if (kind === 'search' || kind === 'sort' || kind === 'filter') {
    now[kind] = (control as HTMLInputElement | HTMLSelectElement).value;
  } else {
    return false;
  }
  choices().set(runId, now);
  const status = toolbar.querySelector('.rlmnb-search-status');
  if (status) {
    const chosen = now.search.trim() || now.sort !== 'order' || now.filter !== 'all' || now.timeline;
    status.textContent = chosen ? CHOICE_REASON : '';
  }
  return true;
}

const KEY = 'data-rlmnb-key';
const HTML_PIECE = '.widget-html-content'; // the element an ipywidgets HTML widget redraws
const opened = new WeakMap<Element, Set<string>>(); // per live HTML piece: the keys of its open <details>

function reopen(piece: Element, keys: Set<string>): void {
  for (const details of piece.querySelectorAll<HTMLDetailsElement>(`details[${KEY}]`)) {
    if (!details.open && keys.has(details.getAttribute(KEY) ?? '')) {
      details.open = true;
    }
  }
}

/** Remember what the user opened or closed in a live HTML piece; watch the piece for redraws. */
export function handleLiveToggle(event: Event): void {
  const details = event.target;
  if (!(details instanceof HTMLDetailsElement) || !details.hasAttribute(KEY)) {
    return;
  }
  const piece = details.closest(HTML_PIECE);
  if (!piece || !piece.closest(LIVE_VIEW)) {
    return;
  }
  let keys = opened.get(piece);
  if (!keys) {
    const known = new Set<string>();
    opened.set(piece, known);
    new MutationObserver(() => reopen(piece, known)).observe(piece, { childList: true });
    keys = known;
  }
  const key = details.getAttribute(KEY) ?? '';
  if (details.open) {
    keys.add(key);
  } else {
    keys.delete(key);
  }
}

/** Install the delegated handlers (idempotent per document). */
export function installLiveButtons(doc: Document): void {
  const marked = doc.documentElement;
  if (marked.hasAttribute('data-rlmnb-live-buttons')) {
    return;
  }
  marked.setAttribute('data-rlmnb-live-buttons', '');
  doc.addEventListener('click', event => handleLiveClick(event), true);
  doc.addEventListener('toggle', event => handleLiveToggle(event), true); // toggle does not bubble: capture
  for (const type of ['input', 'change', 'click']) {
    doc.addEventListener(type, event => handleLiveChoice(event), true);
  }
}
