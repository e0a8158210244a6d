"""Ordinary data for behaviour tests of the turn loop: support tickets, a contract and a service log (issue 44).

Each generator is a pure function of its seed (the same seed gives the same value, byte for byte), writes no file
and draws from its own `random.Random`, never the global stream. What the tests rely on holds for every seed and is
stated in the generator's docstring; the module constants name those facts so a test reads them instead of
repeating numbers.

- `tickets(seed)`: a pandas DataFrame of 200 support tickets (id, area, created, priority, text).
- `contract(seed)`: a service agreement of about 33,000 tokens in numbered clauses.
- `service_log(seed)`: a service log with exactly 37 ERROR lines among many INFO and WARN lines.

Beside them, what a run over this data did, read from its trajectory: `policy_actions`, `rejections`,
`turns_started` (the behaviour tests' assertions); `EVERY_POLICY` for runs of the policies the profiles leave out.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from rlmnb._ground.config import POLICIES
from rlmnb.events import GuardRejected, Trajectory, TurnStarted

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AREA_COUNTS", "ERROR_CODES", "ERROR_LINES", "LIABILITY_CLAUSE", "LIABILITY_TITLE", "REFUND_CLAUSE",
           "REFUND_DAYS", "TICKETS", "contract", "contract_clause", "policy_actions", "rejections", "service_log",
           "tickets", "turns_started"]

TICKETS = 200
"""Rows of `tickets()`."""
AREA_COUNTS = {"billing": 64, "shipping": 48, "returns": 40, "account": 28, "technical": 20}
"""Tickets per area: billing has the most; billing, shipping and returns have more than 30 each."""
REFUND_CLAUSE = 23
"""The contract clause that says refunds are due within `REFUND_DAYS` days (another clause says 90 days, of notice)."""
REFUND_DAYS = 60
LIABILITY_CLAUSE = 14
"""The contract clause of about 2,000 characters that a question asks for verbatim."""
LIABILITY_TITLE = "Limitation of Liability"
ERROR_LINES = 37
"""ERROR lines of `service_log()`."""
ERROR_CODES = {"E503": 19, "E404": 11, "E500": 7}
"""ERROR lines per code: E503 is the most frequent, E404 the second."""

_PRIORITIES = ("low", "normal", "high", "urgent")
_TICKET_WORDS = {
    "billing": ("invoice", "charged", "twice", "card", "refund", "payment", "declined", "amount", "receipt", "plan"),
    "shipping": ("parcel", "courier", "late", "tracking", "address", "delivered", "missing", "box", "label", "week"),
    "returns": ("return", "label", "broken", "exchange", "size", "wrong", "item", "store", "credit", "package"),
    "account": ("login", "password", "email", "locked", "profile", "reset", "username", "verify", "access", "name"),
    "technical": ("app", "crash", "error", "screen", "update", "sync", "slow", "button", "page", "browser"),
}
_FILLER = ("please", "help", "my", "the", "since", "yesterday", "again", "still", "order", "thanks", "urgent", "it")


def tickets(seed: int = 0) -> pd.DataFrame:
    """200 support tickets in `id` order: `id` "T-1000" to "T-1199", `area` (`AREA_COUNTS`, shuffled), `created`
    (datetime64 days in 2022, the earliest exactly 2022-01-01), `priority` (low/normal/high/urgent; no technical
    ticket is urgent, at least one returns ticket is) and `text` (6 to 20 words; one longest text)."""
    import pandas as pd

    rng = random.Random(seed)
    areas = [area for area, count in AREA_COUNTS.items() for _ in range(count)]
    rng.shuffle(areas)
    days = [rng.randrange(1, 365) for _ in range(TICKETS)]
    days[rng.randrange(TICKETS)] = 0
    priorities = [rng.choice(_PRIORITIES[:3] if area == "technical" else _PRIORITIES) for area in areas]
    first_return = areas.index("returns")
    priorities[first_return] = "urgent"
    texts = [_ticket_text(rng, area) for area in areas]
    longest = max(range(TICKETS), key=lambda i: len(texts[i]))
    texts[longest] += " and nobody has answered my last three messages about it"
    return pd.DataFrame({
        "id": [f"T-{1000 + i}" for i in range(TICKETS)],
        "area": areas,
        "created": pd.Timestamp("2022-01-01") + pd.to_timedelta(days, unit="D"),
        "priority": priorities,
        "text": texts,
    })


def _ticket_text(rng: random.Random, area: str) -> str:
    words = [rng.choice(_TICKET_WORDS[area] if rng.random() < 0.6 else _FILLER) for _ in range(rng.randint(6, 20))]
    return " ".join(words).capitalize() + "."


_CLAUSE_TITLES = ("Definitions", "Scope of Services", "Service Levels", "Fees", "Invoicing", "Taxes", "Term",
                  "Renewal", "Suspension", "Customer Data", "Security", "Confidentiality", "Intellectual Property",
                  "Warranties", "Support", "Maintenance Windows", "Subcontractors", "Audit", "Insurance", "Export",
                  "Publicity", "Assignment", "Notices", "Force Majeure", "Governing Law", "Disputes", "Severability",
                  "Waiver", "Amendments", "Entire Agreement", "Counterparts", "Records", "Compliance",
                  "Personnel", "Acceptance", "Change Requests", "Escalation", "Reporting", "Transition")
_SUBJECTS = ("The Provider", "The Customer", "Each party", "Neither party", "The receiving party", "Any Affiliate")
_VERBS = ("shall use reasonable efforts to", "may, on written notice,", "shall promptly", "must not unreasonably",
          "agrees to", "is entitled to", "shall, at its own cost,")
_OBJECTS = ("maintain accurate records of all Services delivered", "notify the other party of any material change",
            "cooperate in good faith with any review under this Agreement", "keep the Documentation current",
            "provide the information reasonably requested for invoicing", "comply with the applicable policies",
            "remedy any failure within a reasonable period", "protect Confidential Information from disclosure",
            "make available qualified personnel during business hours", "review the Service Levels each quarter")
_TAILS = ("", " unless otherwise agreed in an Order Form", " in accordance with this Agreement",
          " to the extent permitted by applicable law", " as described in the relevant Schedule")
_CLAUSES = 155
_REFUND_TEXT = (f"Refunds. Where the Customer is entitled to a refund under this Agreement, refunds are due within "
                f"{REFUND_DAYS} days of the Customer's written request and shall be paid to the original method of "
                f"payment. The Provider shall confirm each refund in writing.")
_NOTICE_TEXT = ("Termination for Convenience. Either party may terminate this Agreement for convenience by giving "
                "not less than 90 days' written notice to the other party.")


def contract(seed: int = 0) -> str:
    """A service agreement of about 33,000 tokens: `_CLAUSES` numbered clauses, one per paragraph, each "N. Title.
    body". Clause `REFUND_CLAUSE` says refunds are due within `REFUND_DAYS` days (the only "{REFUND_DAYS} days"),
    another gives 90 days' notice; clause `LIABILITY_CLAUSE` (`LIABILITY_TITLE`) is about 2,000 characters
    (`contract_clause`); the word "Indemnification" first appears as a later clause's title."""
    rng = random.Random(seed)
    clauses = []
    for number in range(1, _CLAUSES + 1):
        if number == REFUND_CLAUSE:
            body = _REFUND_TEXT
        elif number == REFUND_CLAUSE + 17:
            body = _NOTICE_TEXT
        elif number == LIABILITY_CLAUSE:
            body = f"{LIABILITY_TITLE}. " + _sentences(rng, 2_000)
        elif number == 61:
            body = "Indemnification. " + _sentences(rng, 1_200)
        else:
            body = f"{_CLAUSE_TITLES[(number * 7 + seed) % len(_CLAUSE_TITLES)]}. " + _sentences(rng, 1_250)
        clauses.append(f"{number}. {body}")
    return "MASTER SERVICES AGREEMENT\n\n" + "\n\n".join(clauses) + "\n"


