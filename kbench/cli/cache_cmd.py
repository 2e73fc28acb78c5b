"""kbench cache stats | clear [--older-than AGE]"""
from __future__ import annotations

import argparse
from datetime import datetime

from kbench.cli import add_command
from kbench.cli.tables import format_table
from kbench.paths import workspace_dir
from kbench.cache import cache_stats, clear_cache, parse_age


def _age(text: str) -> float:

    try:
        return parse_age(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--older-than: ")) from None


def add_parser(sub) -> None:
    p = add_command(sub, "cache")
    csub = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    st = csub.add_parser("stats", help="entries, files and size per cache namespace (model or chunker)")
    st.set_defaults(func=stats)
    st.add_argument("--workspace", default="experiments", help="workspace folder (default: experiments, "
                                                               "or KBENCH_WORKSPACE)")
    cl = csub.add_parser("clear", help="delete cached embeddings and chunks (all, or those unused for a while)")
    cl.add_argument("--older-than", metavar="AGE", default=None, type=_age,
                    help="only shards not written or read for AGE: a number and a unit s/m/h/d/w, e.g. 7d")
    cl.set_defaults(func=clear)
    cl.add_argument("--workspace", default="experiments", help="workspace folder (default: experiments, "
                                                               "or KBENCH_WORKSPACE)")


def _cache_root(args):

    return workspace_dir(args.workspace) / "cache"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def stats(args) -> int:

    root = _cache_root(args)
    rows = cache_stats(root)
    if not rows:
        print(f"{root}: empty (no cached embeddings or chunks)")
        return 0
    table = [[r.kind, r.namespace, r.label, r.entries, r.shards, _size(r.bytes),
              datetime.fromtimestamp(r.newest).strftime("%Y-%m-%d %H:%M")] for r in rows]
    print(format_table(["cache", "namespace", "model / chunker", "entries", "files", "size", "last used"], table))
    total = sum(r.bytes for r in rows)
    print(f"\n{root}: {sum(r.entries for r in rows)} entries in {sum(r.shards for r in rows)} files, {_size(total)}")
    return 0


def clear(args) -> int:

    root = _cache_root(args)
    result = clear_cache(root, args.older_than)
    scope = "all" if args.older_than is None else f"unused for more than {args.older_than / 86400:g} days"
    print(f"{root}: removed {result.files} files ({_size(result.bytes)}), {scope}")
    return 0
