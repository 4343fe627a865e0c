"""The performance suite (issue 6): ``python -m bench`` prints one table.

Sections: publish throughput to a real pipe against the official Python SDK and raw NDJSON
writes (:mod:`.throughput`), patch cost against stored size (:mod:`.patch_cost`), a slow client
(:mod:`.slow_client`), 10,000 lifetimes on one owner (:mod:`.scale`) and what
``agent-meta proxy`` adds to a stream over a pipe (:mod:`.proxy`). Figures are printed,
never asserted; ``--smoke`` runs every section with tiny counts so CI keeps the suite working.
"""
