/**
 * The sub-call view of a trace tool: every sub-call of the run tree in one list that can be searched,
 * sorted (latency, tokens, cost) and filtered (errors, retried, rate-limited, cached, slow), a timeline of
 * the run (root replies and code on top, sub-calls as bars packed into lanes, so concurrency, retries and
 * slow outliers can be seen), and "open as DataFrame".
 */

import { Call, Group, Run, Tree } from './fold';
import { liveChoice } from './live';
import {
  copyButton, fmtCost, fmtCount, fmtInt, fmtSecs, h, imagesNote, insertButton, moreLabel, plural,
  promptCacheText, slowCutoff
} from './format';

export const PAGE_SIZE = 50; // calls listed before a "show more" button
const TIMELINE_WIDTH = 1000; // viewBox units; the SVG scales to the output's width

export interface Hit {
  call: Call;
  run: Run;
  turn: number;
  group: Group;
}

export function everyCall(tree: Tree): Hit[] {
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

/** Tags of a call: what the list and the timeline mark it with. */
export function callTags(c: Call, slow: number | null): string[] {
  const tags: string[] = [];
  if (!c.done) {
    tags.push('no reply');
  }
  if (c.error) {
    tags.push('error');
  }
  if (c.rateLimited) {
    tags.push(`rate-limited ×${c.rateLimited}`);
  }
  if (c.retries) {
    tags.push(`retried ×${c.retries}`);
  }
  if (c.journal) {
    tags.push('from the journal');
  } else if (c.cached) {
    tags.push(c.done && c.latency === null ? 'cached, no provider time' : 'cached');
  }
  if (slow !== null && c.latency !== null && c.latency > slow && !c.cached) {
    tags.push('slow');
  }
  return tags;
}

/** A vision sub-call's images: up to three thumbnails (PNG data URLs only: a record is untrusted) and a note. */
function imagesView(c: Call): HTMLElement | null {
  if (!c.images.length) {
    return null;
  }
  const box = h('span', 'rlmnb-images');
  for (const image of c.images.slice(0, 3)) {
    if (String(image.thumb ?? '').startsWith('data:image/png;base64,')) {
      const img = h('img', 'rlmnb-thumb') as HTMLImageElement;
      img.src = String(image.thumb);
      img.alt = '';
      box.appendChild(img);
    }
  }
  box.appendChild(document.createTextNode(imagesNote(c.images)));
  return box;
}

/** One sub-call: a line that opens to its prompt and reply, each with a copy button. */
export function callRow(c: Call, slow: number | null = null, where?: string, waiting = false): HTMLElement {
  const bits = [`#${fmtInt(c.index)}`];
  bits.push(!c.done ? (c.sent === null && c.queued === null && waiting ? 'queued' : 'no reply recorded')
    : c.latency !== null ? fmtSecs(c.latency) : 'no provider time');
  if (c.queued !== null && c.queued >= 0.001) {
    bits.push(`queued ${fmtSecs(c.queued)}`);
  }
  if (c.inputTokens !== null) {
    const cache = promptCacheText(c.cachedInputTokens, c.saved);
    bits.push(`${fmtCount(c.inputTokens)} → ${fmtCount(c.outputTokens)} tokens${cache ? ` (${cache})` : ''}`);
  }
  if (c.done) {
    bits.push(c.cost === null ? 'unpriced' : fmtCost(c.cost));
  }
  const tags = callTags(c, slow).map(tag => h('span', `rlmnb-tag rlmnb-tag-${tag.split(' ')[0]}`, tag));
  const preview = (c.error ?? c.reply ?? c.prompt).replace(/\s+/g, ' ').slice(0, 120);
  const summary = h('summary', 'rlmnb-summary', where ? h('span', 'rlmnb-where', where) : null,
    h('span', 'rlmnb-call-meta', bits.join(' · ')), imagesView(c), ...tags, h('span', 'rlmnb-preview', preview));
  const row = h('details', 'rlmnb-details rlmnb-call', summary) as HTMLDetailsElement;
  row.setAttribute('data-call-id', c.id);
  let built = false;
  row.addEventListener('toggle', () => {
    if (!row.open || built) {
      return;
    }
    built = true;
    const clipped = c.promptChars > c.prompt.length;
    const promptLabel = clipped
      ? `prompt: ${fmtInt(c.promptChars)} characters; the record keeps ${fmtInt(c.prompt.length)} of them (its start and end)`
      : `prompt: ${fmtInt(c.promptChars)} characters`;
    const pre = (text: string, cls: string) => {
      const el = h('pre', `rlmnb-pre ${cls}`);
      el.textContent = text;
      return el;
    };
    row.append(
      h('div', 'rlmnb-label', `${promptLabel}${c.model ? ` · ${c.model}` : ''} `,
        copyButton(clipped ? 'copy prompt (as recorded)' : 'copy prompt', () => c.prompt)),
      pre(c.prompt, 'rlmnb-prompt'),
      h('div', 'rlmnb-label', `${c.error ? 'error' : 'reply'} `,
        copyButton(c.error ? 'copy error' : 'copy reply', () => c.error ?? c.reply ?? '')),
      pre(c.error ?? c.reply ?? '', c.error ? 'rlmnb-error' : 'rlmnb-reply'));
  });
  return row;
}

function whereOf(tree: Tree, hit: Hit): string {
  return [hit.run.id === tree.rootId ? 'root run' : hit.run.label || `child run (depth ${hit.run.depth})`,
    `turn ${hit.turn}`, hit.group.kind === 'batch' ? 'llm_query_batched' : 'llm_query'].join(' · ');
}

const SORTS: { [key: string]: [string, (c: Call) => number] } = {
  order: ['in order sent', c => c.started],
  // latency is the provider's time: a call still out sorts first, a cached one (no provider time) last
  latency: ['slowest first', c => -(c.latency ?? (c.done ? 0 : Infinity))],
  queued: ['longest queued first', c => -(c.queued ?? 0)],
  tokens: ['most tokens first', c => -((c.inputTokens ?? 0) + (c.outputTokens ?? 0))],
  cost: ['costliest first', c => -(c.cost ?? 0)]
};

const FILTERS: { [key: string]: [string, (c: Call, slow: number | null) => boolean] } = {
  all: ['all calls', () => true],
  error: ['errors', c => !!c.error || !c.done],
  retried: ['retried', c => c.retries > 0],
  rate: ['rate-limited', c => c.rateLimited > 0],
  cached: ['cached', c => c.cached],
  slow: ['slow outliers', (c, slow) => slow !== null && c.latency !== null && c.latency > slow && !c.cached]
};

function select(options: { [key: string]: [string, unknown] }, cls: string, label: string): HTMLSelectElement {
  const el = h('select', `rlmnb-select ${cls}`) as HTMLSelectElement;
  el.setAttribute('aria-label', label);
  for (const [value, [text]] of Object.entries(options)) {
    const option = h('option', '', text) as HTMLOptionElement;
    option.value = value;
    el.appendChild(option);
  }
  return el;
}

/** What the search reads, said plainly: saved prompts may be excerpts. */
export function searchScope(hits: Hit[]): string {
  const clipped = hits.filter(({ call }) => call.promptChars > call.prompt.length).length;
  if (!clipped) {
    return `searches the whole prompt, reply and error of each of the ${plural(hits.length, 'sub-call')}`;
  }
  const kept = Math.max(...hits.filter(({ call }) => call.promptChars > call.prompt.length).map(({ call }) => call.prompt.length));
  return `searches replies and errors whole, and prompts as recorded: ${fmtInt(clipped)} of the ` +
    `${plural(hits.length, 'prompt')} are longer than the record keeps (about ${fmtInt(kept)} characters, ` +
    'their start and end), so a match in their middle is not found';
}

/** The trace panel of a run tree: toolbar, scope line, results and the timeline. */
export function traceView(tree: Tree): HTMLElement | null {
  const hits = everyCall(tree);
  if (!hits.length) {
    return null;
  }
  const latencies = hits.map(({ call }) => call.latency).filter((x): x is number => x !== null).sort((a, b) => a - b);
  const slow = slowCutoff(latencies);
  const input = h('input', 'rlmnb-search-input') as HTMLInputElement;
  input.type = 'search';
  input.placeholder = `search the ${plural(hits.length, 'sub-call')}`;
  input.setAttribute('aria-label', 'search sub-calls');
  input.setAttribute('data-lm-suppress-shortcuts', 'true'); // typing here never triggers notebook shortcuts
  const sort = select(SORTS, 'rlmnb-sort', 'sort sub-calls');
  const filter = select(FILTERS, 'rlmnb-filter', 'filter sub-calls');
  const timelineButton = h('button', 'rlmnb-button rlmnb-timeline-toggle', 'timeline') as HTMLButtonElement;
  const frame = insertButton('open as DataFrame', () => '{run}.to_frame()  # one row per sub-call',
    'insert a cell below with this run\'s sub-calls as a pandas DataFrame', tree.rootId ?? undefined);
  const status = h('span', 'rlmnb-search-status rlmnb-muted');
  const scope = h('div', 'rlmnb-scope rlmnb-muted', searchScope(hits));
  const results = h('div', 'rlmnb-search-results');
  const timelineBox = h('div', 'rlmnb-timeline-box');
  const byId = new Map(hits.map(hit => [hit.call.id, hit]));
  let matching: Set<string> | null = null; // the calls the search and filter keep (null: all), for the timeline

  const show = (found: Hit[], label: string) => {
    results.textContent = '';
    status.textContent = label;
    const more = h('button', 'rlmnb-more');
    let shown = 0;
    const page = () => {
      for (const hit of found.slice(shown, shown + PAGE_SIZE)) {
        results.insertBefore(callRow(hit.call, slow, whereOf(tree, hit), tree.totals.queueRecorded), more);
      }
      shown = Math.min(found.length, shown + PAGE_SIZE);
      const left = found.length - shown;
      more.textContent = moreLabel(PAGE_SIZE, left);
      more.style.display = left > 0 ? '' : 'none';
    };
    more.addEventListener('click', page);
    results.appendChild(more);
    page();
  };
  const drawTimeline = () => {
    timelineBox.textContent = '';
    timelineBox.appendChild(timelineView(tree, hits, slow, id => {
      const hit = byId.get(id);
      if (hit) {
        show([hit], `sub-call #${fmtInt(hit.call.index)} of ${whereOf(tree, hit)} (picked on the timeline)`);
        const row = results.querySelector('details') as HTMLDetailsElement | null;
        if (row) {
          row.open = true;
        }
      }
    }, matching));
  };
  const update = () => {
    const query = input.value.trim().toLowerCase();
    const keep = FILTERS[filter.value][1];
    let found = hits.filter(({ call }) => keep(call, slow));
    if (query) {
      found = found.filter(({ call }) => call.prompt.toLowerCase().includes(query) ||
        (call.reply ?? '').toLowerCase().includes(query) || (call.error ?? '').toLowerCase().includes(query));
    }
    matching = query || filter.value !== 'all' ? new Set(found.map(({ call }) => call.id)) : null;
    if (timelineBox.firstChild) {
      drawTimeline(); // the timeline shows what the list shows: the calls left out are faded
    }
    if (!query && filter.value === 'all' && sort.value === 'order') {
      results.textContent = '';
      status.textContent = '';
      return;
    }
    const key = SORTS[sort.value][1];
    found = found.map((hit, i) => ({ hit, i, k: key(hit.call) }))
      .sort((a, b) => a.k - b.k || a.i - b.i).map(x => x.hit);
    const noun = query ? 'matching sub-call' : 'sub-call';
    show(found, `${plural(found.length, noun)}${filter.value !== 'all' ? ` · ${FILTERS[filter.value][0]}` : ''}`);
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(update, 150);
  });
  sort.addEventListener('change', update);
  filter.addEventListener('change', update);
  timelineButton.addEventListener('click', () => {
    if (timelineBox.firstChild) {
      timelineBox.textContent = '';
      timelineButton.classList.remove('rlmnb-on');
      return;
    }
    timelineButton.classList.add('rlmnb-on');
    drawTimeline();
  });
  const counts = [plural(hits.length, 'sub-call')];
  const errors = hits.filter(({ call }) => call.error).length;
  const retried = hits.filter(({ call }) => call.retries).length;
  if (errors) {
    counts.push(`${fmtInt(errors)} failed`);
  }
  if (retried) {
    counts.push(`${fmtInt(retried)} retried`);
  }
  const toolbar = h('div', 'rlmnb-toolbar', h('span', 'rlmnb-label-inline', counts.join(' · ')), input, sort, filter,
    timelineButton, frame, status);
  const chosen = liveChoice(tree.rootId); // made in the live widget while the run went on: kept here
  if (chosen) {
    input.value = chosen.search;
    sort.value = chosen.sort in SORTS ? chosen.sort : 'order';
    filter.value = chosen.filter in FILTERS ? chosen.filter : 'all';
    update();
    if (chosen.timeline) {
      timelineButton.click();
    }
  }
  return h('div', 'rlmnb-trace', toolbar, scope, timelineBox, results);
}