def contract_clause(text: str, number: int) -> str:
    """Clause `number` of a `contract()` text, verbatim: from "N. " at a paragraph's start to the paragraph's end."""
    start = text.index(f"\n\n{number}. ") + 2
    end = text.find("\n\n", start)
    return text[start:end if end >= 0 else len(text)].rstrip("\n")


def _sentences(rng: random.Random, chars: int) -> str:
    """Contract sentences, about `chars` characters in all (the last sentence may pass it)."""
    said: list[str] = []
    size = 0
    while size < chars - 60:
        sentence = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}{rng.choice(_TAILS)}."
        said.append(sentence)
        size += len(sentence) + 1
    return " ".join(said)


_SERVICES = ("api", "auth", "billing", "search", "cart")
_INFO = ("request ok path=/v1/orders", "request ok path=/v1/items", "cache warm hits=98%", "health check passed",
         "user session started", "job finished queue=mail", "config reloaded")
_WARN = ("slow response ms=1840", "retrying upstream attempt=2", "queue depth high depth=412",
         "deprecated header used", "disk usage at 81%")
_ERRORS = {"E503": "upstream unavailable", "E404": "resource not found", "E500": "internal failure"}


def service_log(seed: int = 0, lines: int = 400) -> str:
    """A service log of `lines` lines, "YYYY-MM-DD HH:MM:SS LEVEL service=NAME message", times increasing; exactly
    `ERROR_LINES` lines have level ERROR, each with one code of `ERROR_CODES` ("ERROR service=api E503 upstream
    unavailable"), at shuffled places; the rest are INFO (about 3 in 4) and WARN."""
    if lines < ERROR_LINES:
        raise ValueError(f"A log needs at least {ERROR_LINES} lines for its ERROR lines; pass lines={ERROR_LINES} "
                         f"or more.")
    rng = random.Random(seed)
    codes = [code for code, count in ERROR_CODES.items() for _ in range(count)]
    rng.shuffle(codes)
    slots = set(rng.sample(range(lines), ERROR_LINES))
    out = []
    seconds = 8 * 3600
    for i in range(lines):
        seconds += rng.randint(1, 40)
        stamp = f"2024-03-05 {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        service = rng.choice(_SERVICES)
        if i in slots:
            code = codes.pop()
            out.append(f"{stamp} ERROR service={service} {code} {_ERRORS[code]}")
        elif rng.random() < 0.75:
            out.append(f"{stamp} INFO service={service} {rng.choice(_INFO)}")
        else:
            out.append(f"{stamp} WARN service={service} {rng.choice(_WARN)}")
    return "\n".join(out) + "\n"


EVERY_POLICY = tuple(p for p in POLICIES if p != "first_read")
"""Every policy on, the first reading aside (it asks the sub-model before turn 1): for tests of the policies the
profiles leave out, which run only when named."""


def policy_actions(trajectory: Trajectory) -> list[tuple[str, str]]:
    """(policy, action) of every `PolicyActed` event of a run's trajectory, in order. Read by the event's kind, so a
    test module imports whatever `rlmnb.events` holds."""
    return [(getattr(e, "policy", ""), getattr(e, "action", "")) for e in trajectory.events if e.kind == "policy_acted"]


def rejections(trajectory: Trajectory) -> list[str]:
    """The guard (policy) name of every `GuardRejected` event of a run's trajectory, in order."""
    return [e.guard for e in trajectory.events if isinstance(e, GuardRejected)]


def turns_started(trajectory: Trajectory) -> int:
    """How many root turns the run started (`TurnStarted` events)."""
    return sum(isinstance(e, TurnStarted) for e in trajectory.events)
