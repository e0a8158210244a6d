/**
 * Fold a recorded trajectory (the event list rlmnb saves under application/vnd.rlmnb.trajectory+json)
 * into a run tree: runs -> turns -> sub-call groups -> calls, child runs under the turn that started them.
 *
 * The browser twin of the Python fold (`rlmnb.views.RunTree`): it reads the same events, so a saved notebook
 * or an exported trajectory file shows the same figures with or without a kernel. `fold`, `groupFigures` and
 * `runElapsed` give every figure a view shows; tests/views/test_fold_parity.py folds recorded runs both ways
 * and checks that each figure agrees.
 */

import { ASKED_AGAIN, percentile, policyNote } from './format';

/**
 * A record made before policies were (no policy_acted): the guards evidence_check turned off then, whose send-backs
 * said so (the same text as rlmnb/views/_fold.py); a run that records policies says it on the policy's send-back.
 */
const EVIDENCE_GUARDS = new Set(['evidence', 'copy', 'marked', 'reading', 'guessed', 'partial']);
const EVIDENCE_HINT =
  ' (you can turn these checks off: RLM(..., evidence_check=False) or %config RLMMagics.evidence_check = False)';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Event = { [key: string]: any };

/** One image a sub-call sent, as recorded (rlmnb._ground.images Image.describe()): size, type, a PNG thumbnail. */
export interface SentImage {
  width?: number;
  height?: number;
  mime?: string;
  thumb?: string;
}

export interface Call {
  index: number;
  id: string;
  model: string;
  prompt: string;
  promptChars: number;
  done: boolean;
  reply: string | null;
  error: string | null;
  inputTokens: number | null;
  outputTokens: number | null;
  cost: number | null;
  images: SentImage[]; // the images sent with the prompt (a vision sub-call); [] for text only
  latency: number | null; // the provider's time (retries included); null: no reply yet, or none (cached)
  queued: number | null; // seconds waiting for a concurrency slot; null in runs saved before it was recorded
  cached: boolean;
  journal: boolean; // a resumed run served it from its journal
  cachedInputTokens: number; // input tokens the provider read from its prompt cache
  saved: number; // what those saved against the full input rate (USD)
  started: number; // event timestamps (seconds): the timeline's bars
  sent: number | null; // when it got its slot (sub_call_sent); null: not (yet) sent, or not recorded
  finished: number | null;
  retries: number; // attempts beyond the first (429s, 5xx, timeouts), as the adapter reported them
  rateLimited: number; // of those, answered "429 rate limited"
  runId: string;
  turn: number;
}

/** A root-model reply or a code execution: the timeline's top lane. */
export interface Span {
  kind: 'reply' | 'code';
  runId: string;
  turn: number;
  start: number;
  end: number;
}

export interface MapFigures {
  operator: string;
  items: number | null;
  packs: number;
  reasks: number;
  failures: number;
  stopped: string | null;
}

export interface Group {
  key: string;
  kind: 'batch' | 'single' | 'map';
  map?: MapFigures; // kind 'map': an llm_map / llm_classify / llm_filter, all its rounds in one group
  size: number;
  model: string;
  calls: Call[];
  errors: number;
  refused: string | null;
  wall: number | null;
}

/** A DataFrame or Series the code printed: the text written to stdout and its first rows (runner.table_record). */
export interface Table {
  text: string;
  shape: [number, number];
  columns: string[];
  index: string[];
  rows: string[][];
  series: boolean;
}

export interface Turn {
  turn: number;
  maxTurns: number | null;
  reply: string;
  replied: boolean; // the model answered this turn (its reply may be empty)
  replyTokens: [number, number] | null;
  replyCache: [number, number]; // [input tokens read from the provider's prompt cache, USD saved]
  replyLatency: number | null;
  code: string;
  stdout: string;
  stderr: string;
  error: string | null;
  errorType: string | null;
  duration: number | null;
  timedOut: boolean;
  restarted: boolean;
  executed: boolean;
  submitted: boolean;
  tables: Table[]; // DataFrames the code printed (CodeExecuted.tables): drawn as tables where their text is
  streamedStdout: string; // what the code printed while it ran (code_output), until its result came
  streamedStderr: string;
  told: string; // a timed-out turn: the sentence the model was told (its observation's [timeout] and [notice])
  notes: [string, string][];
  groups: Group[];
  children: string[];
  sentBack: string[]; // policies whose send-back's guard_rejected is still to come (it adds no second note)
}

