"""Malformed tokenizer files for the fuzz campaign (benchmarks/fuzz.py), made by named mutations of
real files: ``.tiktoken``, tokenizer.json, vocab.txt, SentencePiece ``.model``. A case is
(base file, mutation name, seed) and ``make_case`` rebuilds its bytes exactly."""

from __future__ import annotations

import base64
import copy
import functools
import json
import math
import random
from collections.abc import Callable
from pathlib import Path

from _oracles import _fuzz_cache, char_bpe_json

HUGE = [10**8, 10**9, 2**31, 2**32 - 1, 2**32, 10**12, 2**63, 2**64, 10**30]
WEIRD = ["", "100", "x", -1, 0, 1, 10**12, 1.5, -0.0, float("nan"), True, False, None, [], {}, ["a"], {"a": 1}]


# ---- base files ------------------------------------------------------------------------

def _cached(name: str, make: Callable[[], bytes]) -> Path:
    path = _fuzz_cache() / name
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(make())
        tmp.replace(path)
    return path


def _tiktoken_prefix(name: str, ranks: int) -> bytes:
    from gputok import assets

    return b"".join(assets.fetch(f"{name}-tiktoken").read_bytes().splitlines(keepends=True)[:ranks])


def _small_cl100k_json() -> bytes:
    from gputok import Tokenizer

    path = _cached("cl100k-3000.tiktoken", lambda: _tiktoken_prefix("cl100k", 3000))
    out = _fuzz_cache() / "cl100k-3000.json.tmp2"
    Tokenizer.from_tiktoken(path, pattern="cl100k").save(out)
    data = out.read_bytes()
    out.unlink()
    return data


def _small_bert_json() -> bytes:
    """BERT's tokenizer.json with the vocabulary cut to its first 2000 ids (specials, characters, common words)."""
    from gputok import assets

    spec = json.loads(assets.fetch("bert-tokenizer-json").read_text(encoding="utf-8"))
    spec["model"]["vocab"] = {t: i for t, i in spec["model"]["vocab"].items() if i < 2000}
    return json.dumps(spec, ensure_ascii=False).encode()


def _small_bert_vocab() -> bytes:
    from gputok import assets

    return b"".join(assets.fetch("bert-vocab").read_bytes().splitlines(keepends=True)[:2000])


def _asset(name: str) -> Callable[[], Path]:
    def fetch() -> Path:
        from gputok import assets

        return assets.fetch(name)
    return fetch


# base name -> (format, path maker)
BASES: dict[str, tuple[str, Callable[[], Path]]] = {
    "cl100k-3000.tiktoken": ("tiktoken", lambda: _cached("cl100k-3000.tiktoken", lambda: _tiktoken_prefix("cl100k", 3000))),
    "gpt2-2000.tiktoken": ("tiktoken", lambda: _cached("gpt2-2000.tiktoken", lambda: _tiktoken_prefix("gpt2", 2000))),
    "bert-2000.json": ("tokenizer.json", lambda: _cached("bert-2000.json", _small_bert_json)),
    "cl100k-3000.json": ("tokenizer.json", lambda: _cached("cl100k-3000.json", _small_cl100k_json)),
    "char-bpe-5000.json": ("tokenizer.json", char_bpe_json),
    "bert-2000.vocab.txt": ("vocab.txt", lambda: _cached("bert-2000.vocab.txt", _small_bert_vocab)),
    "sp-test.model": ("sentencepiece", _asset("sp-test-model")),
    "mistral.model": ("sentencepiece", _asset("mistral-sp-model")),
}


@functools.lru_cache(maxsize=None)
def base_bytes(base: str) -> bytes:
    return BASES[base][1]().read_bytes()


# ---- .tiktoken -------------------------------------------------------------------------

def _lines(data: bytes) -> list[bytes]:
    return data.splitlines()


def _rank_line(rng, lines) -> int:
    return rng.randrange(len(lines))


def _set_rank(line: bytes, rank) -> bytes:
    return line.split()[0] + b" " + str(rank).encode()


