"""Ordinary analysis questions: `rlmnb eval --task ordinary` (issue 44's held-out split).

Three datasets, each a pure function of the evaluation's seed (numpy PCG64 streams; nothing is downloaded
and no data is committed), and questions of the kinds people ask of them, whose answers are computed from
the generated data by the functions below (never typed by hand):

- `tickets`: a pandas DataFrame of 200 support tickets (`id` "T-0001"..., `area` among billing, shipping,
  returns, account and technical, `created` on distinct days of 2022-2023, `priority` 1-5, a short `text`),
  bound as a table. Questions: how many billing tickets (a count), the area with the most tickets (a
  label; the generator makes it unique), the id of the highest-priority ticket created first (an id),
  whether any ticket is from 2021 (yes/no: none is), the earliest ticket's date (a date).
- `contract`: a ~33K-token services agreement of numbered clauses bound as text. One clause says refunds
  are due within 60 days of a written request; other clauses give other day counts for other things
  (invoices, notice, defects, records...) and no other clause mentions refunds. Questions: quote the
  refund clause (the key sentence must be in the quote), the days for a refund (a number), the clauses
  that mention cryptocurrency (none: an empty list).
- `log`: an application log of about 3,000 INFO and WARN lines with exactly 37 ERROR lines, each carrying
  an error code (three to five codes among E400-E504), bound as text. WARN lines may say "error" in lower
  case and INFO lines carry HTTP statuses such as 404, as real logs do. Questions: how many ERROR lines (a
  count), the first ERROR's code (an id), the distinct codes (a list), the share of ERROR lines in percent
  to one decimal (a rounded number).

The answer forms a person would give pass: each question's metric (`rlmnb._eval.tasks.metrics`: `number`,
`word`, `yes_no`, `date`, `quote`, `set`) accepts the value in a sentence, "Yes"/"no", a date in words or
ISO, a quote with other line breaks. Task names: `ordinary` (all twelve questions), `ordinary:tickets`,
`ordinary:contract`, `ordinary:log` (one dataset each), `ordinary:all` (those three). Every row runs at
the evaluation's first size, which only labels it.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from rlmnb._eval.tasks.base import Instance
from rlmnb._eval.tasks.rows import Row, RowsTask
from rlmnb._ground.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = ["AREAS", "CODES", "CONTRACT_CHARS", "DATASETS", "ERROR_LINES", "NAMES", "QUESTIONS", "REFUND_DAYS",
           "TICKETS", "Clause", "Contract", "OrdinaryTask", "Question", "contract", "log", "log_records",
           "ordinary_task", "rows_for", "tickets"]

NAMES = ("tickets", "contract", "log")
AREAS = ("billing", "shipping", "returns", "account", "technical")
TICKETS = 200
CONTRACT_CHARS = 178_000  # ~33K tokens of this prose; characters, so the text never depends on a tokenizer
REFUND_DAYS = 60
ERROR_LINES = 37
CODES = ("E400", "E401", "E404", "E429", "E500", "E502", "E503", "E504")


def _rng(dataset: str, seed: int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(f"ordinary:{dataset}".encode())]))


# ---- tickets ------------------------------------------------------------------------------------

_TICKET_TEXTS: dict[str, tuple[str, ...]] = {
    "billing": ("Charged twice for the same order", "Invoice shows the wrong VAT rate",
                "Card declined at checkout although funds are available", "Need a copy of last month's invoice",
                "Subscription renewed without notice", "Discount code not applied to the total"),
    "shipping": ("Parcel not delivered after ten days", "Tracking has not updated since dispatch",
                 "Wrong delivery address on the label", "Courier left the parcel outside",
                 "Paid for express delivery but got standard", "Only part of the order arrived"),
    "returns": ("Return label does not print", "Item arrived damaged and I want to send it back",
                "Return received but not processed yet", "Wrong size sent, need an exchange",
                "Question about returning a gift", "Drop-off point refused the return parcel"),
    "account": ("Cannot reset my password", "Two-factor codes are not arriving", "Want to change the account email",
                "Account locked after failed logins", "Please delete my account and data",
                "Newsletter settings do not save"),
    "technical": ("App crashes when opening the basket", "Pages load slowly on mobile", "Search returns no results",
                  "Login screen shows a blank page", "Notifications stopped working", "Images do not load in the app"),
}


def tickets(seed: int = 0) -> pd.DataFrame:
    """200 support tickets for `seed`: one area leads by count, and every ticket was created on its own day.

    Columns: `id` ("T-0001" in row order), `area`, `created` (datetime64, 2022-01-01..2023-12-31),
    `priority` (1-5), `text`. Rows are not in creation order.
    """
    import numpy as np
    import pandas as pd

    rng = _rng("tickets", seed)
    weights = rng.dirichlet(np.full(len(AREAS), 4.0))
    counts = rng.multinomial(TICKETS, weights)
    while (counts == counts.max()).sum() > 1:  # the top area must be one area
        counts = rng.multinomial(TICKETS, weights)
    areas = np.repeat(np.array(AREAS), counts)
    rng.shuffle(areas)
    days = rng.choice(730, size=TICKETS, replace=False)
    created = pd.Timestamp("2022-01-01") + pd.to_timedelta(days, unit="D")
    texts = [_TICKET_TEXTS[str(a)][int(rng.integers(len(_TICKET_TEXTS[str(a)])))] for a in areas]
    return pd.DataFrame({"id": [f"T-{i:04d}" for i in range(1, TICKETS + 1)], "area": areas.astype(str),
                         "created": created, "priority": rng.integers(1, 6, size=TICKETS), "text": texts})


def _billing_count(frame: pd.DataFrame) -> int:
    return int((frame["area"] == "billing").sum())


def _top_area(frame: pd.DataFrame) -> str:
    return str(frame["area"].value_counts().idxmax())


def _first_of_top_priority(frame: pd.DataFrame) -> str:
    top = frame[frame["priority"] == frame["priority"].max()]
    return str(top.sort_values("created").iloc[0]["id"])


def _any_in_2021(frame: pd.DataFrame) -> str:
    return "yes" if bool((frame["created"].dt.year == 2021).any()) else "no"


def _earliest_date(frame: pd.DataFrame) -> str:
    return str(frame["created"].min().date().isoformat())


# ---- contract -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Clause:
    """One numbered clause: its number, title and body (one paragraph)."""

    number: int
    title: str
    body: str

    @property
    def text(self) -> str:
        return f"{self.number}. {self.title}\n{self.body}"


@dataclass(frozen=True)
class Contract:
    """A generated agreement: its `text` (what is bound), its `clauses` and the parties' names."""

    text: str
    clauses: tuple[Clause, ...]
    supplier: str
    customer: str


