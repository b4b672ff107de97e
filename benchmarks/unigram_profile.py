"""Where a SentencePiece Unigram encode spends its time on the CPU, stage by stage, in one thread.

    python benchmarks/unigram_profile.py [--batch-size 1024] [--lines 200000] [--repeats 3]

The stages of ``unigram_texts_numba.encode_texts`` (and the padded tail of
``Tokenizer._padded_in_chunks``) called one by one from Python on each batch of the bench's
corpus (``gputok bench``'s 20 MB English lines, the tests' 8k model), the word cache empty at the
start of each pass as in ``gputok bench``: the thread CPU time of each, summed over the pass, the
fastest of ``--repeats`` passes, in ns per input character. One thread, so the figures add up to
what one chunk's thread does (the calling thread's Python glue included: join and UTF-32 encode).
A shared machine inflates all of them alike; compare the shares. (Each chunk of a 2-thread
call of 1,024 lines is 512 of them: ``--batch-size 512``.)
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from gputok import bench
    from gputok._whole_unigram import CACHE_FULL_MISSES, MAX_CACHED_CHARS, _new_cache
    from gputok.ingest import utf32_units
    from gputok.kernels import postprocess_numba
    from gputok.kernels.ingest_numba import codepoints_numba
    from gputok.kernels.sp_normalize_numba import normalize_split
    from gputok.kernels.unigram_cache_numba import segment_cached
    from gputok.kernels.unigram_finish_numba import unigram_finish_numba
    from gputok.models.unigram import SCORE_RESET_THRESHOLD, WHOLE_SENTENCE_CHARS
    from gputok.tokenizer import _EMPTY_INDEX, _NO_SPANS, _padded_outputs

    tok = bench.make_tokenizer("unigram")
    norm, pre, model = tok.normalizer, tok.pre_tokenizer, tok.model
    charsmap = norm.precompiled.charsmap
    rules = charsmap.numpy_rules()
    score64 = model.score64.numpy()
    max_abs = max(float(np.abs(score64).max()), abs(model.unk_score))
    trie = model.trie.walk_arrays
    lines = bench._load_lines(None, None)[0][:args.lines]
    chars = sum(map(len, lines))
    batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    item = np.zeros(1, np.int64)
    empty_type = np.zeros(1, np.int64)

    def one_pass() -> dict[str, float]:
        cache = _new_cache()
        spent: dict[str, float] = {}
        clock = time.thread_time_ns
        stats = np.zeros(2, np.int64)
        for batch in batches:
            t0 = clock()
            units, lengths = utf32_units(batch)
            t1 = clock()
            values, offsets = codepoints_numba(units, lengths)
            t2 = clock()
            text, text_offsets, source, starts, ends, word_offsets = normalize_split(
                values, offsets, True, *rules, norm.add_dummy_prefix, norm.remove_extra_whitespaces,
                norm.escape_whitespaces, -1, ord(pre.replacement), pre.split, False, False)
            t3 = clock()
            ids, piece_ends, token_offsets = segment_cached(
                text, starts, ends, word_offsets, *trie, model.score32, score64, model.unk_score, model.unk_id,
                SCORE_RESET_THRESHOLD, max_abs, WHOLE_SENTENCE_CHARS, MAX_CACHED_CHARS, CACHE_FULL_MISSES, *cache)
            t4 = clock()
            ids, piece_ends, token_offsets = unigram_finish_numba(ids, piece_ends, token_offsets, text, starts,
                                                                  model.unk_id, model.byte_ids.numpy(),
                                                                  model.byte_fallback)
            t5 = clock()
            out_ids, out_offsets = ids.copy(), token_offsets[word_offsets]  # encode_texts without spans
            t6 = clock()
            plan = postprocess_numba.plan_padded(out_offsets, _EMPTY_INDEX, 0, -1, 0, False, item, 0, 0)
            t7 = clock()
            sample, a_start, a_len, b_start, b_len, row_lengths, width = plan[:7]
            p_ids, mask, types, p_offsets, write_types = _padded_outputs(sample.size, width, empty_type, False, False)
            t8 = clock()
            postprocess_numba.fill_padded(0, sample.size, width, False, 0, item, item, empty_type, sample, a_start,
                                          a_len, b_start, b_len, out_ids, out_offsets, _EMPTY_INDEX, _EMPTY_INDEX,
                                          _NO_SPANS, _NO_SPANS, row_lengths, p_ids, mask, types, p_offsets,
                                          write_types, False)
            t9 = clock()
            stats[0] += word_offsets[-1]
            stats[1] += token_offsets[-1]
            for name, a, b in (("join+utf32 (Python)", t0, t1), ("codepoints", t1, t2), ("normalize+split", t2, t3),
                               ("segment_cached", t3, t4), ("finish", t4, t5), ("offsets per text", t5, t6),
                               ("plan_padded", t6, t7), ("alloc outputs", t7, t8), ("fill_padded", t8, t9)):
                spent[name] = spent.get(name, 0) + b - a
        spent["words"] = stats[0]
        spent["cached entries"] = cache[-1][0]
        return spent

    one_pass()  # compile / load
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, ns in one_pass().items():
            best[name] = min(best.get(name, float("inf")), ns)
    words, entries = best.pop("words"), best.pop("cached entries")
    total = sum(best.values())
    print(f"batch {args.batch_size}, {len(lines)} lines, {chars} chars, {words} words, {entries} cached words; "
          f"one thread, best of {args.repeats}")
    for name, ns in best.items():
        print(f"{name:22} {ns / chars:7.2f} ns/char {100 * ns / total:5.1f}%")
    print(f"{'total':22} {total / chars:7.2f} ns/char  ({total / 1e9:.3f} s, {chars / total * 1e3:.1f} Mchar/s)")


if __name__ == "__main__":
    main()
