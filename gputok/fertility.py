"""Fertility: how many tokens tokenizers spend on a corpus, side by side, before a model pays for it.

``fertility([A, B], files)`` encodes every line of every file with each tokenizer (the batch API,
no special tokens) and reports per file and tokenizer: tokens per line and per word, the share of
words split into two or more pieces, the unk rate (unk tokens over tokens), percentiles of tokens
per line; for each later tokenizer against the first, the 30 words whose token count changed most
(by the tokens that changes over the file: count x change) and a few side-by-side samples (the
lines whose length changed most, with their tokens). ``plot`` draws histograms of tokens per line.

Words are the text's whitespace-separated words (the same for every tokenizer): counted unique
with their number of occurrences (``gputok.trainers.counting.WordCounter`` with a
``WhitespaceSplit``, the numba counting kernel), and each unique word is encoded once on its
own; tokens per word are those counts weighted by occurrences. Tokens per line come from the
lines themselves. Memory: the lines of one file, its unique words, the ids of one tokenizer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .tokenizer import Tokenizer

PERCENTILES = (50, 90, 99)
TOP_WORDS = 30
SAMPLES = 5
BATCH_LINES = 65536


def _load(tok: Tokenizer | str | os.PathLike) -> Tokenizer:
    if isinstance(tok, Tokenizer):
        return tok
    path = str(tok)
    return Tokenizer.from_vocab(path) if path.endswith(".txt") else Tokenizer.from_file(path)


def tokens_per_text(tok: Tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token counts of each text (no special tokens) and all their ids, flat, in batches."""
    lengths, ids = [], []
    for i in range(0, len(texts), BATCH_LINES):
        out = tok(list(texts[i:i + BATCH_LINES]), padding=False, add_special_tokens=False)
        lengths.append(np.diff(out["row_offsets"].numpy()))
        ids.append(out["input_ids"].numpy())
    if not lengths:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(lengths), np.concatenate(ids)


