"""Renders the Weir and Flink scripts of scripts/compare (README.md, "Queries").

A script is `queries/bids.<engine>.sql` (the bids table) followed by
`queries/<query>.<engine>.sql`, with `${...}` filled in: `bids_path`, `bids_format`,
`bids_options` (the bids table's extra options), `sink_options` (the result table's), and
`auctions_path`, `auctions_format`, `auctions_options` (the bounded auctions table of
`enrichment`; the other queries have none). Imported by compare.py and flink_runner.py.
"""

import string
from pathlib import Path

QUERY_DIR = Path(__file__).resolve().parent / "queries"


def render(engine, query, out_path, **values):
    """Writes the script of `query` for `engine` (`weir` or `flink`) into out_path."""
    text = "\n".join(
        (QUERY_DIR / f"{name}.{engine}.sql").read_text() for name in ("bids", query)
    )
    out_path.write_text(string.Template(text).substitute(values))
    return out_path