interface Bar {
  start: number;
  end: number;
  cls: string;
  title: string;
  id?: string;
}

function svg(tag: string, attrs: { [key: string]: string | number }): SVGElement {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [key, value] of Object.entries(attrs)) {
    el.setAttribute(key, String(value));
  }
  return el;
}

/** Lanes: each bar goes into the first lane free at its start, so the lane count is the peak concurrency. */
function pack(bars: Bar[]): Bar[][] {
  const lanes: Bar[][] = [];
  const ends: number[] = [];
  for (const bar of [...bars].sort((a, b) => a.start - b.start)) {
    let lane = ends.findIndex(end => end <= bar.start);
    if (lane < 0) {
      lane = ends.length;
      ends.push(0);
      lanes.push([]);
    }
    ends[lane] = bar.end;
    lanes[lane].push(bar);
  }
  return lanes;
}

const QUEUE_COLUMNS = 250; // the queue band's resolution, as in rlmnb.views._timeline

/** The most calls queued at once in each of `columns` equal slices of the run (a -1 goes first at equal times). */
export function queueLevels(changes: [number, number][], t0: number, span: number, columns = QUEUE_COLUMNS): number[] {
  const sorted = [...changes].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const levels: number[] = [];
  let count = 0;
  let i = 0;
  for (let col = 0; col < columns; col++) {
    const colEnd = t0 + ((col + 1) / columns) * span;
    let peak = count;
    while (i < sorted.length && (sorted[i][0] < colEnd || col === columns - 1)) {
      count += sorted[i][1];
      peak = Math.max(peak, count);
      i++;
    }
    levels.push(peak);
  }
  return levels;
}