# Sentences per topic; {d} is a day count other than the refund's, {p} a percentage, {m} a number of months.
_TOPICS: dict[str, tuple[str, ...]] = {
    "Services": (
        "The Supplier shall provide the Services described in the relevant Schedule with the skill and care of a "
        "competent provider of similar services.",
        "The Supplier shall assign to the Services personnel who are suitably qualified and experienced.",
        "The Customer shall give the Supplier such information and access as the Supplier reasonably needs to "
        "perform the Services.",
        "Any change to the scope of the Services takes effect only when both parties have signed a change note.",
        "The Supplier shall accept or reject a change request from the Customer within {d} days of receiving it.",
        "Where the Services depend on the Customer's systems, the Customer remains responsible for those systems."),
    "Charges and payment": (
        "The Customer shall pay each undisputed invoice within {d} days of the invoice date.",
        "The charges are exclusive of value added tax, which the Customer shall pay at the applicable rate.",
        "The Supplier shall invoice the charges monthly in arrears, itemised by Service.",
        "Payments shall be made by bank transfer in euros to the account named on the invoice.",
        "The Supplier may charge interest on late payments at {p} per cent above the base rate of the central bank.",
        "The Customer may withhold any amount it disputes in good faith, provided it pays the undisputed balance."),
    "Acceptance": (
        "The Customer shall accept or reject each Deliverable within {d} days of its delivery.",
        "A Deliverable that meets its acceptance criteria in all material respects shall be accepted.",
        "A rejection notice shall state the acceptance criteria that the Deliverable fails to meet.",
        "The Supplier shall correct a rejected Deliverable and submit it again for acceptance.",
        "Use of a Deliverable in live operation for more than {d} days counts as its acceptance."),
    "Warranties": (
        "The Supplier warrants that the Deliverables will conform to their specification for {m} months after "
        "acceptance.",
        "The Customer shall notify the Supplier of any defect in the Deliverables within {d} days of discovering it.",
        "The Supplier shall remedy a notified defect at its own cost by repair or replacement.",
        "The warranties do not apply to defects caused by misuse or by changes made by anyone other than the "
        "Supplier.",
        "Each party warrants that it has full power and authority to enter into this Agreement."),
    "Liability": (
        "Neither party limits its liability for death or personal injury caused by its negligence.",
        "Subject to that, each party's total liability in any contract year is limited to {p} per cent of the "
        "charges paid in that year.",
        "Neither party is liable for loss of profits, loss of business or any indirect loss.",
        "Each party shall take reasonable steps to mitigate any loss for which it claims against the other.",
        "A claim under this Agreement must be notified within {m} months of the event giving rise to it."),
    "Confidentiality": (
        "Each party shall keep the other party's Confidential Information confidential and use it only for this "
        "Agreement.",
        "A party may disclose Confidential Information to its advisers who are bound by duties of confidence.",
        "The duties in this Clause do not apply to information that is or becomes public other than by a breach.",
        "Within {d} days of termination each party shall return or destroy the other party's Confidential "
        "Information.",
        "The duties of confidence in this Clause continue for {m} months after this Agreement ends."),
    "Data protection": (
        "Each party shall comply with the data protection laws that apply to its processing of personal data.",
        "The Supplier shall process personal data only on the Customer's documented instructions.",
        "The Supplier shall notify the Customer of a personal data breach without undue delay.",
        "The Supplier shall not transfer personal data outside the European Economic Area without the Customer's "
        "consent.",
        "The Supplier shall delete the Customer's personal data within {d} days of the end of the Services."),
    "Records and audit": (
        "The Supplier shall keep complete and accurate records of the Services for at least {d} days after they "
        "are performed.",
        "The Customer may audit those records once in any contract year on reasonable notice.",
        "Each party shall bear its own costs of an audit unless it reveals an overcharge of more than {p} per "
        "cent.",
        "The Supplier shall give the auditors reasonable access to its premises, records and staff."),
    "Term and termination": (
        "This Agreement starts on the date it is signed and continues for an initial term of {m} months.",
        "Either party may terminate this Agreement for convenience by giving not less than {d} days' written "
        "notice to the other party.",
        "A party in material breach shall remedy it within {d} days of a written notice requiring it to do so.",
        "Either party may terminate this Agreement at once if the other party becomes insolvent.",
        "Termination does not affect any rights of the parties that accrued before it."),
    "Notices": (
        "A notice under this Agreement must be in writing and signed by an authorised representative.",
        "A notice sent by registered post is deemed received {d} days after posting.",
        "A notice delivered by hand is deemed received when it is left at the address of the recipient.",
        "Notices by electronic mail are valid only for operational matters and not for claims or termination."),
    "Disputes": (
        "The parties shall first try to resolve any dispute through their contract managers.",
        "If the contract managers cannot resolve a dispute within {d} days, either party may refer it to senior "
        "management.",
        "If senior management cannot resolve the dispute within a further {d} days, either party may refer it to "
        "mediation.",
        "Nothing in this Clause prevents a party from seeking urgent relief from a court."),
    "Force majeure": (
        "Neither party is liable for a delay caused by events beyond its reasonable control.",
        "A party affected by such an event shall notify the other party promptly and try to limit its effect.",
        "If such an event continues for more than {d} days, the other party may terminate the affected Services.",
        "Strikes of the affected party's own staff are not events beyond its reasonable control."),
    "Subcontracting and assignment": (
        "The Supplier may not subcontract any of the Services without the Customer's prior written consent.",
        "The Supplier remains responsible for the acts and omissions of its subcontractors.",
        "Neither party may assign this Agreement without the other party's written consent, which shall not be "
        "unreasonably withheld.",
        "The Supplier shall give the Customer {d} days' notice of any change of control of the Supplier."),
    "Insurance": (
        "The Supplier shall maintain professional indemnity insurance for the term and for {m} months after it.",
        "The Supplier shall produce its insurance certificates within {d} days of the Customer's request.",
        "The Supplier shall notify the Customer if any required insurance is cancelled or not renewed."),
    "Intellectual property": (
        "Each party keeps the intellectual property rights it owned before this Agreement.",
        "The Customer owns the intellectual property rights in Deliverables made specifically for it.",
        "The Supplier grants the Customer a licence to use the Supplier's materials in the Deliverables for the "
        "Customer's business.",
        "Each party shall tell the other promptly of any claim that the Deliverables infringe a third party's "
        "rights."),
    "General": (
        "This Agreement is the entire agreement between the parties about its subject matter.",
        "A waiver of any right under this Agreement is effective only if it is in writing.",
        "If any provision of this Agreement is found invalid, the other provisions remain in force.",
        "This Agreement may be signed in counterparts, each of which is an original.",
        "This Agreement is governed by the laws of the place where the Customer has its registered office."),
}
_GENERAL = (
    "The parties shall act in good faith in the performance of their obligations under this Clause.",
    "Each party shall bear its own costs in connection with this Clause unless this Agreement states otherwise.",
    "References in this Clause to the Services include any part of them.",
    "The Customer's contract manager is the point of contact for all matters under this Clause.",
    "The Supplier shall keep the Customer informed of its progress in meeting its obligations under this Clause.",
    "Any consent required under this Clause shall not be unreasonably withheld or delayed.",
    "Where this Clause requires a party to use reasonable endeavours, that party need not act against its "
    "commercial interests.",
    "The obligations in this Clause apply equally to any affiliate of the Supplier that performs the Services.",
    "This Clause is to be read together with the Schedule that describes the relevant Services.",
    "A failure to exercise a right under this Clause is not a waiver of that right.",
    "The Supplier shall comply with the Customer's reasonable site rules when performing its obligations under "
    "this Clause.",
    "If there is a conflict between this Clause and a Schedule, this Clause prevails unless the Schedule expressly "
    "says otherwise.",
    "The parties shall review the operation of this Clause at each quarterly service review.",
    "Any costs that arise from a breach of this Clause shall be borne by the party in breach.",
    "Minutes of meetings held under this Clause shall be kept by the Supplier and shared with the Customer.",
    "Each party shall ensure that its staff are aware of the requirements of this Clause.",
    "The Customer may appoint an adviser to exercise its rights under this Clause, subject to a duty of "
    "confidence.",
    "Nothing in this Clause creates a partnership or agency between the parties.",
    "The Supplier shall provide any reports required under this Clause in the form the Customer reasonably asks "
    "for.",
    "The parties' rights under this Clause are in addition to their rights under the general law.",
)
_ASPECTS = ("general terms", "Schedule 1 services", "Schedule 2 services", "Schedule 3 services", "project work",
            "managed services", "support", "hosting", "consultancy", "pilot phase", "transition", "exit")