def tt_negative_rank(rng, data):
    lines = _lines(data)
    i = _rank_line(rng, lines)
    lines[i] = _set_rank(lines[i], rng.choice([-1, -i - 1, -(10**6)]))
    return b"\n".join(lines) + b"\n"


def tt_duplicate_rank(rng, data):
    lines = _lines(data)
    i, j = rng.sample(range(len(lines)), 2)
    lines[i] = _set_rank(lines[i], int(lines[j].split()[1]))
    return b"\n".join(lines) + b"\n"


def tt_bad_base64(rng, data):
    lines = _lines(data)
    i = _rank_line(rng, lines)
    token, rank = lines[i].split()
    at = rng.randint(0, len(token))
    bad = rng.choice([b"!", b"=", b"==", b"*", b"\xff", b"-", b"_", b"A", b""])
    token = token[:at] + bad + token[at + rng.randint(0, 1):]
    lines[i] = token + b" " + rank
    return b"\n".join(lines) + b"\n"


def tt_truncated(rng, data):
    return data[:rng.randrange(len(data))]


def tt_truncated_mid_rank(rng, data):
    """Cut inside the last rank's digits, so the file ends with a smaller number."""
    lines = _lines(data)[:rng.randint(300, len(_lines(data)))]
    last = lines[-1]
    lines[-1] = last[:len(last) - rng.randint(1, len(last.split()[1]) - 1 or 1)] if len(last.split()[1]) > 1 else last
    return b"\n".join(lines)


def tt_swapped_ranks(rng, data):
    lines = _lines(data)
    i, j = rng.sample(range(len(lines)), 2)
    ri, rj = lines[i].split()[1], lines[j].split()[1]
    lines[i], lines[j] = _set_rank(lines[i], int(rj)), _set_rank(lines[j], int(ri))
    return b"\n".join(lines) + b"\n"


def tt_huge_rank(rng, data):
    lines = _lines(data)
    i = rng.choice([len(lines) - 1, _rank_line(rng, lines)])
    lines[i] = _set_rank(lines[i], rng.choice(HUGE))
    return b"\n".join(lines) + b"\n"


def tt_empty_lines(rng, data):
    lines = _lines(data)
    for _ in range(rng.randint(1, 5)):
        lines.insert(rng.randint(0, len(lines)), rng.choice([b"", b" ", b"\t", b"\r"]))
    return b"\n".join(lines) + b"\n"


def tt_missing_field(rng, data):
    lines = _lines(data)
    i = _rank_line(rng, lines)
    token, rank = lines[i].split()
    lines[i] = rng.choice([token, b" " + rank, rank, token + b" "])
    return b"\n".join(lines) + b"\n"


def tt_extra_field(rng, data):
    lines = _lines(data)
    i = _rank_line(rng, lines)
    lines[i] += rng.choice([b" 7", b" x", b" " + lines[i].split()[1]])
    return b"\n".join(lines) + b"\n"


def tt_rank_gap(rng, data):
    lines = _lines(data)
    del lines[rng.randrange(256, len(lines))]
    return b"\n".join(lines) + b"\n"


def tt_missing_byte(rng, data):
    """A single-byte token taken out: some text has no tokens at all."""
    lines = _lines(data)
    del lines[rng.randrange(256)]
    return b"\n".join(lines) + b"\n"


def tt_duplicate_token(rng, data):
    lines = _lines(data)
    i = _rank_line(rng, lines)
    lines.append(lines[i].split()[0] + b" " + str(len(lines)).encode())
    return b"\n".join(lines) + b"\n"


def tt_non_integer_rank(rng, data):
    lines = _lines(data)
    i = _rank_line(rng, lines)
    rank = int(lines[i].split()[1])
    spelled = rng.choice([f"{rank}.0", f"{rank}.5", hex(rank), f"+{rank}", f"{rank:_}" if rank > 999 else f"1_{rank}",
                          "".join(chr(0x660 + int(d)) for d in str(rank)), f"{rank}e0", "nan", "x", f"0{rank}"])
    lines[i] = lines[i].split()[0] + b" " + spelled.encode()
    return b"\n".join(lines) + b"\n"


