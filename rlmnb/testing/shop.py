"""Tutorial 06's data and scripted models: a year of shop sales held the four ways big tables are held.

`shop_data(root)` writes, with DuckDB, seeded and only once per folder:

    sales/month=2025-01/... .parquet   a Hive-partitioned Parquet dataset (bound with -f)
    products.parquet                   the catalogue (read as a Polars LazyFrame)
    stores.parquet                     the stores and their regions (read as a DuckDB relation)
    reviews/part-*.parquet             customer reviews with free text (read as a Dask DataFrame)

Unhappy reviews name what went wrong only in their wording; each product has one complaint its
unhappy reviewers mostly share, so the sub-model has to read them. `shop_models()` gives the root
script a capable model writes for the tutorial's question (sql() for the join, Dask for the reviews,
llm_query_batched over the reviews it picked) and the sub-model that reads one review.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmnb.testing.generators import GENERATED_AT
from rlmnb.testing.scripted import ScriptedLM

__all__ = ["CATEGORIES", "COMPLAINTS", "REGIONS", "SHOP_LOOK", "SHOP_READ", "SHOP_REVENUE", "SHOP_REVIEWS",
           "SHOP_SUBMIT", "ShopData", "complaint_in", "read_review", "shop_data", "shop_models"]

CATEGORIES = ("audio", "kitchen", "outdoor", "fitness", "office")
REGIONS = ("North", "South", "East", "West")
COMPLAINTS = ("battery", "noise", "size", "delivery", "price", "quality")
_CITIES = ("Aberdeen", "Bergen", "Cork", "Dundee", "Exeter", "Faro", "Genoa", "Hull", "Izmir", "Jena")
# how an unhappy review says it: the complaint word never appears, only what it implies
_SAYINGS = {
    "battery": ("it was flat again after two hours", "had to charge it every single evening"),
    "noise": ("it rattles and hums so loudly", "the whirring kept the whole house awake"),
    "size": ("far too small, nothing like the photos", "it did not fit anywhere, enormous"),
    "delivery": ("the parcel arrived three weeks late", "the courier left it in the rain, box crushed"),
    "price": ("costs twice what it is worth", "overpriced for what you get"),
    "quality": ("a seam split on the first day", "cheap plastic that cracked in a week"),
}
_PRAISE = ("works exactly as described", "lovely, would buy again", "does the job well", "great value, recommended")


@dataclass(frozen=True)
class ShopData:
    root: Path
    sales_rows: int
    reviews_rows: int

    def __repr__(self) -> str:
        return f"ShopData({self.root.name}: {self.sales_rows:,} sales, {self.reviews_rows:,} reviews)"


def complaint_in(text: str) -> str:
    """Which complaint a review's wording implies, or NONE (the ground truth the sub-model reads)."""
    for complaint, sayings in _SAYINGS.items():
        if any(s in text for s in sayings):
            return complaint
    return "NONE"


def shop_data(root: Path, *, sales_rows: int = 2_000_000, reviews_rows: int = 50_000, products: int = 400,
              stores: int = 40) -> ShopData:
    """Write the shop's tables under `root` (once: an existing complete folder is reused)."""
    import duckdb

    root = Path(root)
    done = root / f".complete-{sales_rows}-{reviews_rows}-{products}-{stores}"
    if done.exists():
        return ShopData(root, sales_rows, reviews_rows)
    root.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET threads = 2; SET preserve_insertion_order = true; SET enable_progress_bar = false")
    con.execute(f"""CREATE TABLE products AS SELECT
        i AS product_id,
        {_pick(CATEGORIES, "hash(i * 3)")} AS category,
        'Item ' || lpad(CAST(i AS VARCHAR), 3, '0') AS name,
        round(5 + (hash(i * 5) % 19500) / 100.0, 2) AS price,
        {_pick(COMPLAINTS, "hash(i * 11)")} AS main_complaint,
        1.2 + (hash(i * 13) % 300) / 100.0 AS quality
        FROM range({products}) t(i)""")
    con.execute(f"""COPY (SELECT product_id, category, name, price FROM products ORDER BY product_id)
        TO '{root / "products.parquet"}' (FORMAT parquet)""")
    con.execute(f"""COPY (SELECT i AS store_id, {_pick(_CITIES, "hash(i * 7)")} || ' ' || CAST(i AS VARCHAR) AS city,
        {_pick(REGIONS, "i")} AS region FROM range({stores}) t(i) ORDER BY i)
        TO '{root / "stores.parquet"}' (FORMAT parquet)""")
    con.execute(f"""COPY (SELECT
        i AS sale_id,
        DATE '2025-01-01' + CAST(hash(i * 17) % 365 AS INTEGER) AS day,
        CAST(hash(i * 19) % {stores} AS INTEGER) AS store_id,
        CAST(hash(i * 23) % {products} AS INTEGER) AS product_id,
        CAST(1 + hash(i * 29) % 4 AS INTEGER) AS quantity
        FROM range({sales_rows}) t(i))
        TO '{root / "sales_raw.parquet"}' (FORMAT parquet)""")
    con.execute("SET threads = 1")  # partitioned writes keep row order only on one thread: same files every time
    con.execute(f"""COPY (SELECT s.sale_id, s.day, s.store_id, s.product_id, s.quantity,
        round(s.quantity * p.price, 2) AS amount, strftime(s.day, '%Y-%m') AS month
        FROM read_parquet('{root / "sales_raw.parquet"}') s JOIN products p USING (product_id)
        ORDER BY s.sale_id)
        TO '{root / "sales"}' (FORMAT parquet, PARTITION_BY (month), OVERWRITE_OR_IGNORE true)""")
    (root / "sales_raw.parquet").unlink()
    con.execute("SET threads = 2")
    (root / "reviews").mkdir(exist_ok=True)
    sayings = [(c, s) for c, pair in _SAYINGS.items() for s in pair]
    con.execute("CREATE TABLE sayings (complaint VARCHAR, k INTEGER, saying VARCHAR)")
    con.executemany("INSERT INTO sayings VALUES (?, ?, ?)",
                    [(c, k % 2, s) for k, (c, s) in enumerate(sayings)])
    con.execute(f"""CREATE TABLE reviews AS SELECT
        i AS review_id, r.product_id,
        CAST(least(5, greatest(1, round(p.quality + (hash(i * 31) % 300) / 100.0))) AS INTEGER) AS rating,
        CASE WHEN hash(i * 37) % 10 < 7 THEN p.main_complaint
             ELSE {_pick(COMPLAINTS, "hash(i * 41)")} END AS complaint,
        CAST(hash(i * 43) % 2 AS INTEGER) AS k
        FROM (SELECT i, CAST(hash(i * 47) % {products} AS INTEGER) AS product_id FROM range({reviews_rows}) t(i)) r
        JOIN products p USING (product_id)""")
    for part in range(4):
        lo, hi = part * reviews_rows // 4, (part + 1) * reviews_rows // 4
        con.execute(f"""COPY (SELECT r.review_id, r.product_id, r.rating,
            CASE WHEN r.rating <= 2 THEN 'Bought it in spring: ' || s.saying || '.'
                 ELSE {_pick(_PRAISE, "hash(r.review_id * 53)")} || '.' END AS text
            FROM reviews r JOIN sayings s ON s.complaint = r.complaint AND s.k = r.k
            WHERE r.review_id >= {lo} AND r.review_id < {hi} ORDER BY r.review_id)
            TO '{root / "reviews" / f"part-{part}.parquet"}' (FORMAT parquet)""")
    con.close()
    for path in root.rglob("*"):  # fixed times: the same files give the same summaries (and replays)
        if path.is_file():
            os.utime(path, (GENERATED_AT, GENERATED_AT))
    done.touch()
    return ShopData(root, sales_rows, reviews_rows)


