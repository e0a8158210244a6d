"""What a run really showed, read as evidence by the turn loop's policies.

Entry points:
- `steps_of(trajectory, run_id)`: the run's executed steps with the text their code printed; `latest_other`,
  `last_lines` (what a repeat note points at) and `output_tails` (what the final answer is asked from).
- `copied_from(answer, texts, share=...)`: a long answer that a text input holds verbatim (policy `whole_copy`).
- `prose_answer` / `boxed_answer`: a reply that is only a short value, or ends in a `\\boxed{}` value, that real
  output showed (policy `prose_answer`).
- `value_claims(answer)`: the numbers and ids a short answer claims; `unevidenced(answer, ...)`: a typed claim
  that nothing shown before held (policy `unshown_value`); `found_in`, `typed_at` underneath.
- `asks_only_the_question`, `guessed_by_sub_call`, `bare_sub_calls`: sub-calls given nothing to read, and answers
  that came from them (policies `unshown_value`, `guess_note`).
- `holding_excerpt`, `says_nothing`, `found_before`, `Reading`: for the first reading and the final answer.

The checks read only what the run recorded (the trajectory's outputs and replies, the conversation's opening
texts), never an input's body: a value in an input that nothing printed is not evidence the model saw. "Typed" is
read from the code's syntax: the argument of `submit` / `FINAL` (or the variable `FINAL_VAR` names) is a literal,
or a variable whose latest assignment is one. A value the code computed is never judged: the checks are about
invented values, not correctness.
"""

from __future__ import annotations

from rlmnb._engine.evidence.bare_calls import (
    ASKING_WORDS,
    BARE_PROMPT_CHARS,
    asks_only_the_question,
    bare_sub_calls,
    guessed_by_sub_call,
)
from rlmnb._engine.evidence.prose import PROSE_WORDS, RESTATE_CHARS, boxed_answer, prose_answer, stated_answer
from rlmnb._engine.evidence.reading import NOT_FOUND, NOT_HELD, Reading, holding_excerpt
from rlmnb._engine.evidence.shown import (
    COPY_CHARS,
    EMPTY_WORDS,
    SHORT_CHARS,
    SHORT_WORDS,
    copied_from,
    found_before,
    found_in,
    says_nothing,
    short_answer,
    value_claims,
)
from rlmnb._engine.evidence.steps import Step, last_lines, latest_other, output_tails, output_text, steps_of
from rlmnb._engine.evidence.typed import Unevidenced, typed_at, unevidenced

__all__ = ["ASKING_WORDS", "BARE_PROMPT_CHARS", "COPY_CHARS", "EMPTY_WORDS", "NOT_FOUND", "NOT_HELD", "PROSE_WORDS", "RESTATE_CHARS", "Reading", "SHORT_CHARS", "SHORT_WORDS", "Step", "Unevidenced", "asks_only_the_question", "bare_sub_calls", "boxed_answer", "copied_from", "found_before", "found_in", "guessed_by_sub_call", "holding_excerpt", "last_lines", "latest_other", "output_tails", "output_text", "prose_answer", "says_nothing", "short_answer", "stated_answer", "steps_of", "typed_at", "unevidenced", "value_claims"]
