"""`QuotesFound`: a verify guard that sends an answer back when it quotes what the inputs do not say.

Used as `RLM(..., verify=QuotesFound())` or `%%rlm --verify quotes`. Quotes are found with
`quotes.extract_quotes` and looked up in the run's inputs with `quote_search.search_inputs`; the
per-quote findings (found where / not found / not checked) go into the attempt's event for the views.
A hostile answer cannot hold the run: at most `max_quotes` quotes are checked, within `time_limit`
seconds, and anything left unchecked fails the attempt with a request to quote less.
"""

from __future__ import annotations

from typing import Any

from rlmnb._ground.errors import ConfigError
from rlmnb._guards.quote_search import search_inputs
from rlmnb._guards.quotes import extract_quotes

SHOWN_MISSING = 10  # missing quotes listed in the revision request


class QuotesFound:
    """Confidence 1 when every quote of the answer is in the inputs (whitespace forgiven), else 0.

    Args:
        min_chars: shortest passage in quotation marks that counts as a quote (20); fields named
            quote / quotes / evidence / excerpt / citation count at any length.
        max_quotes: most distinct quotes checked per answer (100); more fail the attempt.
        time_limit: seconds the lookup may take (20.0); quotes not reached by then fail the attempt.
    """

    def __init__(self, *, min_chars: int = 20, max_quotes: int = 100, time_limit: float = 20.0) -> None:
        for name, value in (("min_chars", min_chars), ("max_quotes", max_quotes)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"QuotesFound {name} must be a positive whole number, got {value!r}.")
        if not isinstance(time_limit, int | float) or isinstance(time_limit, bool) or time_limit <= 0:
            raise ConfigError(f"QuotesFound time_limit must be a positive number of seconds, got {time_limit!r}.")
        self.min_chars = min_chars
        self.max_quotes = max_quotes
        self.time_limit = float(time_limit)

    def __call__(self, answer: Any, context: dict[str, Any]) -> tuple[float, str]:
        quotes = extract_quotes(answer, min_chars=self.min_chars)
        checked, skipped = quotes[: self.max_quotes], quotes[self.max_quotes:]
        search = search_inputs(checked, context.get("inputs") or (), time_limit=self.time_limit)
        findings = search.findings()
        context["details"] = {"quotes": [f.to_dict() for f in findings], "skipped": len(skipped),
                              "timed_out": search.timed_out}
        if not quotes:
            return 1.0, "the answer quotes nothing"
        missing = [f.quote for f in findings if not f.found and f.checked]
        unchecked = [f.quote for f in findings if not f.checked]
        problems = []
        if missing:
            shown = "; ".join(f'"{q[:200]}"' for q in missing[:SHOWN_MISSING])
            more = f" and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else ""
            problems.append(f"{len(missing)} of {len(quotes)} quotes are not in the inputs word for word: "
                            f"{shown}{more}. Quote the data exactly (copy it with code) or drop those quotes")
        if skipped or unchecked:
            problems.append(f"{len(skipped) + len(unchecked)} of {len(quotes)} quotes could not be checked (at most "
                            f"{self.max_quotes} quotes in {self.time_limit:g} s); quote fewer, shorter passages")
        if problems:
            return 0.0, "; ".join(problems)
        return 1.0, f"all {len(quotes)} quote{'s' if len(quotes) != 1 else ''} found in the inputs"

    def __repr__(self) -> str:
        return f"QuotesFound(min_chars={self.min_chars}, max_quotes={self.max_quotes}, time_limit={self.time_limit:g})"