/**
 * The run over time: root replies and code runs on the top lane, sub-calls below (running time), the queue between.
 * `shown`: the ids of the calls the search and filter keep (null: all); the others are drawn faded, in their lanes.
 */
export function timelineView(tree: Tree, hits: Hit[], slow: number | null, pick: (id: string) => void,
  shown: Set<string> | null = null): HTMLElement {
  const t0 = tree.firstTs;
  const t1 = Math.max(tree.lastTs, t0 + 1e-3);
  const span = t1 - t0;
  const x = (t: number) => ((Math.max(t0, Math.min(t1, t)) - t0) / span) * TIMELINE_WIDTH;
  const top: Bar[] = tree.spans.map(s => ({
    start: s.start, end: s.end, cls: s.kind === 'reply' ? 'rlmnb-bar-root' : 'rlmnb-bar-code',
    title: `${s.kind === 'reply' ? 'root model reply' : 'code'} · turn ${s.turn} · ${fmtSecs(s.end - s.start)}`
  }));
  // a bar is a call's running time, from its slot to its reply; the wait for a slot is the queue band
  const recorded = tree.totals.queueRecorded;
  const queue: [number, number][] = [];
  const calls: Bar[] = [];
  for (const { call, turn } of hits) {
    const end = call.finished ?? tree.lastTs;
    let slot: number | null = call.started; // a run saved before slots were recorded: the whole call
    if (recorded) {
      slot = call.sent ?? (call.done ? (call.latency !== null ? end - call.latency : end) : null);
      queue.push([call.started, 1], [slot ?? tree.lastTs, -1]);
    }
    if (slot === null) {
      continue; // still waiting for a slot when the record ends
    }
    const tags = callTags(call, slow);
    const cls = call.error || !call.done ? 'rlmnb-bar-error' : call.rateLimited ? 'rlmnb-bar-rate'
      : call.retries ? 'rlmnb-bar-retried' : call.cached ? 'rlmnb-bar-cached' : tags.includes('slow') ? 'rlmnb-bar-slow'
      : 'rlmnb-bar-ok';
    const took = !call.done ? 'no reply' : call.latency !== null ? fmtSecs(call.latency) : 'no provider time';
    calls.push({
      start: slot, end, cls: shown && !shown.has(call.id) ? `${cls} rlmnb-bar-faded` : cls, id: call.id,
      title: `sub-call #${call.index} · turn ${turn} · ${took}` +
        (call.queued ? ` · queued ${fmtSecs(call.queued)}` : '') + (tags.length ? ` · ${tags.join(', ')}` : '')
    });
  }
  const lanes = pack(calls);
  const levels = queue.length ? queueLevels(queue, t0, span) : [];
  const peakQueued = Math.max(0, ...levels);
  const laneHeight = lanes.length > 60 ? 3 : lanes.length > 20 ? 5 : 8;
  const gap = 1;
  const topHeight = 10;
  const bandHeight = peakQueued ? 18 : 0;
  const base = topHeight + 6 + (bandHeight ? bandHeight + 4 : 0);
  const height = base + lanes.length * (laneHeight + gap) + 14;
  const root = svg('svg', { viewBox: `0 0 ${TIMELINE_WIDTH} ${height}`, preserveAspectRatio: 'none', class: 'rlmnb-timeline',
    width: '100%', height });
  const draw = (bar: Bar, y: number, barHeight: number) => {
    const left = x(bar.start);
    const rect = svg('rect', { x: left.toFixed(2), y, width: Math.max(0.8, x(bar.end) - left).toFixed(2), height: barHeight,
      class: `rlmnb-bar ${bar.cls}` });
    const title = svg('title', {});
    title.textContent = bar.title;
    rect.appendChild(title);
    if (bar.id) {
      rect.setAttribute('data-call-id', bar.id);
    }
    root.appendChild(rect);
  };
  for (const bar of top) {
    draw(bar, 0, topHeight);
  }
  if (bandHeight) { // calls waiting for a slot, as a step area: its height is the number queued
    const bottom = topHeight + 6 + bandHeight;
    const step = TIMELINE_WIDTH / levels.length;
    const y = (level: number) => (bottom - (level / peakQueued) * bandHeight).toFixed(1);
    const points = levels.map((level, i) => `L${(i * step).toFixed(1)},${y(level)} L${((i + 1) * step).toFixed(1)},${y(level)}`);
    const band = svg('path', { d: `M0,${bottom} ${points.join(' ')} L${TIMELINE_WIDTH},${bottom} Z`, class: 'rlmnb-queue' });
    const title = svg('title', {});
    title.textContent = `calls queued for a concurrency slot (at most ${fmtInt(peakQueued)} at once)`;
    band.appendChild(title);
    root.appendChild(band);
  }
  lanes.forEach((lane, i) => {
    for (const bar of lane) {
      draw(bar, base + i * (laneHeight + gap), laneHeight);
    }
  });
  for (const [frac, anchor] of [[0, 'start'], [0.5, 'middle'], [1, 'end']] as [number, string][]) {
    const label = svg('text', { x: frac * TIMELINE_WIDTH, y: height - 2, 'text-anchor': anchor, class: 'rlmnb-axis' });
    label.textContent = fmtSecs(frac * span);
    root.appendChild(label);
  }
  root.addEventListener('click', event => {
    const id = (event.target as Element).getAttribute?.('data-call-id');
    if (id) {
      pick(id);
    }
  });
  const legend = h('div', 'rlmnb-legend rlmnb-muted',
    ...[['rlmnb-bar-root', 'root model'], ['rlmnb-bar-code', 'code'], ['rlmnb-bar-ok', 'sub-call (provider time)'],
      ['rlmnb-bar-slow', 'slow outlier (above p95, 1.5× median)'], ['rlmnb-bar-retried', 'retried'], ['rlmnb-bar-rate', 'rate-limited'],
      ['rlmnb-bar-cached', 'cached'], ['rlmnb-bar-error', 'error'],
      ...(peakQueued ? [['rlmnb-queue', 'queued (waiting for a slot)']] : [])]
      .map(([cls, text]) => h('span', 'rlmnb-legend-item', h('span', `rlmnb-swatch ${cls}`), text)),
    h('span', '', `peak ${plural(lanes.length, 'call')} in flight` +
      (peakQueued ? ` · peak ${fmtInt(peakQueued)} queued` : '') + ' · click a bar to show its call' +
      (shown ? ` · ${fmtInt(shown.size)} of ${plural(hits.length, 'sub-call')} match the search and filter, the rest faded`
        : '')));
  const box = h('div', 'rlmnb-timeline-wrap', root, legend);
  box.setAttribute('data-shown', String(shown ? shown.size : hits.length));
  box.setAttribute('data-lanes', String(lanes.length));
  box.setAttribute('data-queued', String(peakQueued));
  return box;
}