def tt_whitespace(rng, data):
    lines = _lines(data)
    sep = rng.choice([b"\t", b"  ", b" \t "])
    end = rng.choice([b"\r\n", b" \n", b"\n\n"])
    return end.join(sep.join(line.split()) for line in lines) + end


def tt_binary_junk(rng, data):
    at = rng.randrange(len(data))
    return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + data[at:]


def tt_empty_file(rng, data):
    return rng.choice([b"", b"\n", b" ", b"\n\n\n"])


def tt_shuffled_lines(rng, data):
    """Valid: the same ranks in another line order."""
    lines = _lines(data)
    rng.shuffle(lines)
    return b"\n".join(lines) + b"\n"


def tt_reranked(rng, data):
    """Valid: each token's rank moved by a constant (ids no longer start at 0)."""
    offset = rng.choice([1, 7, 1000])
    return b"\n".join(_set_rank(line, int(line.split()[1]) + offset) for line in _lines(data)) + b"\n"


def tt_merge_of_missing_parts(rng, data):
    """A multi-byte token whose parts are not in the file (tiktoken reaches it by no merge)."""
    lines = _lines(data)
    token = bytes(rng.randrange(128, 256) for _ in range(rng.randint(2, 4)))
    lines.insert(rng.randint(256, len(lines)), base64.b64encode(token) + b" 0")
    return b"\n".join(_set_rank(line, r) for r, line in enumerate(lines)) + b"\n"


TIKTOKEN_PATTERNS = ["cl100k_base", "cl100K", "gpt-2", "", "o200k_base", "r50k_base", "p50k_base", "gpt2", "o200k",
                     "cl100k ", "CL100K", "(", "[", "\\", "a{99999999}", "x^", "(?!)", " ", r"\p{Bogus}", "p50k_edit"]


def tt_pattern_name(rng, data):
    """The file as it is, with an odd ``pattern`` argument: returns (bytes, options)."""
    return data, {"pattern": rng.choice(TIKTOKEN_PATTERNS)}


# ---- tokenizer.json --------------------------------------------------------------------

def _paths(node, path=(), rng=None, out=None):
    """Paths to the nodes of a JSON tree; of a container with many children, a few at random."""
    out = [] if out is None else out
    out.append(path)
    if isinstance(node, dict):
        keys = list(node)
    elif isinstance(node, list):
        keys = list(range(len(node)))
    else:
        return out
    if len(keys) > 20:
        keys = rng.sample(keys, 4)
    for k in keys:
        _paths(node[k], path + (k,), rng, out)
    return out


def _get(node, path):
    for k in path:
        node = node[k]
    return node


def _set(node, path, value):
    _get(node, path[:-1])[path[-1]] = value


