"""Corpus to Megatron token shards, end to end: ``gputok encode-corpus`` against the usual path.

The usual path (what Megatron's preprocess_data / nanoGPT's prepare.py do, minus their
multiprocessing): huggingface ``tokenizers`` ``encode_batch`` on the lines of the file in chunks of
the same size as gputok's blocks (``gputok.corpus.CHUNK_BYTES``), EOS appended, then a numpy
write of each chunk's ids (uint16) and of the Megatron index. Both use the same tokenizer (GPT-2 ranks with
``<|endoftext|>``, saved as tokenizer.json), read the same file and write the same bytes (checked).
Each run is its own process (so peak RSS is the run's own: ``wait4``'s ru_maxrss), alternating
gputok and huggingface, best of ``--repeat``; seconds include reading, encoding and writing, not
the tokenizer load (reported apart) or interpreter start.

``gputok-strings`` is gputok's earlier ingest, kept for comparison: each block decoded and split
into a Python string per document (and Arrow columns through ``to_pylist``), encoded by
``tok(texts, padding=False)``; ``gputok`` reads the documents as bytes (``RecordReader.batches(...,
as_bytes=True)``) and encodes them with ``Tokenizer.encode_utf8``.

Then packing efficiency at ``--seq-len`` (2048) on the same real text: the documents read back
from the shards (a line each; every 100 lines as one; and, in ``blocks`` mode, paragraphs), packed
by ``Packer`` in concat and best-fit modes.

    python benchmarks/encode_corpus.py --megabytes 20 --repeat 2 --json encode_corpus.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _gputok_run(corpus: str, tokenizer: str, out: str, mode: str, strings: bool = False) -> dict:
    import gputok
    from gputok.corpus import RecordReader
    from gputok.encode_corpus import encode_corpus

    if strings:  # the string ingest: every batch as a list of str, whatever encode_corpus asks for
        by_bytes = RecordReader.batches
        RecordReader.batches = lambda self, source, on_bytes=None, as_bytes=False: by_bytes(self, source, on_bytes)

    start = time.perf_counter()
    tok = gputok.Tokenizer.from_file(tokenizer)
    loaded = time.perf_counter()
    manifest = encode_corpus([corpus], tok, out, append_eos=True, mode=mode)
    return {"seconds": time.perf_counter() - loaded, "load_seconds": loaded - start, "tokens": manifest["tokens"],
            "documents": manifest["documents"]}


def _hf_run(corpus: str, tokenizer: str, out: str, mode: str) -> dict:
    from tokenizers import Tokenizer

    from gputok.corpus import CHUNK_BYTES
    from gputok.shards import megatron_index

    start = time.perf_counter()
    hf = Tokenizer.from_file(tokenizer)
    eos = hf.token_to_id("<|endoftext|>")
    loaded = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    lengths, tokens = [], 0
    with open(corpus, "rb") as f, open(os.path.join(out, "shard_00000.bin"), "wb") as bin_file:
        rest = b""
        while True:
            block = f.read(CHUNK_BYTES)
            if not block and not rest:
                break
            data = rest + block
            cut = data.rfind(b"\n") + 1 if block else len(data)
            rest = data[cut:]
            text = data[:cut].decode("utf-8", errors="replace")
            docs = [d for d in text.split("\n") if d] if mode == "lines" else \
                [d.strip("\n") for d in text.split("\n\n") if d.strip()]
            encoded = [e.ids + [eos] for e in hf.encode_batch(docs, add_special_tokens=False)]
            lengths += map(len, encoded)
            ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.uint16)
            ids.tofile(bin_file)  # one numpy write per chunk, as nanoGPT's prepare.py writes
            tokens += ids.size
    with open(os.path.join(out, "shard_00000.idx"), "wb") as idx:
        idx.write(megatron_index(np.asarray(lengths, dtype=np.int64), np.dtype(np.uint16)))
    return {"seconds": time.perf_counter() - loaded, "load_seconds": loaded - start, "tokens": tokens,
            "documents": len(lengths)}


def _ingest(corpus: str, tokenizer: str, repeat: int) -> dict:
    """Seconds, best of ``repeat`` in this process, interleaved: reading the file's documents as bytes
    vs as strings, then encoding the same documents with ``encode_utf8`` vs ``tok(texts)``."""
    import gputok
    from gputok.corpus import RecordReader, sources

    tok = gputok.Tokenizer.from_file(tokenizer)
    source = sources([corpus])[0]
    times: dict[str, list[float]] = {"read as bytes": [], "read as str": [], "encode_utf8": [], "tok(texts)": []}
    for _ in range(repeat):
        start = time.perf_counter()
        as_bytes = [b.documents() for b in RecordReader().batches(source, as_bytes=True)]
        times["read as bytes"].append(time.perf_counter() - start)
        start = time.perf_counter()
        as_str = [[t for t in b if t] for b in RecordReader().batches(source)]
        times["read as str"].append(time.perf_counter() - start)
        start = time.perf_counter()
        for data, offsets in as_bytes:
            tok.encode_utf8(data, offsets)
        times["encode_utf8"].append(time.perf_counter() - start)
        start = time.perf_counter()
        for texts in as_str:
            tok(texts, padding=False, add_special_tokens=False)
        times["tok(texts)"].append(time.perf_counter() - start)
    return {name: min(v) for name, v in times.items()}


def _measure(which: str, corpus: str, tokenizer: str, out: str, mode: str) -> dict:
    """One run in a fresh process: its result and its peak RSS (MB)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, __file__, "--worker", which, corpus, tokenizer, out, mode],
                            stdout=subprocess.PIPE, env=env)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise RuntimeError(f"{which} run failed (status {status})")
    result = json.loads(output.decode().strip().splitlines()[-1])
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