export interface Run {
  id: string;
  parentId: string | null;
  parentTurn: number | null;
  depth: number;
  label: string;
  question: string;
  model: string;
  subModel: string;
  sandbox: string;
  config: { [key: string]: any };
  status: string;
  answer: Json | undefined;
  answerJson: string | null; // the answer as Python wrote it (key order kept: notebooks save JSON sorted)
  reason: string;
  error: string | null;
  verified: boolean | null;
  usage: { [key: string]: any } | null;
  started: number;
  finished: number | null;
  turns: Map<number, Turn>;
  notes: string[];
  children: string[];
  policiesRecorded: boolean; // a policy_acted was seen: its notes replace the model_reply's asked-again ones
}

export interface Totals {
  subCalls: number;
  subDone: number;
  subSent: number; // calls that got a concurrency slot
  subSentDone: number; // of those, calls that finished
  queueRecorded: boolean; // slots were recorded (a sub_call_sent or a queued_s seen): queued can be told apart
  subErrors: number;
  inputTokens: number;
  outputTokens: number;
  cost: number;
  unpriced: number;
  cachedInputTokens: number; // read from the provider's prompt cache
  saved: number; // what the prompt cache saved (USD)
  rootCalls: number;
  concurrency: number | null;
}

/** A resumed run's mark (a run_resumed event): the journal, what it served, and where the run went live:
 * before turn `turn`, inside it after its reply when `within`, after the last turn when `turn` is null. */
export interface Resumed {
  source: string;
  rootAnswers: number;
  subAnswers: number;
  servedRoot: number;
  servedSub: number;
  live: boolean;
  runId: string;
  turn: number | null;
  within: boolean;
}

export interface Tree {
  rootId: string | null;
  runs: Map<string, Run>;
  totals: Totals;
  events: number;
  firstTs: number;
  lastTs: number;
  opened: number | null; // when the user's cell started (the live widget's clock), when recorded
  spans: Span[];
  resumed: Resumed | null;
  snapshot: Snapshot | null; // saved while the run was still going (views/_snapshot.py): where to go on from
}

/** The note of a run saved while it was still going: its journal and the cell line that continues it. */
export interface Snapshot {
  journal: string;
  resume: string;
}

const STREAM_KEEP = 20000; // characters of a turn's streamed output kept per stream (the Python fold's STREAM_KEEP)

/** What a timed-out turn's observation told the model about it: its [timeout] and [notice] lines. */
export function toldSentence(observation: string): string {
  return (observation || '').split('\n').filter(line => line.startsWith('[timeout] ') || line.startsWith('[notice] '))
    .map(line => line.slice(line.indexOf('] ') + 2)).join('\n');
}

/** The event list of a payload: a trajectory, a saved RunResult ({..., trajectory}) or a bare list. */
export function eventsOf(payload: unknown): Event[] {
  let data: any = payload;
  if (typeof data === 'string') {
    data = JSON.parse(data);
  }
  if (data && !Array.isArray(data) && typeof data === 'object' && 'trajectory' in data && !('events' in data)) {
    data = data.trajectory;
  }
  const events = Array.isArray(data) ? data : data?.events;
  if (!Array.isArray(events)) {
    throw new Error('no event list found: expected an rlmnb trajectory ({"schema_version", "events"})');
  }
  return events.filter(e => e && typeof e === 'object' && typeof e.kind === 'string');
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function strings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every(v => typeof v === 'string');
}