_DISTRACTOR_DAYS = (7, 10, 14, 21, 30, 45, 90, 120)
_SUPPLIERS = ("Norland Systems B.V.", "Kestrel Data GmbH", "Aldwick Services Ltd", "Brightwater Solutions S.A.")
_CUSTOMERS = ("Harrow & Pike Retail Ltd", "Ostrava Logistics a.s.", "Marlowe Foods plc", "Vantage Clinics AG")

_REFUND_KEY = ("Refunds are due within {days} days of the Supplier's receipt of the Customer's written request "
               "for them.")
_REFUND_BODY = (
    "Where the Customer has paid for Services that the Supplier does not perform, or for Deliverables that the "
    "Customer rightly rejects under this Agreement, the Customer is entitled to a refund of the amounts paid for "
    "them.",
    "A request for a refund must be made in writing by an authorised representative of the Customer, must "
    "identify the invoice concerned and must state the amount claimed and the reason for the claim.",
    "The Supplier may ask for reasonable evidence in support of a request, but such a question does not delay the "
    "date on which the refund is due.",
    _REFUND_KEY,
    "The Supplier shall pay each refund to the account from which the original payment was made, unless the "
    "parties agree otherwise in writing.",
    "Refunds are paid in the currency of the original invoice, without deduction of bank charges and without any "
    "set-off against other amounts that the Supplier claims from the Customer.",
    "Where only part of an invoice is refundable, the Supplier shall refund that part and may invoice any "
    "remainder separately with a statement of the Services it relates to.",
    "A refund that is paid late bears interest at the rate that applies to late payments by the Customer.",
    "The Supplier may not withhold a refund because of a dispute that does not concern the invoice to which the "
    "refund relates.",
    "Nothing in this Clause limits any other right or remedy of the Customer under this Agreement or at law.",
)