def _dump(spec, detail=None) -> bytes:
    return json.dumps(spec, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


def _random_path(rng, spec, keep=lambda p: True):
    return rng.choice([p for p in _paths(spec, rng=rng) if p and keep(p)])


def json_wrong_type(rng, data):
    spec = json.loads(data)
    path = _random_path(rng, spec)
    old = _get(spec, path)
    _set(spec, path, rng.choice([v for v in WEIRD if type(v) is not type(old)]))
    return _dump(spec)


def json_delete_key(rng, data):
    spec = json.loads(data)
    path = _random_path(rng, spec, lambda p: isinstance(_get(spec, p[:-1]), dict))
    del _get(spec, path[:-1])[path[-1]]
    return _dump(spec)


def json_unknown_type(rng, data):
    spec = json.loads(data)
    paths = [p for p in _paths(spec, rng=rng) if p and p[-1] == "type"]
    _set(spec, rng.choice(paths), rng.choice(["Bogus", "wordpiece", "BPE ", "", "Unigram", "WordLevel", "Sequence"]))
    return _dump(spec)


def json_truncated(rng, data):
    return data[:rng.randrange(len(data))]


def json_deep_nesting(rng, data):
    depth = rng.choice([200, 5000, 100_000])
    opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
    spec = json.loads(data)
    path = _random_path(rng, spec)
    _set(spec, path, "\x00NEST\x00")
    return _dump(spec).replace(b'"\\u0000NEST\\u0000"', (opener * depth + "1" + closer * depth).encode())


def json_not_utf8(rng, data):
    at = rng.randrange(len(data))
    return data[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"]) + data[at:]


def json_bom(rng, data):
    return b"\xef\xbb\xbf" + data


def json_extra_field(rng, data):
    spec = json.loads(data)
    containers = [p for p in _paths(spec, rng=rng) if isinstance(_get(spec, p), dict)]
    _get(spec, rng.choice(containers))[rng.choice(["bogus", "extra", "Type"])] = rng.choice(WEIRD)
    return _dump(spec)


OPTION_KEYS = {"lowercase", "strip_accents", "clean_text", "handle_chinese_chars", "max_input_chars_per_word",
               "continuing_subword_prefix", "end_of_word_suffix", "unk_token", "dropout", "fuse_unk", "byte_fallback",
               "ignore_merges", "add_prefix_space", "trim_offsets", "use_regex", "prepend_scheme", "split", "replacement",
               "prefix", "cleanup", "behavior", "invert", "pattern", "sep", "cls", "special_tokens", "pair", "single",
               "normalized", "special", "lstrip", "rstrip", "single_word", "content", "id", "type_id"}


def json_weird_option(rng, data):
    spec = json.loads(data)
    paths = [p for p in _paths(spec, rng=rng) if p and p[-1] in OPTION_KEYS]
    path = rng.choice(paths)
    _set(spec, path, rng.choice(WEIRD + ["Ġ", "##", "[UNK]", "<unk>", "\\s+", {"String": " "}, {"Regex": "("},
                                         {"Regex": ""}, "Isolated", "Removed", "first", "never"]))
    return _dump(spec)


def _vocab(spec) -> dict:
    return spec["model"]["vocab"]


def _vocab_ids(spec) -> dict:
    vocab = _vocab(spec)
    return vocab if isinstance(vocab, dict) else {t: i for i, (t, _) in enumerate(vocab)}


def json_vocab_id(rng, data, value_of: Callable) -> bytes:
    spec = json.loads(data)
    vocab = _vocab(spec)
    token = rng.choice(list(vocab))
    vocab[token] = value_of(rng, vocab, token)
    return _dump(spec)


def vocab_negative_id(rng, data):
    return json_vocab_id(rng, data, lambda r, v, t: r.choice([-1, -2, -len(v)]))


def vocab_duplicate_id(rng, data):
    return json_vocab_id(rng, data, lambda r, v, t: v[r.choice(list(v))])


def vocab_huge_id(rng, data):
    return json_vocab_id(rng, data, lambda r, v, t: r.choice(HUGE))


def vocab_bool_id(rng, data):
    return json_vocab_id(rng, data, lambda r, v, t: r.choice([True, False]))


def vocab_float_id(rng, data):
    return json_vocab_id(rng, data, lambda r, v, t: r.choice([float(v[t]), v[t] + 0.5, float("inf"), float("nan")]))


def vocab_string_id(rng, data):
    return json_vocab_id(rng, data, lambda r, v, t: r.choice([str(v[t]), "x", ""]))


def vocab_gap(rng, data):
    spec = json.loads(data)
    vocab = _vocab(spec)
    del vocab[rng.choice(list(vocab))]
    return _dump(spec)


def vocab_empty_token(rng, data):
    spec = json.loads(data)
    vocab = _vocab(spec)
    vocab[""] = rng.choice([len(vocab), 0])
    return _dump(spec)


def vocab_missing_unk(rng, data):
    spec = json.loads(data)
    vocab = _vocab(spec)
    for unk in ("[UNK]", "<unk>"):
        vocab.pop(unk, None)
    return _dump(spec)


def _merges(spec) -> list:
    return spec["model"].setdefault("merges", [])


def _merge(left, right, like):
    return f"{left} {right}" if isinstance(like, str) else [left, right]


def merges_missing_token(rng, data):
    spec = json.loads(data)
    merges = _merges(spec)
    like = merges[0] if merges else "a b"
    merges.insert(rng.randint(0, len(merges)), _merge(rng.choice(["zzqq", "\u2603", "Ġqqq", "a"]),
                                                      rng.choice(["qqzz", "b", "\u2603"]), like))
    return _dump(spec)


def merges_malformed(rng, data):
    spec = json.loads(data)
    merges = _merges(spec)
    bad = rng.choice(["a", "a b c", "", " ", "a  b", ["a"], ["a", "b", "c"], [1, 2], 7, None, {"a": "b"}])
    merges.insert(rng.randint(0, len(merges)), bad)
    return _dump(spec)


def merges_duplicate(rng, data):
    spec = json.loads(data)
    merges = _merges(spec)
    if merges:
        merges.insert(rng.randint(0, len(merges)), rng.choice(merges))
    return _dump(spec)


def merges_result_missing(rng, data):
    """A merge whose parts are tokens but whose joined string is not."""
    spec = json.loads(data)
    merges, vocab = _merges(spec), _vocab_ids(spec)
    tokens = [t for t in vocab if 0 < len(t) < 4]
    for _ in range(100):
        left, right = rng.choice(tokens), rng.choice(tokens)
        if left + right not in vocab:
            merges.insert(rng.randint(0, len(merges)), _merge(left, right, merges[0] if merges else "a b"))
            break
    return _dump(spec)


def _added(spec) -> list:
    return spec.setdefault("added_tokens", [])


def _new_added(spec, **fields) -> dict:
    token = {"id": len(_vocab_ids(spec)), "content": "<extra>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
    token.update(fields)
    return token


def added_token(rng, data, **fields):
    spec = json.loads(data)
    _added(spec).append(_new_added(spec, **{k: v(rng, spec) if callable(v) else v for k, v in fields.items()}))
    return _dump(spec)


def added_empty_content(rng, data):
    return added_token(rng, data, content="", special=lambda r, s: r.choice([True, False]))


def added_content_not_str(rng, data):
    return added_token(rng, data, content=lambda r, s: r.choice([7, None, True, ["x"], 1.5]))


def added_id_out_of_range(rng, data):
    return added_token(rng, data, id=lambda r, s: r.choice([-1, len(_vocab_ids(s)) + 5, *HUGE, True, "3", 2.5]))


def added_id_of_other_token(rng, data):
    """An added token whose id is a vocabulary id of another string."""
    return added_token(rng, data, id=lambda r, s: r.choice(list(_vocab_ids(s).values())),
                       content=lambda r, s: r.choice(["<extra>", "hello", "x y", "\u2603"]))


def added_duplicate(rng, data):
    spec = json.loads(data)
    added = _added(spec)
    if added:
        twin = dict(rng.choice(added))
        if rng.random() < 0.5:
            twin["id"] = len(_vocab_ids(spec)) + 1
        else:
            twin["content"] = twin["content"] + "x"
        added.append(twin)
    return _dump(spec)


def _any_added(rng, spec) -> dict:
    """One of the spec's added tokens, a new one added first where it has none."""
    added = _added(spec)
    if not added:
        added.append(_new_added(spec))
    return rng.choice(added)


def added_flag_wrong_type(rng, data):
    spec = json.loads(data)
    token = _any_added(rng, spec)
    token[rng.choice(["special", "lstrip", "rstrip", "single_word", "normalized"])] = rng.choice(["yes", 1, 0, None, []])
    return _dump(spec)


def added_missing_field(rng, data):
    spec = json.loads(data)
    del _any_added(rng, spec)[rng.choice(["id", "content", "special", "single_word", "normalized"])]
    return _dump(spec)


def json_model_type_guess(rng, data):
    """No model type: huggingface infers it from the fields."""
    spec = json.loads(data)
    spec["model"].pop("type", None)
    return _dump(spec)


# ---- vocab.txt -------------------------------------------------------------------------

def vt_duplicate_line(rng, data):
    lines = data.split(b"\n")
    lines.insert(rng.randrange(len(lines)), rng.choice(lines[:-1]))
    return b"\n".join(lines)


def vt_empty_line(rng, data):
    lines = data.split(b"\n")
    lines.insert(rng.randrange(len(lines)), rng.choice([b"", b" ", b"\t", b"\r"]))
    return b"\n".join(lines)


def vt_binary_junk(rng, data):
    at = rng.randrange(len(data))
    return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 32))) + data[at:]


