"""Ranking variants on one ingest: hybrid retrieval's constants changed in-process.

Ingest does not depend on the ranking rules, so a data set is ingested once (LongMemEval:
the data kept by ``bench/longmemeval.py --keep-data DIR``; LoCoMo: ingested here, a
minute or two) and its questions are asked again under each variant. A variant names
module constants of the hybrid ranking and their values for its run, e.g.
``nb5:fusion.HYBRID_NEIGHBOR_WEIGHT=0.5`` (modules: ``fusion``, ``hybrid``, ``temporal``, ``lex`` in
``memoryos_actors.tiers``); ``base`` (no setting) is the code as it is. Prints, per
variant, the overall result and the result per question type (LongMemEval: hits of n;
LoCoMo: any@10 in %). Recall only: the latencies of such runs mean nothing.

    python bench/recall_sweep.py lme500 --keep-data DIR --variant base \\
        --variant nb5:fusion.HYBRID_NEIGHBOR_WEIGHT=0.5
    python bench/recall_sweep.py locomo --variant base --variant us2:hybrid.USER_SIDE_WEIGHT=2
    python bench/recall_sweep.py locomo-long --variant base

Data sets: ``lmeN`` (the LongMemEval global haystack of the first N items, kept data of
``memoryos-hybrid`` needed), ``locomo`` (one user per conversation), ``locomo-long`` (all
conversations as one user). Settings of the kept data (embedder included) come from it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

__all__ = ["main", "parse_variant"]


def parse_variant(text: str) -> tuple[str, list[tuple[str, str, Any]]]:
    """``"name:module.CONST=value,..."`` -> (name, [(module, CONST, value)]); values are
    read as JSON (numbers, true/false), else kept as strings."""
    name, _, rest = text.partition(":")
    settings = []
    for part in filter(None, rest.split(",")):
        target, _, raw = part.partition("=")
        module, _, const = target.partition(".")
        if module not in ("fusion", "hybrid", "temporal", "lex") or not const or not raw:
            raise SystemExit(f"bad variant setting {part!r}; want module.CONST=value")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        settings.append((module, const, value))
    return name, settings


def _modules() -> dict[str, Any]:
    import memoryos_actors.lexicon as lex
    import memoryos_actors.tiers.fusion as fusion
    import memoryos_actors.tiers.hybrid as hybrid
    import memoryos_actors.tiers.temporal as temporal

    return {"fusion": fusion, "hybrid": hybrid, "temporal": temporal, "lex": lex}


def _run(variants: Sequence[str], ask: Callable[[], str]) -> None:
    modules = _modules()
    for text in variants:
        name, settings = parse_variant(text)
        saved = []
        for module, const, value in settings:
            if not hasattr(modules[module], const):
                raise SystemExit(f"{module} has no constant {const}")
            # Set wherever the name is bound: a module that imported the constant by
            # name (hybrid imports fusion's weights) reads its own binding.
            for mod in modules.values():
                if hasattr(mod, const):
                    saved.append((mod, const, getattr(mod, const)))
                    setattr(mod, const, value)
        try:
            started = time.perf_counter()
            print(f"{name}: {ask()} ({time.perf_counter() - started:.0f} s)", flush=True)
        finally:
            for mod, const, value in reversed(saved):
                setattr(mod, const, value)


def _lme(length: int, keep_data: Path, variants: Sequence[str], data: str | None) -> None:
    from bench.longmemeval import _tally, build_haystack, load_items, resolve_data_path, split_of
    from memoryos_actors import MemoryConfig, MemoryOS

    kept = keep_data / str(length) / "memoryos-hybrid"
    marker = json.loads((kept / "ingested.json").read_text(encoding="utf-8"))
    items = load_items(resolve_data_path(data))
    haystack = build_haystack(items, length)
    split = split_of(items)
    index = {k: int(v) for k, v in marker["pages"].items()}
    with tempfile.TemporaryDirectory(prefix="recall-sweep-") as work:
        shutil.copytree(kept / "data", Path(work) / "data")
        config = MemoryConfig(**marker["key"]["config"])
        with MemoryOS.open(Path(work) / "data", config=config) as mem:

            def ask() -> str:
                hits = {}
                complete = 0  # tune questions with every evidence page in the top 10
                for q in haystack.questions:
                    ctx = mem.retrieve("longmemeval", q.question, timestamp=q.timestamp)
                    got = [index.get(str(p), -1) for p in ctx.page_ids()]
                    hits[q.question_id] = not q.pages.isdisjoint(got)
                    if split.get(q.question_id) == "tune" and not q.abstention:
                        complete += q.pages <= set(got[:10])
                # Tune on the tune questions only: their types in full, validation's total.
                t = _tally(haystack, hits, split)
                tune, val = t["splits"]["tune"], t["splits"]["validation"]
                types = " ".join(f"{k} {r['hits']}/{r['n']}" for k, r in tune["per_type"].items())
                o, to, vo = t["overall"], tune["overall"], val["overall"]
                return (
                    f"all {o['hits']}/{o['n']} = {100 * o['recall']:.1f}% | tune "
                    f"{to['hits']}/{to['n']} = {100 * to['recall']:.1f}%: {types} | "
                    f"validation {vo['hits']}/{vo['n']} | tune recall_all@10 {complete}"
                )

            _run(variants, ask)


def _locomo(long: bool, variants: Sequence[str], data: str | None) -> None:
    from bench.locomo import (
        RecallAccumulator,
        _MemoryOSSystem,
        load_locomo,
        long_history,
        resolve_data_path,
        score_ranking,
    )

    conversations = load_locomo(resolve_data_path(data))
    if long:
        conversations = [long_history(conversations)]
    with tempfile.TemporaryDirectory(prefix="recall-sweep-") as work:
        system = _MemoryOSSystem("hybrid", Path(work) / "data", 20)
        try:
            for conversation in conversations:
                system.ingest(conversation, lambda: None)

            def ask() -> str:
                acc = RecallAccumulator()
                for conversation in conversations:
                    for q in conversation.questions:
                        acc.add(
                            q.category,
                            score_ranking(
                                system.rank(conversation, q), conversation.pages, q.evidence
                            ),
                        )
                s = acc.summary()
                cats = " ".join(
                    f"{v['name']} {100 * v['any@10']:.1f}"
                    for v in s["per_category"].values()
                    if v["n"]
                )
                return f"any@10 {100 * s['overall']['any@10']:.2f}% | {cats}"

            _run(variants, ask)
        finally:
            system.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python bench/recall_sweep.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("dataset", help="lmeN (N items), locomo or locomo-long")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="name[:module.CONST=value,...] (repeatable; default: base)",
    )
    parser.add_argument(
        "--keep-data",
        default=None,
        help="kept data of bench/longmemeval.py --keep-data (lmeN only)",
    )
    parser.add_argument("--data", default=None, help="the data set's JSON file")
    args = parser.parse_args(argv)
    variants = args.variant or ["base"]
    for v in variants:
        parse_variant(v)  # fail before a long ingest
    if args.dataset.startswith("lme"):
        if not args.keep_data:
            parser.error("lmeN needs --keep-data DIR (from bench/longmemeval.py --keep-data)")
        _lme(int(args.dataset[3:]), Path(args.keep_data), variants, args.data)
    elif args.dataset in ("locomo", "locomo-long"):
        _locomo(args.dataset == "locomo-long", variants, args.data)
    else:
        parser.error(f"unknown dataset {args.dataset!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