def _clause_body(rng: np.random.Generator, topic: str) -> str:
    """A paragraph: three or more of the topic's sentences and six to ten general ones, none twice."""
    pool = _TOPICS[topic]
    own = rng.choice(len(pool), size=int(rng.integers(3, len(pool) + 1)), replace=False).tolist()
    general = rng.choice(len(_GENERAL), size=int(rng.integers(6, 11)), replace=False).tolist()
    sentences = [pool[i].format(d=int(rng.choice(_DISTRACTOR_DAYS)), p=int(rng.integers(5, 40)),
                                m=int(rng.choice((6, 12, 18, 24, 36)))) for i in own]
    for i in general:  # each general sentence at a random place after the first sentence
        sentences.insert(int(rng.integers(1, len(sentences) + 1)), _GENERAL[i])
    return " ".join(sentences)


@lru_cache(maxsize=4)
def contract(seed: int = 0) -> Contract:
    """A services agreement of about 33K tokens for `seed`, its refund clause placed in the middle part.

    Invariants: exactly one clause mentions refunds (the "Refunds" clause, holding `_REFUND_KEY` with
    `REFUND_DAYS`); every other day count differs from `REFUND_DAYS`; no clause mentions cryptocurrency.
    """
    rng = _rng("contract", seed)
    supplier, customer = str(rng.choice(_SUPPLIERS)), str(rng.choice(_CUSTOMERS))
    heading = (f"MASTER SERVICES AGREEMENT\n\nThis Agreement is made between {supplier} (\"the Supplier\") and "
               f"{customer} (\"the Customer\"). The parties agree as follows.\n\n")
    titles = [f"{topic}: {aspect}" for aspect in _ASPECTS for topic in _TOPICS]
    bodies: list[tuple[str, str]] = []
    size = len(heading)
    for index in rng.permutation(len(titles)).tolist():
        if size >= CONTRACT_CHARS:
            break
        title = titles[index]
        bodies.append((title, _clause_body(rng, title.split(":", 1)[0])))
        size += len(title) + len(bodies[-1][1]) + 8  # "NNN. " and the line breaks
    refund_body = " ".join(_REFUND_BODY).format(days=REFUND_DAYS)
    at = int(rng.integers(len(bodies) // 4, 3 * len(bodies) // 4))
    bodies[at:at] = [("Refunds", refund_body)]
    clauses = tuple(Clause(n, title, body) for n, (title, body) in enumerate(bodies, start=1))
    text = heading + "\n\n".join(c.text for c in clauses) + "\n"
    return Contract(text=text, clauses=clauses, supplier=supplier, customer=customer)


_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")


def _refund_clause(agreement: Contract) -> Clause:
    found = [c for c in agreement.clauses if "refund" in c.body.lower()]
    if len(found) != 1:
        raise ValueError(f"the contract must have one clause about refunds, not {len(found)}.")
    return found[0]


def _refund_sentence(agreement: Contract) -> str:
    """The refund clause's sentence that says within how many days refunds are due."""
    sentences = _SENTENCE_END.split(_refund_clause(agreement).body)
    (key,) = [s for s in sentences if re.search(r"\bwithin \d+ days\b", s)]
    return key


def _refund_days(agreement: Contract) -> int:
    match = re.search(r"\bwithin (\d+) days\b", _refund_sentence(agreement))
    assert match is not None  # _refund_sentence found the sentence by this very pattern
    return int(match.group(1))


def _crypto_clauses(agreement: Contract) -> list[int]:
    return [c.number for c in agreement.clauses if "cryptocurrenc" in c.text.lower()]


# ---- log ----------------------------------------------------------------------------------------

_INFO = ("GET /api/orders/{n} 200 in {ms} ms", "GET /static/img/{n}.png 404 in {ms} ms", "user u{n} signed in",
         "POST /api/basket 201 in {ms} ms", "cache hit ratio {p}%", "job export-{n} finished in {ms} ms",
         "worker {w} heartbeat", "scheduled task cleanup started", "config reloaded from disk")
_WARN = ("slow query took {ms} ms", "retrying call to {svc} after a transient error (attempt {k})",
         "error rate at {p}% over the last minute", "disk usage at {p}%", "session for user u{n} expires soon")
_ERROR = {"E400": "bad request payload rejected on /api/basket", "E401": "invalid token for user u{n}",
          "E404": "resource not found: /api/orders/{n}", "E429": "rate limit exceeded for client c{n}",
          "E500": "unhandled exception in handler {svc}", "E502": "bad gateway from {svc}",
          "E503": "upstream {svc} unavailable", "E504": "timeout waiting for {svc}"}
_COMPONENTS = ("api", "auth", "db", "worker", "scheduler")
_SERVICES = ("payments", "inventory", "search", "mailer", "pricing")


def log(seed: int = 0) -> str:
    """An application log for `seed`: about 3,000 INFO/WARN lines and exactly 37 ERROR lines.

    A line is "YYYY-MM-DD HH:MM:SS LEVEL [component] message" in time order; an ERROR's message starts with its
    code. Three to five codes of `CODES` occur, each at least once; no other line holds a code.
    """
    rng = _rng("log", seed)
    others = int(rng.integers(2_900, 3_101))
    total = others + ERROR_LINES
    codes = sorted(str(c) for c in rng.choice(CODES, size=int(rng.integers(3, 6)), replace=False))
    assigned = codes + [str(c) for c in rng.choice(codes, size=ERROR_LINES - len(codes))]
    rng.shuffle(assigned)
    errors = dict(zip(sorted(rng.choice(total, size=ERROR_LINES, replace=False).tolist()), assigned, strict=True))
    at = datetime(2024, 1, 1) + timedelta(days=int(rng.integers(0, 365)), hours=6)
    steps = rng.integers(1, 20, size=total).tolist()
    lines = []
    for i in range(total):
        at += timedelta(seconds=int(steps[i]))
        values = {"n": int(rng.integers(100, 100_000)), "ms": int(rng.integers(3, 2_500)), "p": int(rng.integers(1, 99)),
                  "w": int(rng.integers(1, 9)), "k": int(rng.integers(1, 4)), "svc": str(rng.choice(_SERVICES))}
        if i in errors:
            level, message = "ERROR", f"{errors[i]} " + _ERROR[errors[i]].format(**values)
        elif rng.random() < 0.12:
            level, message = "WARN", str(rng.choice(_WARN)).format(**values)
        else:
            level, message = "INFO", str(rng.choice(_INFO)).format(**values)
        lines.append(f"{at:%Y-%m-%d %H:%M:%S} {level:<5} [{rng.choice(_COMPONENTS)}] {message}")
    return "\n".join(lines) + "\n"


_LOG_LINE = re.compile(r"^\S+ \S+ (?P<level>INFO|WARN|ERROR)\s+\[\w+\] (?P<message>.*)$")


def log_records(text: str) -> list[tuple[str, str]]:
    """(level, message) of every line of a generated log, in order; ValueError for a line of another form."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _LOG_LINE.match(line)
        if match is None:
            raise ValueError(f"log line {number} is not 'date time LEVEL [component] message': {line!r}")
        records.append((match.group("level"), match.group("message")))
    return records


def _error_codes(text: str) -> list[str]:
    return [message.split()[0] for level, message in log_records(text) if level == "ERROR"]


def _error_count(text: str) -> int:
    return len(_error_codes(text))


def _first_code(text: str) -> str:
    return _error_codes(text)[0]


def _distinct_codes(text: str) -> list[str]:
    return sorted(set(_error_codes(text)))


def _error_share(text: str) -> float:
    return round(100 * _error_count(text) / len(log_records(text)), 1)


# ---- the questions ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Question:
    """One question over one dataset: its `id`, text, metric, the answer form it asks for, and the code that
    computes its answer from the dataset's data."""

    id: str
    dataset: str
    text: str
    metric: str
    form: str
    answer: Callable[[Any], Any]


QUESTIONS: tuple[Question, ...] = (
    Question("tickets-billing", "tickets", "How many support tickets are in the billing area?", "number", "count",
             _billing_count),
    Question("tickets-top-area", "tickets", "Which area has the most tickets?", "word", "label", _top_area),
    Question("tickets-first-urgent", "tickets",
             "Of the tickets with the highest priority, which one was created first? Give its id.", "word", "id",
             _first_of_top_priority),
    Question("tickets-2021", "tickets", "Is there any ticket that was created in 2021?", "yes_no", "yes/no",
             _any_in_2021),
    Question("tickets-earliest", "tickets", "On what date was the earliest ticket created?", "date", "date",
             _earliest_date),
    Question("contract-refund-quote", "contract", "Quote the contract's clause about refunds verbatim.", "quote",
             "verbatim quote", _refund_sentence),
    Question("contract-refund-days", "contract", "Within how many days must a refund be paid under the contract?",
             "number", "count", _refund_days),
    Question("contract-crypto", "contract",
             "Which clauses of the contract mention cryptocurrency? Give their numbers.", "set", "empty list",
             _crypto_clauses),
    Question("log-errors", "log", "How many ERROR lines are in the log?", "number", "count", _error_count),
    Question("log-first-code", "log", "What is the error code of the first ERROR line in the log?", "word", "id",
             _first_code),
    Question("log-codes", "log", "Which distinct error codes appear in the log's ERROR lines? List them.", "set",
             "list", _distinct_codes),
    Question("log-share", "log",
             "What percentage of the log's lines are ERROR lines? Round to one decimal place.", "number",
             "rounded number", _error_share),
)

def _contract_data(seed: int) -> tuple[Contract, str]:
    agreement = contract(seed)
    return agreement, agreement.text


def _same(make: Callable[[int], Any]) -> Callable[[int], tuple[Any, Any]]:
    def data(seed: int) -> tuple[Any, Any]:
        made = make(seed)
        return made, made

    return data


# dataset -> (the data its answers are computed from, the value bound as the input), for a seed
DATASETS: dict[str, Callable[[int], tuple[Any, Any]]] = {
    "tickets": _same(tickets), "contract": _contract_data, "log": _same(log),
}


def rows_for(datasets: Sequence[str], seed: int) -> list[Row]:
    """The rows of `datasets` for `seed`, in `QUESTIONS` order; each binds its dataset under the dataset's name."""
    rows = []
    for name in datasets:
        data, bound = DATASETS[name](seed)
        for question in (q for q in QUESTIONS if q.dataset == name):
            answer = question.answer(data)
            rows.append(Row(id=question.id, question=question.text, inputs={name: bound}, answers=[answer],
                            metric=question.metric, meta={"dataset": name, "form": question.form}))
    return rows


class OrdinaryTask:
    """The ordinary questions of some datasets, their data made for the evaluation's seed (see the module docs)."""

    fixed_size = True
    by_size = False

    def __init__(self, name: str, datasets: tuple[str, ...]) -> None:
        self.name = name
        self.datasets = datasets
        self.description = __doc__ or ""

    def count(self, size: int) -> int:
        return sum(1 for q in QUESTIONS if q.dataset in self.datasets)

    def _rows(self, seed: int) -> RowsTask:
        return _rows_task(self.name, self.datasets, seed)

    def generate(self, size: int, *, seed: int = 0, index: int = 0) -> Instance:
        """Question `index` (in `QUESTIONS` order) over this task's datasets made for `seed`."""
        return self._rows(seed).generate(size, seed=seed, index=index)

    def score(self, instance: Instance, prediction: Any) -> float:
        return self._rows(instance.seed).score(instance, prediction)


@lru_cache(maxsize=8)
def _rows_task(name: str, datasets: tuple[str, ...], seed: int) -> RowsTask:
    return RowsTask(name, lambda: rows_for(datasets, seed), by_size=False, description=__doc__ or "")


def ordinary_task(argument: str) -> OrdinaryTask:
    """`ordinary` (every dataset) or `ordinary:<dataset>`; ConfigError naming the datasets otherwise."""
    key = argument.strip().lower()
    if not key:
        return OrdinaryTask("ordinary", NAMES)
    if key not in NAMES:
        raise ConfigError(f"unknown ordinary dataset {argument!r}: use ordinary, or ordinary: followed by one of "
                          f"{', '.join(NAMES)} (or all).")
    return OrdinaryTask(f"ordinary:{key}", (key,))