/** A recorded table with the shape the views draw (anything else stays text). */
function isTable(value: unknown): value is Table {
  const t = value as Table;
  return !!t && typeof t === 'object' && typeof t.text === 'string' && strings(t.columns) && strings(t.index)
    && Array.isArray(t.rows) && t.rows.every(strings) && Array.isArray(t.shape);
}

/**
 * [in flight, queued]: calls holding a concurrency slot, and calls started but still waiting for one.
 * A run saved before slots were recorded counts every unfinished call as in flight, as it did.
 */
export function outCounts(started: number, finished: number, sent: number, sentDone: number,
  recorded: boolean): [number, number] {
  if (!recorded) {
    return [started - finished, 0];
  }
  const inFlight = sent - sentDone;
  return [inFlight, Math.max(0, started - finished - inFlight)];
}

/** The figures of one sub-call group, as every view shows them. */
export interface GroupFigures {
  started: number;
  finished: number;
  inFlight: number;
  queued: number;
  retried: number;
  rateLimited: number;
  cached: number;
  journal: number; // of those, served from a resumed run's journal
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number; // read from the provider's prompt cache
  saved: number; // what the prompt cache saved (USD)
  cost: number;
  unpriced: number; // finished calls without a price
  p50: number | null; // provider time of the calls that had one
  p95: number | null;
  queuedP50: number | null; // time waiting for a concurrency slot, where recorded
  queuedP95: number | null;
}

/** Whether this group's calls record their concurrency slots (runs saved before that do not). */
export function slotsRecorded(g: Group): boolean {
  return g.calls.some(c => c.sent !== null || c.queued !== null);
}

function sorted(values: (number | null)[]): number[] {
  return values.filter((x): x is number => x !== null).sort((a, b) => a - b);
}

export function groupFigures(g: Group): GroupFigures {
  const latencies = sorted(g.calls.map(c => c.latency));
  const waits = sorted(g.calls.map(c => c.queued));
  const finished = g.calls.filter(c => c.done).length;
  const [inFlight, queued] = outCounts(g.calls.length, finished, g.calls.filter(c => c.sent !== null).length,
    g.calls.filter(c => c.sent !== null && c.done).length, slotsRecorded(g));
  return {
    started: g.calls.length, finished, inFlight, queued,
    retried: g.calls.filter(c => c.retries).length,
    rateLimited: g.calls.filter(c => c.retries && c.rateLimited).length,
    cached: g.calls.filter(c => c.cached).length,
    journal: g.calls.filter(c => c.journal).length,
    inputTokens: g.calls.reduce((s, c) => s + (c.inputTokens ?? 0), 0),
    outputTokens: g.calls.reduce((s, c) => s + (c.outputTokens ?? 0), 0),
    cachedInputTokens: g.calls.reduce((s, c) => s + c.cachedInputTokens, 0),
    saved: g.calls.reduce((s, c) => s + c.saved, 0),
    cost: g.calls.reduce((s, c) => s + (c.cost ?? 0), 0),
    unpriced: g.calls.filter(c => c.done && c.cost === null).length,
    p50: percentile(latencies, 50), p95: percentile(latencies, 95),
    queuedP50: percentile(waits, 50), queuedP95: percentile(waits, 95)
  };
}

/** Wall time of a run: its recorded usage, else its first to last event; for the root run, from the moment
 * the user ran the cell when that was recorded (the live widget counted the same way). */
export function runElapsed(tree: Tree, run: Run): number {
  const wall = Math.max(0, run.usage?.wall_s || (run.finished ?? tree.lastTs) - run.started);
  if (run.id === tree.rootId && tree.opened !== null) {
    return Math.max(wall, (run.finished ?? tree.lastTs) - tree.opened);
  }
  return wall;
}