def vt_missing_special(rng, data):
    token = rng.choice([b"[UNK]", b"[CLS]", b"[SEP]", b"[MASK]", b"[PAD]"])
    return b"\n".join(line for line in data.split(b"\n") if line != token)


def vt_line_endings(rng, data):
    return data.replace(b"\n", rng.choice([b"\r\n", b"\r", b" \n", b"\n\n"]))


def vt_bom(rng, data):
    return b"\xef\xbb\xbf" + data


def vt_space_inside(rng, data):
    lines = data.split(b"\n")
    i = rng.randrange(len(lines) - 1)
    lines[i] = rng.choice([b" ", b"\t", b"\xc2\xa0"]).join([lines[i], lines[i]])
    return b"\n".join(lines)


def vt_truncated(rng, data):
    return data[:rng.randrange(len(data))]


def vt_empty_file(rng, data):
    return rng.choice([b"", b"\n", b"\n\n"])


def vt_huge_line(rng, data):
    return data + b"x" * rng.choice([1000, 1_000_000]) + b"\n"


def vt_shuffled(rng, data):
    """Valid: another order (other ids, the same rules)."""
    lines = data.split(b"\n")
    body = lines[:-1]
    rng.shuffle(body)
    return b"\n".join(body + lines[-1:])


# ---- SentencePiece .model --------------------------------------------------------------