def _pick(options: tuple[str, ...], key: str) -> str:
    """SQL choosing one of `options` by a hash-like integer expression."""
    items = ", ".join("'" + o.replace("'", "''") + "'" for o in options)
    return f"[{items}][CAST({key} % {len(options)} AS INTEGER) + 1]"


# ---- the scripted models ---------------------------------------------------------------------------------
SHOP_LOOK = '''Four inputs: let me see what each one is and how big the sales table is, with SQL (it runs out of core).
```python
for name in inputs:
    print(name, type(inputs[name]).__name__)
print(sql("SELECT count(*) AS sales, min(day) AS first_day, max(day) AS last_day FROM sales"))
```'''

SHOP_REVENUE = '''Revenue by category in the North region for 2025: one join across the sales files, the catalogue and the
stores, all in SQL.
```python
by_category = sql("""
    SELECT p.category, round(sum(s.amount), 2) AS revenue
    FROM sales s JOIN products p USING (product_id) JOIN stores st USING (store_id)
    WHERE st.region = 'North' AND s.day BETWEEN DATE '2025-01-01' AND DATE '2025-12-31'
    GROUP BY 1 ORDER BY revenue DESC""")
print(by_category)
top = by_category.category[0]
```'''

SHOP_REVIEWS = '''Now the reviews, a Dask DataFrame: average rating per product of that category, computed by Dask, then the
unhappy reviews (rating 2 or less) of the lowest-rated product.
```python
catalogue = sql(f"SELECT product_id, name FROM products WHERE category = '{top}'")
reviews = inputs["reviews"]
mine = reviews[reviews.product_id.isin(catalogue.product_id.tolist())]
ratings = mine.groupby("product_id").rating.agg(["mean", "count"]).compute().sort_values("mean")
print(ratings.head(3).round(2))
worst = int(ratings.index[0])
worst_name = catalogue.set_index("product_id").name[worst]
unhappy = mine[(mine.product_id == worst) & (mine.rating <= 2)].text.compute().tolist()
print(len(unhappy), "unhappy reviews of", worst_name, "- e.g.", unhappy[:2])
```'''

SHOP_READ = '''The complaint is only implied by each review's wording, so the sub-model reads every unhappy review, all in
one batch, and code counts the answers.
```python
from collections import Counter

question = ("What does this customer complain about? Answer with one word: battery, noise, size, delivery, "
            "price or quality (NONE if nothing).\\n\\nReview: ")
answers = llm_query_batched([question + text for text in unhappy])
complaints = Counter(a.strip().lower() for a in answers if a.strip().upper() != "NONE")
print(complaints.most_common(3))
```'''

SHOP_SUBMIT = '''Every unhappy review was read once; the most common complaint is clear.
```python
submit({"category": top, "product": worst_name, "complaint": complaints.most_common(1)[0][0],
        "unhappy_reviews": len(unhappy)})
```'''


def read_review(messages: Any) -> str:
    """The complaint a review in the prompt implies (one word), as a careful reader would say it."""
    prompt = messages if isinstance(messages, str) else str(messages[-1].get("content", "")) if messages else ""
    review = re.split(r"Review: ", prompt, maxsplit=1)[-1]
    return complaint_in(review)


def shop_models() -> tuple[ScriptedLM, ScriptedLM]:
    """The scripted root (sql() join, Dask aggregate, batched reading) and the review-reading sub-model."""
    root = ScriptedLM([SHOP_LOOK, SHOP_REVENUE, SHOP_REVIEWS, SHOP_READ, SHOP_SUBMIT], name="scripted-root")
    return root, ScriptedLM(read_review, name="scripted-sub")
