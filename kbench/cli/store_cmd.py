"""kbench store snapshot DSN --out DIR: a live production store's rows as a kbench dataset folder."""
from __future__ import annotations

import os
from pathlib import Path

from kbench import store, tracking
from kbench.cli import add_command
from kbench.errors import ConfigError


def add_parser(sub) -> None:
    p = add_command(sub, "store")
    group = p.add_subparsers(dest="store_command", required=True, metavar="SUBCOMMAND")
    s = group.add_parser("snapshot", help="export a live PostgreSQL's archon_crawled_pages (read-only) to a kbench "
                                          "span dataset folder: pages rebuilt from their chunks, chunking recorded")
    s.add_argument("dsn", metavar="DSN", help="env:NAME to read the DSN from the environment variable NAME "
                                              "(recommended: a DSN on a command line is visible to other users), or "
                                              "the DSN itself; never printed")
    s.add_argument("--out", required=True, help="a new folder for docs/, questions.jsonl and snapshot.json")
    s.add_argument("--schema", help="the schema of archon_crawled_pages (default: the DSN's search_path)")
    s.add_argument("--questions", help="a live question set folder (questions.jsonl naming documents by URL or "
                                       "source id) to map onto the snapshot's files")
    s.add_argument("--allow-write", action="store_true", help="go on when the role could write (still read-only)")
    s.set_defaults(func=run_snapshot)


def run_snapshot(args) -> int:
    dsn = store.live_store.dsn_from_env(args.dsn[4:]) if args.dsn.startswith("env:") else args.dsn
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: exists and is not an empty folder; give a new folder")
    if out.is_dir():
        os.rmdir(out)  # write_complete renames a finished folder into place
    questions = Path(args.questions) if args.questions else None
    dsn_from = f"the DSN in {args.dsn[4:]}" if args.dsn.startswith("env:") else "the DSN argument"
    live = store.live_store.LiveStore(dsn, args.schema, args.allow_write, dsn_from=dsn_from, schema_from="--schema")
    manifest = {}
    try:
        tracking.run_folder.write_complete(
            out, lambda folder: manifest.update(store.live_store.write_snapshot(live, folder, questions)))
    finally:
        live.close()
    print(f"{out}: {manifest['pages']} pages, {manifest['rows']} chunks of {manifest['embedding_model']} "
          f"({manifest['embedding_dimension']}-d) from schema {manifest['schema']}; {manifest['questions']} questions")
    return 0