def sp_byte_flip(rng, data):
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(out))
        out[at] ^= 1 << rng.randrange(8)
    return bytes(out)


def sp_byte_flip_header(rng, data):
    """Flips in the first 2 KB and the last 64 KB, where the tags, lengths and the trainer and normalizer specs are."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.choice([rng.randrange(min(2048, len(out))), len(out) - 1 - rng.randrange(min(65536, len(out)))])
        out[at] = rng.randrange(256)
    return bytes(out)


def sp_truncated(rng, data):
    return data[:rng.randrange(len(data))]


def sp_insert_junk(rng, data):
    at = rng.randrange(len(data))
    return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at:]


def _sp_edit(data: bytes, edit: Callable) -> bytes:
    from gputok.sentencepiece_model import parse_model, serialize_model

    model = parse_model(data)
    edit(model)
    return serialize_model(model)


def sp_field(rng, data):
    """One trainer field set to an odd value: unk/bos/eos/pad ids, model type, byte fallback."""
    name = rng.choice(["unk_id", "bos_id", "eos_id", "pad_id", "model_type", "byte_fallback",
                       "treat_whitespace_as_suffix"])
    value = {"model_type": rng.choice([0, 3, 4, 5, 99]), "byte_fallback": rng.choice([True, False]),
             "treat_whitespace_as_suffix": True}.get(name, rng.choice([-1, -2, 0, 1, 2, 3, 5, 7999, 8000, 32000, 10**6]))
    return _sp_edit(data, lambda m: setattr(m, name, value))


def sp_piece(rng, data):
    """One piece damaged: empty, duplicated, a NaN/inf score, an unknown type, a second UNKNOWN."""
    from gputok.sentencepiece_model import NORMAL, UNKNOWN

    def edit(model):
        i = rng.randrange(len(model.pieces))
        piece = model.pieces[i]
        what = rng.randrange(6)
        if what == 0:
            piece.piece = ""
        elif what == 1:
            piece.piece = rng.choice(model.pieces).piece
        elif what == 2:
            piece.score = rng.choice([math.nan, math.inf, -math.inf, 1e38, -1e38])
        elif what == 3:
            piece.type = rng.choice([0, 7, 99, UNKNOWN])
        elif what == 4:
            for p in model.pieces:
                if p.type == UNKNOWN:
                    p.type = NORMAL
        else:
            model.pieces.insert(rng.randrange(len(model.pieces)), copy.copy(piece))
    return _sp_edit(data, edit)


def sp_charsmap(rng, data):
    def edit(model):
        charsmap = model.normalizer.precompiled_charsmap
        model.normalizer.precompiled_charsmap = rng.choice([
            b"", b"\x00", charsmap[:rng.randrange(len(charsmap) or 1)], b"\xff" * 16,
            bytes(rng.randrange(256) for _ in range(64)), (10**6).to_bytes(4, "little") + charsmap[4:]])
        if rng.random() < 0.3:
            model.normalizer.name = rng.choice(["bogus", "", "nfkc", "identity"])
    return _sp_edit(data, edit)


def sp_no_pieces(rng, data):
    return _sp_edit(data, lambda m: setattr(m, "pieces", m.pieces[:rng.choice([1, 2, 3])]))


# ---- the mutations of each format --------------------------------------------------------

def _named(*functions) -> dict[str, Callable]:
    return {f.__name__.replace("_", "-"): f for f in functions}


MUTATIONS: dict[str, dict[str, Callable]] = {
    "tiktoken": _named(tt_negative_rank, tt_duplicate_rank, tt_bad_base64, tt_truncated, tt_truncated_mid_rank,
                       tt_swapped_ranks, tt_huge_rank, tt_empty_lines, tt_missing_field, tt_extra_field, tt_rank_gap,
                       tt_missing_byte, tt_duplicate_token, tt_non_integer_rank, tt_whitespace, tt_binary_junk,
                       tt_empty_file, tt_shuffled_lines, tt_reranked, tt_merge_of_missing_parts, tt_pattern_name),
    "tokenizer.json": _named(json_wrong_type, json_delete_key, json_unknown_type, json_truncated, json_deep_nesting,
                             json_not_utf8, json_bom, json_extra_field, json_weird_option, json_model_type_guess,
                             vocab_negative_id, vocab_duplicate_id, vocab_huge_id, vocab_bool_id, vocab_float_id,
                             vocab_string_id, vocab_gap, vocab_empty_token, vocab_missing_unk, merges_missing_token,
                             merges_malformed, merges_duplicate, merges_result_missing, added_empty_content,
                             added_content_not_str, added_id_out_of_range, added_id_of_other_token, added_duplicate,
                             added_flag_wrong_type, added_missing_field),
    "vocab.txt": _named(vt_duplicate_line, vt_empty_line, vt_binary_junk, vt_missing_special, vt_line_endings, vt_bom,
                        vt_space_inside, vt_truncated, vt_empty_file, vt_huge_line, vt_shuffled),
    "sentencepiece": _named(sp_byte_flip, sp_byte_flip_header, sp_truncated, sp_insert_junk, sp_field, sp_piece,
                            sp_charsmap, sp_no_pieces),
}
_BPE_ONLY = {"merges-missing-token", "merges-malformed", "merges-duplicate", "merges-result-missing"}


def mutations_of(base: str) -> list[str]:
    fmt = BASES[base][0]
    names = list(MUTATIONS[fmt])
    if base.startswith("bert"):
        names = [n for n in names if n not in _BPE_ONLY]
    return names


def make_case(base: str, mutation: str, seed: int) -> tuple[bytes, dict]:
    """The bytes of one malformed file (and loader options, e.g. an odd tiktoken pattern name)."""
    rng = random.Random(seed)
    out = MUTATIONS[BASES[base][0]][mutation](rng, base_bytes(base))
    return out if isinstance(out, tuple) else (out, {})