def whitespace_words(lines: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The unique whitespace-separated words of ``lines`` and their counts (counting kernel)."""
    from .ingest import strings
    from .pre_tokenizers import WhitespaceSplit
    from .trainers.counting import WordCounter

    counter = WordCounter(None, WhitespaceSplit())
    for i in range(0, len(lines), BATCH_LINES):
        counter.add_texts(list(lines[i:i + BATCH_LINES]))
    table = counter.result()
    return strings(table.words), table.counts.numpy()


def _unk_id(tok: Tokenizer) -> int | None:
    return getattr(tok.model, "unk_id", None)


def _stats(lengths: np.ndarray, ids: np.ndarray, word_tokens: np.ndarray, counts: np.ndarray,
           unk_id: int | None) -> dict[str, Any]:
    words = int(counts.sum())
    tokens = int(lengths.sum())
    return {
        "lines": int(lengths.size), "words": words, "tokens": tokens,
        "tokens_per_line": tokens / max(1, lengths.size),
        "tokens_per_word": float((word_tokens * counts).sum()) / max(1, words),
        "split_words": float(counts[word_tokens >= 2].sum()) / max(1, words),
        "unk_rate": (float((ids == unk_id).sum()) / max(1, tokens)) if unk_id is not None else 0.0,
        "tokens_per_line_percentiles": {str(p): float(np.percentile(lengths, p)) if lengths.size else 0.0
                                        for p in PERCENTILES} | {"max": int(lengths.max()) if lengths.size else 0},
    }


def _pieces(tok: Tokenizer, text: str) -> list[str]:
    return [tok.id_to_token(i) for i in tok._encode_lists([text], add_special_tokens=False)[0]]


def fertility(tokenizers: Sequence[Tokenizer | str | os.PathLike], files: Sequence[str | os.PathLike], *,
              names: Sequence[str] | None = None, top_words: int = TOP_WORDS, samples: int = SAMPLES
              ) -> dict[str, Any]:
    """The fertility report of ``tokenizers`` (Tokenizers or paths) on ``files``, JSON-ready:
    ``{"tokenizers": names, "files": {file: {"stats": {name: ...}, "changed_words": {name: [...]},
    "samples": {name: [...]}}}}`` (changes and samples are each later tokenizer against the first),
    plus ``"lengths"``: tokens per line of each tokenizer (numpy arrays, for :func:`plot`; drop
    them before writing JSON).

    >>> import gputok
    >>> tok = gputok.Tokenizer.from_vocab(gputok.tokenizer.gputok_example_vocab())
    >>> path = Path(gputok.tokenizer.gputok_example_vocab()).with_name("gputok-fertility-example.txt")
    >>> _ = path.write_text("hello world\\nunaffable hello!\\n", encoding="utf-8")
    >>> report = fertility([tok], [path], names=["example"])
    >>> stats = report["files"][str(path)]["stats"]["example"]
    >>> stats["tokens_per_line"], stats["tokens_per_word"], stats["split_words"]
    (3.5, 1.75, 0.5)
    """
    toks = [_load(t) for t in tokenizers]
    names = list(names) if names is not None else [str(t) if not isinstance(t, Tokenizer) else f"tokenizer {i}"
                                                   for i, t in enumerate(tokenizers)]
    if len(names) != len(toks):
        raise ValueError(f"{len(names)} names for {len(toks)} tokenizers; give one name per tokenizer")
    report: dict[str, Any] = {"tokenizers": names, "files": {}, "lengths": {}}
    for file in files:
        lines = Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
        words, counts = whitespace_words(lines)
        per_tok = []
        for tok in toks:
            lengths, ids = tokens_per_text(tok, lines)
            word_tokens, _ = tokens_per_text(tok, words)
            per_tok.append((lengths, ids, word_tokens))
        entry: dict[str, Any] = {"stats": {}, "changed_words": {}, "samples": {}}
        for name, tok, (lengths, ids, word_tokens) in zip(names, toks, per_tok):
            entry["stats"][name] = _stats(lengths, ids, word_tokens, counts, _unk_id(tok))
        first_lengths, _, first_words = per_tok[0]
        for name, tok, (lengths, _, word_tokens) in list(zip(names, toks, per_tok))[1:]:
            change = word_tokens - first_words
            impact = np.abs(change) * counts
            order = np.lexsort((-counts, -impact))[:top_words]
            entry["changed_words"][name] = [
                {"word": words[i], "count": int(counts[i]), "tokens_before": int(first_words[i]),
                 "tokens_after": int(word_tokens[i]), "change": int(change[i]),
                 "before": _pieces(toks[0], words[i]), "after": _pieces(tok, words[i])}
                for i in order.tolist() if impact[i] > 0]
            line_change = lengths - first_lengths
            picked = np.argsort(-np.abs(line_change), kind="stable")[:samples]
            entry["samples"][name] = [
                {"line": lines[i][:300], "tokens_before": int(first_lengths[i]), "tokens_after": int(lengths[i]),
                 "before": _pieces(toks[0], lines[i][:300]), "after": _pieces(tok, lines[i][:300])}
                for i in picked.tolist() if line_change[i] != 0]
        report["files"][str(file)] = entry
        report["lengths"][str(file)] = {name: lengths for name, (lengths, _, _) in zip(names, per_tok)}
    return report


def table(report: dict[str, Any]) -> str:
    """The report's figures as a Markdown table, one row per file and tokenizer."""
    rows = ["| file | tokenizer | tokens/line | tokens/word | words split 2+ | unk rate | p50 / p90 / p99 / max "
            "tokens per line | tokens/line vs first |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for file, entry in report["files"].items():
        first = None
        for name, s in entry["stats"].items():
            first = first if first is not None else s["tokens_per_line"]
            p = s["tokens_per_line_percentiles"]
            change = (s["tokens_per_line"] / first - 1) * 100 if first else 0.0
            rows.append(f"| {Path(file).name} | {name} | {s['tokens_per_line']:.2f} | {s['tokens_per_word']:.4f} | "
                        f"{100 * s['split_words']:.2f}% | {100 * s['unk_rate']:.3f}% | "
                        f"{p['50']:.0f} / {p['90']:.0f} / {p['99']:.0f} / {p['max']} | {change:+.2f}% |")
    return "\n".join(rows)


def plot(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Histograms of tokens per line, one panel per file, the tokenizers overlaid (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = list(report["lengths"])
    fig, axes = plt.subplots(1, len(files), figsize=(6.5 * len(files), 4.6), squeeze=False)
    styles = ("-", "--", ":", "-.")
    for ax, file in zip(axes[0], files):
        by_name = report["lengths"][file]
        everything = np.concatenate(list(by_name.values()))
        top = max(1, int(np.percentile(everything, 99.5)) if everything.size else 1)
        width = max(1, -(-top // 60))  # whole tokens per bin, about 60 bins
        bins = np.arange(1, top + width + 1, width) - 0.5
        for k, (name, lengths) in enumerate(by_name.items()):
            shown = np.minimum(lengths[lengths > 0], top)  # empty lines left out of the figure
            mean = lengths.mean() if lengths.size else 0.0
            ax.hist(shown, bins=bins, histtype="step", linewidth=1.6, linestyle=styles[k % len(styles)],
                    label=f"{name} (mean {mean:.1f})")
        empty = int((next(iter(by_name.values())) == 0).sum())
        ax.set_title(f"{Path(file).name}: {len(next(iter(by_name.values()))):,} lines ({empty:,} empty, not drawn)",
                     fontsize=11)
        ax.set_xlabel("tokens per line (no special tokens; the last bin holds the top 0.5%)")
        ax.set_ylabel("lines")
        ax.legend(fontsize=9)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)


def without_lengths(report: dict[str, Any]) -> dict[str, Any]:
    """The report without its numpy arrays, for JSON."""
    return {k: v for k, v in report.items() if k != "lengths"}
