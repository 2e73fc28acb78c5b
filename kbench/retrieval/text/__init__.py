"""Text analysis for the keyword legs: tokenizers, stemmers, stop words, and an emulation of PostgreSQL's
full-text search (default parser; the ``simple``, ``english``, ``french``, ``german``, ``portuguese``,
``russian`` and ``spanish`` configurations; tsvector/tsquery, ts_rank and ts_rank_cd).

Everything here is a small pure function over strings and plain Python/numpy values, so each piece can be
checked on its own against its reference (rank_bm25, a real PostgreSQL).
"""