export function fold(payload: unknown): Tree {
  const tree: Tree = {
    rootId: null,
    runs: new Map(),
    totals: {
      subCalls: 0, subDone: 0, subSent: 0, subSentDone: 0, queueRecorded: false, subErrors: 0, inputTokens: 0, outputTokens: 0, cost: 0, unpriced: 0,
      cachedInputTokens: 0, saved: 0, rootCalls: 0, concurrency: null
    },
    events: 0,
    firstTs: Infinity,
    lastTs: 0,
    opened: null,
    spans: [],
    resumed: null,
    snapshot: null
  };
  if (payload && typeof payload === 'object' && !Array.isArray(payload)) {
    tree.opened = num((payload as { [key: string]: unknown }).opened);
    const note = (payload as { [key: string]: any }).snapshot;
    if (note && typeof note === 'object' && typeof note.resume === 'string') {
      tree.snapshot = { journal: String(note.journal ?? ''), resume: note.resume };
    }
  }
  const calls = new Map<string, Call>();
  const groups = new Map<string, Group>();
  // the tree's totals count as events come; the root run's recorded usage replaces them when it finishes
  const addUsage = (u: { [key: string]: any }): void => {
    tree.totals.inputTokens += Number(u.input_tokens ?? 0) || 0;
    tree.totals.outputTokens += Number(u.output_tokens ?? 0) || 0;
    tree.totals.cachedInputTokens += Number(u.cached_input_tokens ?? 0) || 0;
    tree.totals.saved += Number(u.saved_usd ?? 0) || 0;
    if (u.cost_usd === null) {
      tree.totals.unpriced += 1;
    } else {
      tree.totals.cost += Number(u.cost_usd ?? 0) || 0;
    }
  };

  const run = (e: Event): Run => {
    let r = tree.runs.get(e.run_id);
    if (!r) {
      r = {
        id: e.run_id, parentId: e.parent_run_id ?? null, parentTurn: null, depth: e.depth ?? 0, label: '',
        question: '', model: '', subModel: '', sandbox: '', config: {}, status: 'running', answer: undefined, answerJson: null,
        reason: '', error: null, verified: null, usage: null, started: e.ts ?? 0, finished: null,
        turns: new Map(), notes: [], children: [], policiesRecorded: false
      };
      tree.runs.set(e.run_id, r);
      if (tree.rootId === null && !r.parentId) {
        tree.rootId = r.id;
      }
    }
    return r;
  };
  const turn = (e: Event): Turn => {
    const r = run(e);
    const n = Number(e.turn ?? 0);
    let t = r.turns.get(n);
    if (!t) {
      t = {
        turn: n, maxTurns: null, reply: '', replied: false, replyTokens: null, replyCache: [0, 0], replyLatency: null,
        code: '', stdout: '', stderr: '', error: null, errorType: null, duration: null, timedOut: false, restarted: false,
        executed: false, submitted: false, tables: [], streamedStdout: '', streamedStderr: '', told: '', notes: [],
        groups: [], children: [], sentBack: []
      };
      r.turns.set(n, t);
    }
    return t;
  };
  const group = (e: Event): Group => {
    const key = e.batch_id ? String(e.batch_id) : `single:${e.run_id}:${e.turn}`;
    let g = groups.get(key);
    if (!g) {
      g = {
        key, kind: e.batch_id ? 'batch' : 'single', size: 0, model: e.model ?? '', calls: [], errors: 0,
        refused: null, wall: null
      };
      groups.set(key, g);
      turn(e).groups.push(g);
    }
    return g;
  };

  for (const e of eventsOf(payload)) {
    tree.events += 1;
    const ts = num(e.ts);
    if (ts !== null) {
      tree.lastTs = Math.max(tree.lastTs, ts);
      tree.firstTs = Math.min(tree.firstTs, ts);
    }
    switch (e.kind) {
      case 'run_started': {
        const r = run(e);
        Object.assign(r, {
          question: e.question ?? '', model: e.model ?? '', subModel: e.sub_model ?? '', sandbox: e.sandbox ?? '',
          config: e.config ?? {}, label: e.label ?? '', parentTurn: e.parent_turn ?? null, started: e.ts ?? 0
        });
        if (r.parentId) {
          const parent = tree.runs.get(r.parentId);
          if (parent) {
            parent.children.push(r.id);
            if (r.parentTurn !== null) {
              turn({ run_id: parent.id, turn: r.parentTurn }).children.push(r.id);
            }
          }
        }
        break;
      }
      case 'turn_started':
        turn(e).maxTurns = num(e.max_turns);
        break;
      case 'model_reply': {
        tree.totals.rootCalls += 1;
        addUsage(e.usage ?? {});
        if (e.purpose && e.purpose !== 'turn') {
          // a fallback's (or compaction's) reply: the run's answer and reason say what it gave, as in _fold.py
          run(e);
          break;
        }
        const t = turn(e);
        t.reply = e.text ?? '';
        t.replied = true;
        const u = e.usage ?? {};
        // a turn asked again (an empty or repeated reply) made two calls: its chip counts both
        const [inBefore, outBefore] = t.replyTokens ?? [0, 0];
        t.replyTokens = [inBefore + Number(u.input_tokens ?? 0), outBefore + Number(u.output_tokens ?? 0)];
        t.replyCache = [t.replyCache[0] + (Number(u.cached_input_tokens ?? 0) || 0),
          t.replyCache[1] + (Number(u.saved_usd ?? 0) || 0)];
        const latency = num(e.latency_s);
        t.replyLatency = latency === null ? null : (t.replyLatency ?? 0) + latency;
        for (const n of (run(e).policiesRecorded ? [] : e.notes ?? []) as string[]) {
          if (n in ASKED_AGAIN) {
            t.notes.push(['info', ASKED_AGAIN[n]]);
          }
        }
        if (ts !== null) {
          tree.spans.push({ kind: 'reply', runId: e.run_id, turn: t.turn, start: ts - (latency ?? 0), end: ts });
        }
        break;
      }
      case 'code_output': {
        const t = turn(e);
        if (!t.executed) { // a piece after the turn's result is in that result
          if (e.stream === 'stderr') {
            t.streamedStderr = (t.streamedStderr + String(e.text ?? '')).slice(0, STREAM_KEEP);
          } else {
            t.streamedStdout = (t.streamedStdout + String(e.text ?? '')).slice(0, STREAM_KEEP);
          }
        }
        break;
      }
      case 'code_executed': {
        const t = turn(e);
        Object.assign(t, {
          code: e.code ?? '', stdout: e.stdout ?? '', stderr: e.stderr ?? '', error: e.error ?? null,
          errorType: e.error_type ?? null, duration: num(e.duration_s), timedOut: !!e.timed_out,
          restarted: !!e.restarted, executed: true, tables: Array.isArray(e.tables) ? e.tables.filter(isTable) : [],
          told: e.timed_out ? toldSentence(String(e.observation ?? '')) : ''
        });
        if (ts !== null) {
          tree.spans.push({ kind: 'code', runId: e.run_id, turn: t.turn, start: ts - (t.duration ?? 0), end: ts });
        }
        break;
      }
      case 'map_started': {
        const g = group({ ...e, batch_id: e.map_id });
        g.kind = 'map';
        g.map = {
          operator: String(e.operator ?? 'llm_map'), items: num(e.items), packs: 0, reasks: 0, failures: 0,
          stopped: null
        };
        break;
      }
      case 'map_finished': {
        const g = group({ ...e, batch_id: e.map_id });
        g.map = {
          operator: g.map?.operator ?? 'llm_map', items: num(e.items), packs: Number(e.packs ?? 0),
          reasks: Number(e.reasks ?? 0), failures: Number(e.failures ?? 0), stopped: e.stopped ?? null
        };
        g.wall = num(e.latency_s);
        break;
      }
      case 'batch_started': {
        const mapped = e.group ? groups.get(String(e.group)) : undefined;
        if (mapped && mapped.kind === 'map') {
          groups.set(String(e.batch_id), mapped); // a round of the map: its calls join the map's group
          mapped.size += Number(e.size ?? 0);
          mapped.model = mapped.model || (e.model ?? '');
          break;
        }
        const g = group(e);
        g.size = Number(e.size ?? 0);
        g.model = e.model ?? g.model;
        break;
      }
      case 'batch_finished': {
        const g = group(e);
        if (g.kind === 'map') {
          g.refused = e.refused ?? g.refused;
          break;
        }
        g.refused = e.refused ?? null;
        g.wall = num(e.latency_s);
        break;
      }
      case 'sub_call_started': {
        const g = group(e);
        const c: Call = {
          index: g.calls.length + 1, id: e.call_id, model: e.model ?? '', prompt: e.prompt ?? '',
          promptChars: Number(e.prompt_chars ?? (e.prompt ?? '').length), done: false, reply: null, error: null,
          inputTokens: null, outputTokens: null, cost: null, latency: null, queued: null, cached: false,
          journal: false, cachedInputTokens: 0, saved: 0, images: Array.isArray(e.images) ? e.images : [],
          started: ts ?? 0, sent: null, finished: null, retries: 0, rateLimited: 0, runId: e.run_id, turn: Number(e.turn ?? 0)
        };
        g.calls.push(c);
        if (g.kind === 'single') {
          g.size = g.calls.length;
        }
        calls.set(c.id, c);
        tree.totals.subCalls += 1;
        break;
      }
      case 'sub_call_sent': {
        const c = calls.get(e.call_id);
        if (c) {
          c.sent = ts;
          tree.totals.subSent += 1;
          tree.totals.queueRecorded = true;
        }
        break;
      }
      case 'sub_call_finished': {
        const c = calls.get(e.call_id);
        const u = e.usage ?? {};
        const queued = num(e.queued_s);
        if (queued !== null) {
          tree.totals.queueRecorded = true;
        }
        if (c) {
          if (c.sent !== null) {
            tree.totals.subSentDone += 1;
          }
          addUsage(u);
          Object.assign(c, {
            done: true, reply: e.reply ?? null, error: e.error ?? null, inputTokens: num(u.input_tokens),
            outputTokens: num(u.output_tokens), cost: num(u.cost_usd), cached: !!e.cached, queued,
            journal: !!e.meta?.resumed, cachedInputTokens: Number(u.cached_input_tokens ?? 0) || 0,
            saved: Number(u.saved_usd ?? 0) || 0,
            // never sent (cached, or served by an identical call in flight): no provider time
            latency: queued !== null && e.cached ? null : num(e.latency_s),
            finished: ts, retries: Number(e.meta?.retries ?? 0) || 0, rateLimited: Number(e.meta?.rate_limited ?? 0) || 0
          });
        }
        tree.totals.subDone += 1;
        if (e.error) {
          tree.totals.subErrors += 1;
          group(e).errors += 1;
        }
        break;
      }
      case 'guard_rejected': {
        const t = turn(e);
        const policy = t.sentBack.indexOf(e.guard);
        if (policy >= 0) { // a policy's send-back: its policy_acted note said it, with the switch
          t.sentBack.splice(policy, 1);
          break;
        }
        t.notes.push(['rejected', `submit rejected (${e.guard}): ${e.reason}${EVIDENCE_GUARDS.has(e.guard) ? EVIDENCE_HINT : ''}`]);
        break;
      }
      case 'policy_acted': {
        // said once: the run's first policy_acted drops its turn's asked-again notes (later ones are not added)
        const r = run(e);
        const t = turn(e);
        if (!r.policiesRecorded) {
          r.policiesRecorded = true;
          const asked = new Set(Object.values(ASKED_AGAIN));
          t.notes = t.notes.filter(([kind, text]) => !(kind === 'info' && asked.has(text)));
        }
        if (e.action === 'send_back') {
          t.sentBack.push(String(e.policy ?? ''));
        }
        t.notes.push(policyNote(String(e.policy ?? ''), String(e.action ?? ''), String(e.detail ?? '')));
        break;
      }
      case 'submitted':
        turn(e).submitted = true;
        break;
      case 'turns_trimmed': {
        const said: string[] = [];
        if ((e.dropped ?? []).length) {
          said.push(`older turns dropped from the model's context to fit it: ${e.dropped.join(', ')}`);
        }
        if ((e.clipped ?? []).length) {
          said.push(`outputs cut in the middle to fit the model's context: turn ${e.clipped.join(', ')}`);
        }
        turn(e).notes.push(['info', said.join('; ')]);
        break;
      }
      case 'concurrency_changed':
        tree.totals.concurrency = num(e.limit);
        break;
      case 'fallback': {
        const r = run(e);
        r.notes.push(`fallback: ${e.reason ?? ''}`);
        break;
      }
      case 'attempt_verified': {
        const verdict = e.accepted ? 'accepted' : 'rejected';
        const confidence = num(e.confidence);
        run(e).notes.push(
          `attempt ${e.attempt} ${verdict} (confidence ${confidence === null ? '?' : confidence.toFixed(2)}) ${e.reason ?? ''}`.trim()
        );
        run(e).notes.push(...quoteNotes(e.details ?? {}));
        break;
      }
      case 'run_resumed': {
        // before the turn whose root request went live; inside it (after its reply) when a sub-call did;
        // after the last turn when nothing went live
        const r = run(e);
        const live = e.live !== false;
        const last = r.turns.size && live ? Math.max(...r.turns.keys()) : null;
        tree.resumed = {
          source: String(e.source ?? ''), rootAnswers: Number(e.root_answers ?? 0), subAnswers: Number(e.sub_answers ?? 0),
          servedRoot: Number(e.served_root ?? 0), servedSub: Number(e.served_sub ?? 0), live, runId: r.id,
          turn: last, within: last !== null && r.turns.get(last)!.replyTokens !== null
        };
        break;
      }
      case 'run_finished': {
        const r = run(e);
        Object.assign(r, {
          status: e.status ?? 'error', answer: e.answer, reason: e.reason ?? '', error: e.error ?? null,
          verified: e.verified ?? null, usage: e.usage ?? null, finished: e.ts ?? null,
          answerJson: typeof e.answer_json === 'string' ? e.answer_json : null
        });
        if (r.id === tree.rootId && e.usage) {
          const u = e.usage;
          Object.assign(tree.totals, {
            inputTokens: Number(u.input_tokens ?? 0), outputTokens: Number(u.output_tokens ?? 0),
            cost: Number(u.cost_usd ?? 0), unpriced: Number(u.unpriced_calls ?? 0),
            cachedInputTokens: Number(u.cached_input_tokens ?? 0) || 0, saved: Number(u.saved_usd ?? 0) || 0,
            rootCalls: Number(u.root_calls ?? tree.totals.rootCalls)
          });
        }
        break;
      }
      default:
        break; // an event kind this viewer does not know (a newer rlmnb): shown nowhere, breaks nothing
    }
  }
  if (!tree.runs.size) {
    throw new Error('the trajectory has no runs');
  }
  if (!Number.isFinite(tree.firstTs)) {
    tree.firstTs = 0;
  }
  if (tree.rootId === null) {
    tree.rootId = tree.runs.keys().next().value ?? null;
  }
  return tree;
}

/** One line per quote a guard checked (QuotesFound): found, and where, or not found. */
export function quoteNotes(details: { [key: string]: any }): string[] {
  const out: string[] = [];
  for (const q of Array.isArray(details.quotes) ? details.quotes : []) {
    const text = String(q.quote ?? '');
    const shown = text.length > 120 ? text.slice(0, 119) + '…' : text;
    out.push(q.found ? `quote found: "${shown}" (${q.where ?? ''})`
      : `quote NOT found: "${shown}"${q.checked === false ? ' (not checked)' : ''}${q.where ? ` (${q.where})` : ''}`);
  }
  if (details.skipped) {
    out.push(`more quotes not checked: ${details.skipped}`);
  }
  return out;
}
