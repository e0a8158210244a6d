// Prints, as JSON, every figure the extension's fold gives of each trajectory named on the command line.
// Usage: node fold_figures.cjs <folder of fold.js and format.js compiled to CommonJS> <trajectory.json>...
// tests/views/test_fold_parity.py reads the output and compares it with the Python fold's figures.
'use strict';

const fs = require('fs');
const path = require('path');

const [lib, ...files] = process.argv.slice(2);
const { fold, groupFigures, outCounts, runElapsed } = require(path.join(lib, 'fold.js'));
const { pendingTurnText, replayedTurn } = require(path.join(lib, 'format.js'));

function callFigures(c) {
  return {
    id: c.id, done: c.done, error: c.error, input_tokens: c.inputTokens, output_tokens: c.outputTokens,
    cost: c.cost, latency: c.latency, queued: c.queued, sent: c.sent !== null, cached: c.cached,
    retries: c.retries, rate_limited: c.rateLimited, prompt_chars: c.promptChars, journal: c.journal,
    cached_input_tokens: c.cachedInputTokens, saved: c.saved
  };
}

function groupOut(g) {
  const f = groupFigures(g);
  return {
    kind: g.kind, size: g.size, model: g.model, errors: g.errors, wall: g.wall, refused: g.refused,
    map: g.map ?? null, started: f.started, finished: f.finished, in_flight: f.inFlight, queued: f.queued,
    retried: f.retried, rate_limited: f.rateLimited, cached: f.cached, input_tokens: f.inputTokens,
    output_tokens: f.outputTokens, cost: f.cost, unpriced: f.unpriced, p50: f.p50, p95: f.p95,
    queued_p50: f.queuedP50, queued_p95: f.queuedP95, journal: f.journal, cached_input_tokens: f.cachedInputTokens,
    saved: f.saved, calls: g.calls.map(callFigures)
  };
}

function treeOut(tree) {
  const t = tree.totals;
  const [inFlight, queued] = outCounts(t.subCalls, t.subDone, t.subSent, t.subSentDone, t.queueRecorded);
  const root = tree.runs.get(tree.rootId);
  const runs = {};
  for (const run of tree.runs.values()) {
    const turns = [...run.turns.values()].sort((a, b) => a.turn - b.turn).map(turn => ({
      turn: turn.turn, max_turns: turn.maxTurns, executed: turn.executed, submitted: turn.submitted,
      error: turn.error, error_type: turn.errorType, timed_out: turn.timedOut, restarted: turn.restarted,
      duration: turn.duration, reply_latency: turn.replyLatency, reply_tokens: turn.replyTokens,
      reply_cache: turn.replyCache, replayed: replayedTurn(tree.resumed, run.id, turn.turn),
      notes: turn.notes, pending: pendingTurnText(turn, run), groups: turn.groups.map(groupOut)
    }));
    runs[run.id] = {
      parent: run.parentId, parent_turn: run.parentTurn, depth: run.depth, label: run.label, status: run.status,
      question: run.question, model: run.model, sub_model: run.subModel, reason: run.reason, error: run.error,
      elapsed: run.finished === null ? null : runElapsed(tree, run), notes: run.notes, turns
    };
  }
  const m = tree.resumed;
  return {
    root: tree.rootId,
    resumed: m === null ? null : {
      source: m.source, root_answers: m.rootAnswers, sub_answers: m.subAnswers, served_root: m.servedRoot,
      served_sub: m.servedSub, live: m.live, run_id: m.runId, turn: m.turn, within: m.within
    },
    meters: {
      turns: root.turns.size ? Math.max(...root.turns.keys()) : 0, sub_calls: t.subCalls, sub_calls_done: t.subDone,
      sub_errors: t.subErrors, in_flight: inFlight, queued, input_tokens: t.inputTokens,
      output_tokens: t.outputTokens, cost: t.cost, unpriced: t.unpriced, root_calls: t.rootCalls,
      cached_input_tokens: t.cachedInputTokens, saved: t.saved
    },
    runs
  };
}

const out = files.map(file => treeOut(fold(JSON.parse(fs.readFileSync(file, 'utf8')))));
process.stdout.write(JSON.stringify(out));