def _packing(out: str, seq_len: int, join: int = 1) -> dict:
    """Packing efficiency of the shards' documents (``join`` > 1: every ``join`` consecutive
    documents taken as one, for document lengths nearer web pages' than a dictionary line's)."""
    import torch

    from gputok.data import Packer, TokenShards

    shards = TokenShards(out)
    offsets = np.zeros(len(shards) + 1, dtype=np.int64)
    np.cumsum([shards[i].size for i in range(len(shards))], out=offsets[1:])
    offsets = np.unique(np.append(offsets[::join], offsets[-1]))
    ids = torch.from_numpy(shards.token_slice(0, shards.num_tokens).astype(np.int64))
    Packer(8, mode="best_fit")(ids[:100], torch.tensor([0, 40, 100]))  # compiled / loaded before timing
    result = {}
    for mode in ("concat", "best_fit"):
        start = time.perf_counter()
        packed = Packer(seq_len, mode=mode)(ids, torch.from_numpy(offsets))
        result[mode] = {"efficiency": packed["efficiency"], "blocks": packed["input_ids"].shape[0],
                        "seconds": time.perf_counter() - start}
    result["documents"], result["tokens"] = offsets.size - 1, shards.num_tokens
    result["mean_document_tokens"] = shards.num_tokens / max(offsets.size - 1, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--json", default="encode_corpus.json")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    import gputok
    from gputok import assets

    corpus = str(assets.english_corpus(args.megabytes))
    work = Path(tempfile.mkdtemp(prefix="gputok-bench-"))
    tokenizer = str(work / "gpt2.json")
    gputok.Tokenizer.from_tiktoken(assets.fetch("gpt2-tiktoken"), pattern="gpt2",
                                   special_tokens={"<|endoftext|>": 50256}).save(tokenizer)
    runs: dict[str, list[dict]] = {"gputok": [], "gputok-strings": [], "huggingface": []}
    for r in range(args.repeat):
        for which in runs:
            out = str(work / f"{which}-{r}")
            runs[which].append(_measure(which, corpus, tokenizer, out, "lines"))
            print(f"  {which} run {r}: {runs[which][-1]['seconds']:.2f} s", file=sys.stderr)
    same = all((work / f"gputok-0/shard_00000.{ext}").read_bytes() == (work / f"{other}-0/shard_00000.{ext}").read_bytes()
               for ext in ("bin", "idx") for other in ("gputok-strings", "huggingface"))
    best = {k: min(v, key=lambda x: x["seconds"]) for k, v in runs.items()}
    size = os.path.getsize(corpus)
    print(f"\nencode-corpus, {size / 1e6:.1f} MB English ({best['gputok']['documents']} documents, "
          f"{best['gputok']['tokens']} tokens), GPT-2 BPE, Megatron uint16 shards; best of {args.repeat}; "
          f"identical .bin/.idx: {same}")
    print(f"{'':14} {'seconds':>8} {'MB/s':>7} {'Mtok/s':>7} {'load s':>7} {'peak RSS MB':>12}")
    for name, r in best.items():
        print(f"{name:14} {r['seconds']:8.2f} {size / 1e6 / r['seconds']:7.2f} {r['tokens'] / 1e6 / r['seconds']:7.2f} "
              f"{r['load_seconds']:7.2f} {max(x['peak_rss_mb'] for x in runs[name]):12.0f}")
    ratio = best["huggingface"]["seconds"] / best["gputok"]["seconds"]
    ratio_with_load = ((best["huggingface"]["seconds"] + best["huggingface"]["load_seconds"])
                       / (best["gputok"]["seconds"] + best["gputok"]["load_seconds"]))
    print(f"gputok / huggingface: {ratio:.2f}x ({ratio_with_load:.2f}x counting the tokenizer load)")
    print(f"gputok (bytes) / gputok-strings: {best['gputok-strings']['seconds'] / best['gputok']['seconds']:.2f}x")

    ingest = _ingest(corpus, tokenizer, args.repeat + 1)
    print("\nthe stages alone, in this process, best of", args.repeat + 1, "(seconds): "
          + ", ".join(f"{name} {t:.2f}" for name, t in ingest.items()))

    packing = {"lines": _packing(str(work / "gputok-0"), args.seq_len),
               "100 lines": _packing(str(work / "gputok-0"), args.seq_len, join=100)}
    blocks_out = str(work / "blocks")
    _gputok_run(corpus, tokenizer, blocks_out, "blocks")
    packing["blocks"] = _packing(blocks_out, args.seq_len)
    print(f"\npacking at seq_len {args.seq_len} (efficiency = real tokens / block slots)")
    print(f"{'documents':10} {'count':>8} {'mean tok':>9} {'concat':>8} {'best-fit':>9} {'concat s':>9} {'best-fit s':>10}")
    for name, p in packing.items():
        print(f"{name:10} {p['documents']:8d} {p['mean_document_tokens']:9.1f} {p['concat']['efficiency']:8.4f} "
              f"{p['best_fit']['efficiency']:9.4f} {p['concat']['seconds']:9.2f} {p['best_fit']['seconds']:10.2f}")
    Path(args.json).write_text(json.dumps({"corpus_bytes": size, "runs": runs, "identical": same, "ratio": ratio,
                                           "ratio_with_load": ratio_with_load, "ingest": ingest, "packing": packing,
                                           "cpus": os.cpu_count()}, indent=1))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.path.insert(0, str(REPO))
        which, corpus, tokenizer, out, mode = sys.argv[2:7]
        result = (_hf_run(corpus, tokenizer, out, mode) if which == "huggingface"
                  else _gputok_run(corpus, tokenizer, out, mode, strings=which == "gputok-strings"))
        print(json.dumps(result))
        sys.exit(0)
    sys.exit(main())
