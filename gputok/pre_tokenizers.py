"""Pre-tokenizers: split normalized codepoints into words, as index ranges into the flat batch.

A word is the half-open range ``[starts[i], ends[i])`` of the normalized ``values``; words stay in
text order, and ``text_offsets`` (len texts + 1) tells which words belong to which text. Nothing
is copied: the model later gathers the characters of the *unique* words only.

``BertPreTokenizer`` follows huggingface ``tokenizers``' BertPreTokenizer: whitespace (Rust's
``char::is_whitespace``) separates words and is dropped; each punctuation character (ASCII
punctuation or a Unicode P* category, with the reference's table quirks) is a word of its own.

CPU tensors go through numba kernels, one pass per text (``kernels/word_split_numba.py``, and
``kernels/regex_split_numba.py`` for the named regex rules); other devices through the torch-op
twins here (``*_torch``), which are the kernels' reference.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import regex
import torch

from . import _components, _dispatch, unicode
from .ingest import codepoints, strings, without_surrogates
from .ragged import Ragged, offsets_from_lengths, positions_in_rows, row_ids
from .kernels import word_split_numba


@dataclass(frozen=True)
class Words:
    starts: torch.Tensor  # int64 [words], index into the normalized values
    ends: torch.Tensor  # int64 [words]
    text_offsets: torch.Tensor  # int64 [texts + 1]

    def lengths(self) -> torch.Tensor:
        return self.ends - self.starts


def _words(starts, ends, text_offsets) -> Words:
    """Words from a kernel's numpy arrays (no copy)."""
    return Words(torch.from_numpy(starts), torch.from_numpy(ends), torch.from_numpy(text_offsets))


def words_from_starts(text: Ragged, starts_word: torch.Tensor) -> Words:
    """The words of ``text`` when ``starts_word`` marks the codepoints that begin one: each word
    runs to the next start or to the end of its text.

    >>> w = words_from_starts(Ragged(torch.tensor([1, 2, 3, 4]), torch.tensor([0, 3, 4])),
    ...                       torch.tensor([True, False, True, True]))
    >>> w.starts.tolist(), w.ends.tolist(), w.text_offsets.tolist()
    ([0, 2, 3], [2, 3, 4], [0, 2, 3])
    """
    if _dispatch.on_cpu_kernels(text.device):
        return _words(*word_split_numba.words_from_starts(text.offsets.numpy(), starts_word.numpy()))
    return words_from_starts_torch(text, starts_word)


def words_from_starts_torch(text: Ragged, starts_word: torch.Tensor) -> Words:
    """:func:`words_from_starts` as torch ops (the CUDA path; the kernel's reference)."""
    n = text.values.numel()
    starts = torch.nonzero(starts_word).flatten()
    ends = torch.empty_like(starts)
    ends[:-1] = starts[1:]
    if starts.numel():
        ends[-1] = n
    text_end = text.offsets[1:][torch.searchsorted(text.offsets, starts, right=True) - 1]
    counts = torch.zeros(n + 1, dtype=torch.int64, device=text.device)
    torch.cumsum(starts_word, 0, out=counts[1:])
    return Words(starts, torch.minimum(ends, text_end), counts[text.offsets])


WORD, SPACE, PUNCTUATION = 0, 1, 2


def whole_texts(text: Ragged) -> Words:
    """Each non-empty text is one word (no pre-tokenizer, or ByteLevel without its regex)."""
    if _dispatch.on_cpu_kernels(text.device):
        return _words(*word_split_numba.whole_texts(text.offsets.numpy()))
    return whole_texts_torch(text)


def whole_texts_torch(text: Ragged) -> Words:
    """:func:`whole_texts` as torch ops."""
    nonempty = text.lengths() > 0
    starts = text.offsets[:-1][nonempty]
    counts = nonempty.long()
    return Words(starts, starts + text.lengths()[nonempty], torch.cat([counts.new_zeros(1), counts.cumsum(0)]))


@functools.lru_cache(maxsize=8)
def _bert_classes(device: torch.device) -> torch.Tensor:
    classes = torch.full((unicode.MAX_CODEPOINT,), WORD, dtype=torch.uint8)
    classes[unicode.bert_punctuation_mask()] = PUNCTUATION
    classes[unicode.white_space_mask()] = SPACE
    return classes.to(device)


def split_by_class(text: Ragged, classes: torch.Tensor) -> Words:
    """Words from per-codepoint classes: WORD runs are words, each PUNCTUATION char is one, SPACE splits.

    >>> classes = torch.tensor([WORD] * 32 + [SPACE] + [PUNCTUATION] * 15 + [WORD] * 80, dtype=torch.uint8)
    >>> w = split_by_class(Ragged.from_lengths(torch.tensor([97, 32, 98, 99, 33, 100]), torch.tensor([4, 2])), classes)
    >>> w.starts.tolist(), w.ends.tolist(), w.text_offsets.tolist()
    ([0, 2, 4, 5], [1, 4, 5, 6], [0, 2, 4])
    """
    if _dispatch.on_cpu_kernels(text.device):
        return _words(*word_split_numba.split_by_class(text.values.numpy(), text.offsets.numpy(), classes.numpy()))
    return split_by_class_torch(text, classes)


def split_by_class_torch(text: Ragged, classes: torch.Tensor) -> Words:
    """:func:`split_by_class` as torch ops (the CUDA path; the kernel's reference)."""
    cls = classes[text.values.long()]
    n = cls.numel()
    first_of_text = torch.zeros(n + 1, dtype=torch.bool, device=cls.device)
    first_of_text[text.offsets[:-1]] = True
    first_of_text = first_of_text[:n]
    in_word = cls != SPACE
    prev_joins = torch.zeros(n, dtype=torch.bool, device=cls.device)
    prev_joins[1:] = cls[:-1] == WORD
    starts_word = in_word & ((cls == PUNCTUATION) | ~prev_joins | first_of_text)
    next_starts = torch.ones(n, dtype=torch.bool, device=cls.device)
    next_starts[:-1] = starts_word[1:] | ~in_word[1:] | first_of_text[1:]
    ends_word = in_word & next_starts
    starts = torch.nonzero(starts_word).flatten()
    ends = torch.nonzero(ends_word).flatten() + 1
    counts = torch.zeros(n + 1, dtype=torch.int64, device=cls.device)
    torch.cumsum(starts_word, 0, out=counts[1:])
    return Words(starts, ends, counts[text.offsets])


class BertPreTokenizer:
    """huggingface's BertPreTokenizer: whitespace separates words, each punctuation character is one (a numba kernel)."""

    type = "BertPreTokenizer"

    def __call__(self, text: Ragged) -> Words:
        return split_by_class(text, _bert_classes(text.device))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> BertPreTokenizer:
        return cls()


class Split:
    """huggingface's Split (a Regex; a String: :class:`CharSplit`), every behavior and invert: the named rules (gpt2, cl100k, o200k, llama3, qwen2) and any regex that splits as one of them (``gputok.split_recognition``) run a numba kernel, any other regex the ``regex`` module per text (slower).

    Words are the matches of a regex, as tiktoken splits text before BPE.

    ``pattern`` is a name from :data:`gputok.regex_split.PATTERNS` ("gpt2", "cl100k", "o200k"),
    matched exactly without a regex engine (:func:`gputok.regex_split.split`: a numba kernel on
    the CPU, tensor ops elsewhere), or any other regex, which runs through the ``regex`` module
    on the CPU (correct, and slower: a Python object per match).
    """

    type = "Split"

    def __init__(self, pattern: str, *, byte_level: bool = False, behavior: str = "Isolated", invert: bool = False,
                 ruby: bool = True) -> None:
        """``byte_level``: the words feed a byte-level BPE; saved as huggingface writes that,
        ``Sequence[Split(regex), ByteLevel(use_regex=false)]``. ``pattern``: a rule name, one of
        tiktoken's encoding names (:data:`TIKTOKEN_NAMES`), or any regex huggingface compiles
        (one that never matches is valid here as there: :meth:`tiktoken` is where a pattern
        argument that matches nothing is refused). ``behavior`` and ``invert``: huggingface's, what becomes of the matches and the text between them
        (:func:`gputok.regex_split.split_with_regex`). ``ruby``: a regex reads as huggingface's
        Oniguruma reads a tokenizer.json's (``^`` and ``$`` at each line: ``regex_split.ruby_anchors``),
        else as tiktoken reads its own (:meth:`tiktoken`)."""
        from . import regex_split

        if not isinstance(pattern, str):
            raise ValueError(f"Split pattern {pattern!r} is a {type(pattern).__name__}; pass a rule name or a regex string")
        if behavior not in regex_split.BEHAVIORS:
            raise ValueError(f"Split behavior {behavior!r} is not one of {list(regex_split.BEHAVIORS)}")
        self.byte_level, self.behavior, self.invert, self.ruby = byte_level, behavior, bool(invert), ruby
        self.literal_string: str | None = None  # a huggingface String pattern, written back as one
        name = TIKTOKEN_NAMES.get(pattern, pattern)
        self.rule = name if name in regex_split.PATTERNS else None
        self.pattern = regex_split.PATTERNS.get(name, pattern)
        if self.rule is None:
            _check_split_regex(pattern, probe=False, ruby=ruby)
            from .split_recognition import rule_for

            self.rule = rule_for(pattern, ruby)  # a named rule spelled another way takes its fast path

    @classmethod
    def tiktoken(cls, pattern: str) -> Split:
        """tiktoken's split: a named rule, or a regex whose matches are the words (tiktoken drops
        the text between them: huggingface's ``Removed`` with ``invert``), for byte-level BPE.
        A regex that matches nothing in :data:`PROBE_TEXT` is an error here (every text would
        encode to nothing: most likely a misspelled rule name)."""
        from . import regex_split

        if isinstance(pattern, str) and TIKTOKEN_NAMES.get(pattern, pattern) in regex_split.PATTERNS:
            return cls(pattern, byte_level=True)
        if isinstance(pattern, str):
            _check_split_regex(pattern, probe=True, ruby=False)
        return cls(pattern, byte_level=True, behavior="Removed", invert=True, ruby=False)

    @property
    def tiles(self) -> bool:
        """Whether the words are exactly the matches (a named rule, whose matches cover every
        text, Isolated and not inverted): then the rule's matches are the words."""
        return self.rule is not None and self.behavior == "Isolated" and not self.invert

    def __call__(self, text: Ragged) -> Words:
        from . import regex_split

        if self.tiles:
            return regex_split.split(text, self.rule)
        if self.rule is not None and _dispatch.on_cpu_kernels(text.device):
            # A rule's matches tile every text: Removed leaves nothing, Contiguous joins a whole
            # text, and every other behavior (with or without invert) keeps each match a word.
            if self.behavior == "Removed" and not self.invert:
                empty = torch.zeros(0, dtype=torch.int64)
                return Words(empty, empty.clone(), torch.zeros(len(text) + 1, dtype=torch.int64))
            return whole_texts(text) if self.behavior == "Contiguous" else regex_split.split(text, self.rule)
        words = regex_split.split_with_regex(strings(text), self.pattern, behavior=self.behavior, invert=self.invert,
                                             ruby=self.ruby)
        return Words(words.starts.to(text.device), words.ends.to(text.device), words.text_offsets.to(text.device))

    def words_of(self, texts: list[str]) -> list[list[str]]:
        """The words of each text as strings."""
        words = self(codepoints(texts))
        joined = "".join(without_surrogates(t) for t in texts)
        pieces = [joined[s:e] for s, e in zip(words.starts.tolist(), words.ends.tolist())]
        bounds = words.text_offsets.tolist()
        return [pieces[bounds[i]:bounds[i + 1]] for i in range(len(texts))]

    def to_json(self) -> dict[str, Any]:
        from . import regex_split

        pattern = self.pattern if self.ruby else regex_split.tiktoken_as_ruby(self.pattern)
        pattern = regex_split.hf_spelling(pattern) if self.rule is not None else pattern
        written = {"Regex": pattern} if self.literal_string is None else {"String": self.literal_string}
        split = {"type": "Split", "pattern": written, "behavior": self.behavior, "invert": self.invert}
        if not self.byte_level:
            return split
        return {"type": "Sequence", "pretokenizers": [
            split, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Split:
        pattern = spec.get("pattern") or {}
        if "String" in pattern:
            return CharSplit.literal(pattern["String"], behavior=spec.get("behavior", "Isolated"),
                                     invert=spec.get("invert", False))
        from . import regex_split

        named = {spelling: name for name, p in reversed(regex_split.PATTERNS.items())  # first name wins: gpt2
                 for spelling in (p, regex_split.hf_spelling(p))}
        return cls(named.get(pattern["Regex"], pattern["Regex"]), behavior=spec.get("behavior", "Isolated"),
                   invert=spec.get("invert", False))


# tiktoken's encoding names, as aliases of the split rule each uses (tiktoken_ext.openai_public:
# gpt2, r50k_base, p50k_base and p50k_edit split with r50k_pat_str, o200k_harmony with o200k's).
TIKTOKEN_NAMES = {"r50k_base": "r50k", "p50k_base": "p50k", "p50k_edit": "p50k", "cl100k_base": "cl100k",
                  "o200k_base": "o200k", "o200k_harmony": "o200k"}
# A Split regex must match something in this: letters, digits, spaces, punctuation, CJK, emoji.
PROBE_TEXT = "Hello world, it's 2024! x=1+2; foo_bar\n\t  Ünïcode 中文字 😀 ..."


def pattern_names() -> list[str]:
    from . import regex_split

    return sorted(set(regex_split.PATTERNS) | set(TIKTOKEN_NAMES))


# Oniguruma's (huggingface's) largest repeat count; the regex module would expand a larger one in
# memory (``a{99999999}`` takes gigabytes), so such a pattern is refused before it compiles.
MAX_REPEAT = 100_000
_REPEAT_COUNT = regex.compile(r"(?<!\\)\{(\d*)(?:,(\d*))?\}")


def _check_split_regex(pattern: str, *, probe: bool, ruby: bool) -> None:
    """A Split regex compiles (and, with ``probe``, matches some text); otherwise say which names
    exist. ``ruby``: as :class:`Split` reads it."""
    from . import regex_split

    names = pattern_names()
    counts = [int(c) for m in _REPEAT_COUNT.finditer(pattern) for c in m.groups() if c]
    if counts and max(counts) > MAX_REPEAT:
        raise ValueError(f"Split pattern {pattern[:80]!r} repeats {max(counts)} times, over huggingface's limit of "
                         f"{MAX_REPEAT} (its regex engine refuses it: 'too big number for repeat range'); "
                         "pass a smaller repeat count")
    try:
        compiled = regex.compile(*regex_split.read_pattern(pattern, ruby))
    except regex.error as e:
        raise ValueError(f"Split pattern {pattern!r} is neither a known name {names} nor a valid regex ({e}); "
                         "pass one of the names or a regex") from e
    if not probe or any(m.end() > m.start() for m in compiled.finditer(PROBE_TEXT)):
        return
    close = difflib.get_close_matches(pattern.lower(), names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(f"Split pattern {pattern!r} matches nothing in the probe text {PROBE_TEXT!r}, so every text "
                     f"would encode to no tokens; {hint}pass one of the names {names} (names are case-sensitive) "
                     "or a regex that matches the words")


class ByteLevel(Split):
    """huggingface's ByteLevel pre-tokenizer: the GPT-2 split (``use_regex``), bytes as BPE input.

    The byte-to-character mapping of its vocabulary lives in the BPE model. ``add_prefix_space``:
    a space goes before each non-empty text that does not start with one (:meth:`rewrite`).
    """

    type = "ByteLevel"

    def __init__(self, *, use_regex: bool = True, add_prefix_space: bool = False, trim_offsets: bool = True):
        super().__init__("gpt2")
        self.use_regex, self.trim_offsets, self.add_prefix_space = use_regex, trim_offsets, add_prefix_space
        if add_prefix_space:
            self.rewrite = functools.partial(_prepend_unless_first, char=" ")

    def __call__(self, text: Ragged) -> Words:
        return super().__call__(text) if self.use_regex else whole_texts(text)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "add_prefix_space": self.add_prefix_space, "trim_offsets": self.trim_offsets,
                "use_regex": self.use_regex}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> ByteLevel:
        return cls(use_regex=spec.get("use_regex", True), add_prefix_space=spec.get("add_prefix_space", False),
                   trim_offsets=spec.get("trim_offsets", True))


class Sequence:
    """huggingface's Sequence: each pre-tokenizer splits the words of the one before it.

    A later step runs on the words as texts of their own (:func:`split_words`: the words' characters
    gathered into one row each, split, and the pieces mapped back), which is what huggingface does
    (each step sees one split at a time: a regex's lookahead stops at the word's end). A step that
    rewrites the text (Metaspace, ByteLevel with add_prefix_space) may come first, or last as a
    Metaspace whose scheme is "always" or "never" (older T5 and Pegasus files: ``[WhitespaceSplit,
    Metaspace]``), which rewrites each word as huggingface does (:meth:`_split_rewrite`).

    The byte-level form ``[Split(regex), ByteLevel(use_regex=False)]`` loads as that Split marked
    byte-level (the fast path of the tiktoken-style files).
    """

    type = "Sequence"

    def __init__(self, pretokenizers: list) -> None:
        for k, step in enumerate(pretokenizers[:-1]):
            if isinstance(step, ByteLevel) or getattr(step, "byte_level", False):
                raise ValueError(f"pre_tokenizer Sequence: step {k} is ByteLevel, which maps the text to its byte "
                                 "characters: gputok supports it only as the last step (the later steps would split "
                                 "the byte characters)")
        for k, step in enumerate(pretokenizers[1:], 1):
            late_metaspace = (k == len(pretokenizers) - 1 and type(step) is Metaspace
                              and step.prepend_scheme in ("always", "never")
                              and getattr(pretokenizers[0], "rewrite", None) is None)
            if getattr(step, "rewrite", None) is not None and not late_metaspace:
                raise ValueError(f"pre_tokenizer Sequence: step {k} ({step.type}) rewrites the text (spaces as "
                                 "'▁', or a prefix space), which gputok supports only as the first step, or as a "
                                 "last Metaspace whose prepend_scheme is 'always' or 'never'")
        self.pretokenizers = pretokenizers
        self.split_rewrite = None
        if len(pretokenizers) > 1 and type(pretokenizers[-1]) is Metaspace:
            self.split_rewrite = self._split_rewrite  # older T5 and Pegasus files: [WhitespaceSplit, Metaspace]
        self.byte_level = any(isinstance(step, ByteLevel) or getattr(step, "byte_level", False) for step in pretokenizers)
        if pretokenizers and getattr(pretokenizers[0], "rewrite", None) is not None:
            self.rewrite = pretokenizers[0].rewrite
        # ByteLevel without its regex splits nothing: only its byte mapping (done by the BPE model) stays
        self._splitting = [step for step in pretokenizers if not (type(step) is ByteLevel and not step.use_regex)]
        if self.split_rewrite is not None:  # the words it rewrites: the steps before the Metaspace, made once
            self._words_before_rewrite = (self._splitting[0] if len(self._splitting) == 2
                                          else Sequence(self.pretokenizers[:-1]))

    def __call__(self, text: Ragged) -> Words:
        if not self._splitting:
            return whole_texts(text)
        words = self._splitting[0](text)
        for step in self._splitting[1:]:
            words = split_words(text, words, step)
        return words

    def _split_rewrite(self, text: Ragged) -> tuple[Ragged, torch.Tensor, Words]:
        """The words of the steps before a last Metaspace, each rewritten and split as huggingface's
        Metaspace rewrites each split it is given (spaces as the replacement, the replacement
        before a word that does not start with it, pointing at its first character; then a word
        at each replacement): (the words' rewritten characters, each text's words back to back
        (the characters between them dropped), each one's source position in ``text``, the words).
        ``Tokenizer._encode_codepoints`` calls it in place of ``rewrite`` and ``__call__``. CPU
        kernels (``gather_words``, ``prepend_unless_first``, ``split_at_marks``) on other devices too."""
        from .kernels import word_split_numba

        meta = self.pretokenizers[-1]
        words = self._words_before_rewrite(text)
        starts, ends, text_offsets = (t.cpu().numpy() for t in (words.starts, words.ends, words.text_offsets))
        gathered, rows = word_split_numba.gather_words(text.values.cpu().numpy(), starts, ends)
        replacement = ord(meta.replacement)
        values, row_offsets, moved = word_split_numba.prepend_unless_first(gathered, rows, 32, replacement, replacement,
                                                                          meta.prepend_scheme == "always")
        position = np.repeat(starts - rows[:-1], np.diff(rows)) + np.arange(gathered.size)  # gathered -> text
        new_starts, new_ends, row_words = word_split_numba.split_at_marks(values, row_offsets, replacement, meta.split)
        device = text.device
        out = Ragged(torch.from_numpy(values), torch.from_numpy(row_offsets[text_offsets]))
        split = Words(*(torch.from_numpy(a).to(device) for a in (new_starts, new_ends, row_words[text_offsets])))
        return out.to(device), torch.from_numpy(position[moved]).to(device), split

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "pretokenizers": [step.to_json() for step in self.pretokenizers]}

    @classmethod
    def from_json(cls, spec: dict[str, Any]):
        from .split_sequences import from_sequence_spec

        fast = from_sequence_spec(spec)  # DeepSeek-V3's Splits: one kernel
        if fast is not None:
            return fast
        steps = [from_json(s) for s in spec.get("pretokenizers", [])]
        if (len(steps) == 2 and type(steps[0]) is Split and not steps[0].byte_level and type(steps[1]) is ByteLevel
                and not steps[1].use_regex and not steps[1].add_prefix_space and steps[1].trim_offsets):
            steps[0].byte_level = True  # written back as this same Sequence
            return steps[0]
        return cls(steps)


def split_words(text: Ragged, words: Words, step) -> Words:
    """The words of ``step`` (a pre-tokenizer) run on each of ``words`` as a text of its own, as
    positions of ``text``: a later step of a :class:`Sequence`. CPU: two numba kernels
    (``gather_words``, ``words_within_words``) around the step's own."""
    from .kernels import word_split_numba

    device = text.device
    starts, ends, text_offsets = (t.cpu().numpy() for t in (words.starts, words.ends, words.text_offsets))
    values, row_offsets = word_split_numba.gather_words(text.values.cpu().numpy(), starts, ends)
    rows = Ragged(torch.from_numpy(values).to(device), torch.from_numpy(row_offsets).to(device))
    inner = step(rows)
    out = word_split_numba.words_within_words(starts, text_offsets, row_offsets, inner.starts.cpu().numpy(),
                                              inner.ends.cpu().numpy(), inner.text_offsets.cpu().numpy())
    return Words(*(torch.from_numpy(a).to(device) for a in out))


def _mask_words(text: Ragged, mask, behavior: str, invert: bool) -> Words:
    """huggingface's split with a per-character pattern (``mask``: uint8 numpy per codepoint):
    ``kernels/word_split_numba.split_by_mask``. Other devices run it on a CPU copy."""
    from . import regex_split
    from .kernels import word_split_numba

    out = word_split_numba.split_by_mask(text.values.cpu().numpy(), text.offsets.cpu().numpy(), mask,
                                         regex_split.BEHAVIORS.index(behavior), invert)
    return Words(*(torch.from_numpy(a).to(text.device) for a in out))


def _check_behavior(component: str, behavior: Any) -> str:
    from . import regex_split

    if behavior not in regex_split.BEHAVIORS:
        raise ValueError(f"{component} behavior {behavior!r} is not one of {list(regex_split.BEHAVIORS)}")
    return behavior


class CharSplit:
    """huggingface's Split on a String: one character by a numba kernel, a longer one as its escaped regex (slower).

    A split at single characters (``mask``, a uint8 numpy table over codepoints), with
    huggingface's behaviors: Split on a one-character String, CharDelimiterSplit, Punctuation,
    Digits. One numba kernel pass (``split_by_mask``). A longer String runs as its escaped regex
    (:meth:`literal`)."""

    type = "Split"

    def __init__(self, mask, *, behavior: str, invert: bool = False, spec: dict[str, Any]) -> None:
        self.mask, self.behavior, self.invert, self.spec = mask, behavior, bool(invert), spec

    @classmethod
    def literal(cls, string: str, *, behavior: str, invert: bool):
        """Split on ``{"String": string}``: a one-character string splits by mask, a longer one
        is the regex of its escaped text (the matches of a literal cannot overlap or be empty)."""
        import numpy as np

        _check_behavior("Split", behavior)
        spec = {"type": "Split", "pattern": {"String": string}, "behavior": behavior, "invert": bool(invert)}
        if len(string) == 1:
            mask = np.zeros(unicode.MAX_CODEPOINT, dtype=np.uint8)
            mask[ord(string)] = 1
            return cls(mask, behavior=behavior, invert=invert, spec=spec)
        if not string:  # huggingface: an empty pattern matches nothing
            return cls(np.zeros(unicode.MAX_CODEPOINT, dtype=np.uint8), behavior=behavior, invert=invert, spec=spec)
        split = Split(regex.escape(string), behavior=behavior, invert=invert)
        split.literal_string = string
        return split

    def __call__(self, text: Ragged) -> Words:
        return _mask_words(text, self.mask, self.behavior, self.invert)

    def to_json(self) -> dict[str, Any]:
        return dict(self.spec)


class CharDelimiterSplit(CharSplit):
    """huggingface's CharDelimiterSplit: ``delimiter`` separates words and is dropped."""

    type = "CharDelimiterSplit"

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> CharDelimiterSplit:
        import numpy as np

        delimiter = spec.get("delimiter")
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise ValueError(f"CharDelimiterSplit delimiter {delimiter!r}: expected one character")
        mask = np.zeros(unicode.MAX_CODEPOINT, dtype=np.uint8)
        mask[ord(delimiter)] = 1
        return cls(mask, behavior="Removed", spec={"type": cls.type, "delimiter": delimiter})


class Punctuation(CharSplit):
    """huggingface's Punctuation: each punctuation character (BERT's rule) is a match, grouped by
    ``behavior`` (default Isolated)."""

    type = "Punctuation"

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Punctuation:
        behavior = _check_behavior("Punctuation", spec.get("behavior", "Isolated"))
        mask = (_bert_classes(torch.device("cpu")).numpy() == PUNCTUATION).astype("uint8")
        return cls(mask, behavior=behavior, spec={"type": cls.type, "behavior": behavior})


class Digits(CharSplit):
    """huggingface's Digits: numeric characters (Rust's ``char::is_numeric``: \\p{N} of Unicode 17)
    split from the rest, each on its own (``individual_digits``, Isolated) or in runs (Contiguous)."""

    type = "Digits"

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Digits:
        individual = spec.get("individual_digits", False)
        return cls(_reference_classes("NUMERIC"), behavior="Isolated" if individual else "Contiguous",
                   spec={"type": cls.type, "individual_digits": individual})


@functools.lru_cache(maxsize=2)
def _reference_classes(name: str):
    """uint8 numpy table over codepoints: huggingface's ``WHITESPACE`` or ``NUMERIC`` classes
    (:mod:`gputok._pre_tokenizer_classes`, asked of huggingface on every codepoint)."""
    from . import _pre_tokenizer_classes

    return unicode.from_runs(getattr(_pre_tokenizer_classes, f"{name}_RUNS"))


class Whitespace:
    """huggingface's Whitespace, the regex ``\\w+|[^\\w\\s]+`` (matches kept, the rest dropped):
    runs of word characters and runs of other non-space characters are words. One numba pass
    (``split_runs``) over a class table built from that regex's classes."""

    type = "Whitespace"

    def __call__(self, text: Ragged) -> Words:
        from .kernels import word_split_numba

        out = word_split_numba.split_runs(text.values.cpu().numpy(), text.offsets.cpu().numpy(), _whitespace_runs())
        return Words(*(torch.from_numpy(a).to(text.device) for a in out))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Whitespace:
        return cls()


def _whitespace_runs():
    """Whitespace's classes: 1 word character, 2 other non-space, 0 space (dropped); its regex
    runs in Rust's ``regex`` crate, whose ``\\w`` is not Oniguruma's (U+200C is one, ``²`` not)."""
    return _reference_classes("WHITESPACE")


class FixedLength:
    """huggingface's FixedLength: each text in pieces of ``length`` characters."""

    type = "FixedLength"

    def __init__(self, length: int = 5) -> None:
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise ValueError(f"FixedLength length {length!r}: expected an integer >= 1")
        self.length = length

    def __call__(self, text: Ragged) -> Words:
        from .kernels import word_split_numba

        out = word_split_numba.split_fixed_length(text.offsets.cpu().numpy(), self.length)
        return Words(*(torch.from_numpy(a).to(text.device) for a in out))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "length": self.length}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> FixedLength:
        return cls(spec.get("length", 5))


class WhitespaceSplit:
    """huggingface's WhitespaceSplit: words are the runs between whitespace (``char::is_whitespace``)."""

    type = "WhitespaceSplit"

    def __call__(self, text: Ragged) -> Words:
        return split_by_class(text, _whitespace_classes(text.device))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> WhitespaceSplit:
        return cls()


@functools.lru_cache(maxsize=8)
def _whitespace_classes(device: torch.device) -> torch.Tensor:
    classes = torch.full((unicode.MAX_CODEPOINT,), WORD, dtype=torch.uint8)
    classes[unicode.white_space_mask()] = SPACE
    return classes.to(device)


class Metaspace:
    """huggingface's Metaspace: spaces become ``replacement`` ("▁"), which goes first in a text that
    does not start with it (``prepend_scheme`` "always" or "first"; "never"), then with ``split``
    a word starts at every ``▁`` (merged with what follows), else each text is one word.

    "first" prepends only where the text starts: added tokens cut a text into pieces that gputok
    encodes as texts of their own, those after an added token by a twin pipeline whose Metaspace
    prepends never (``Tokenizer._not_first``), as huggingface prepends to no split but the one
    that starts the text.

    >>> m = Metaspace()
    >>> text, src = m.rewrite(Ragged.from_lengths(torch.tensor([104, 32, 32, 105]), torch.tensor([4])))
    >>> "".join(map(chr, text.values.tolist())), src.tolist()
    ('▁h▁▁i', [0, 0, 1, 2, 3])
    >>> w = m(text)
    >>> w.starts.tolist(), w.ends.tolist()
    ([0, 2, 3], [2, 3, 5])
    """

    type = "Metaspace"
    SCHEMES = ("always", "first", "never")

    def __init__(self, *, replacement: str = "\u2581", prepend_scheme: str = "always", split: bool = True) -> None:
        if prepend_scheme not in self.SCHEMES:
            raise ValueError(f"Metaspace prepend_scheme={prepend_scheme!r}; choose one of {self.SCHEMES}")
        if len(replacement) != 1:
            raise ValueError(f"Metaspace replacement={replacement!r} must be one character")
        self.replacement, self.prepend_scheme, self.split = replacement, prepend_scheme, split

    def rewrite(self, text: Ragged) -> tuple[Ragged, torch.Tensor]:
        """Spaces as the replacement, and the prepended one; returns the text and each character's source."""
        if _dispatch.on_cpu_kernels(text.device):
            values, offsets, src = word_split_numba.prepend_unless_first(
                text.values.numpy(), text.offsets.numpy(), 32, ord(self.replacement), ord(self.replacement),
                self.prepend_scheme != "never")
            return Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), torch.from_numpy(src)
        from .normalizers import Replace

        text, src = Replace({"String": " "}, self.replacement)(text)
        if self.prepend_scheme == "never":
            return text, src
        text, moved = _prepend_unless_first(text, char=self.replacement)
        return text, src[moved]

    def __call__(self, text: Ragged) -> Words:
        if _dispatch.on_cpu_kernels(text.device):
            return _words(*word_split_numba.split_at_marks(text.values.numpy(), text.offsets.numpy(),
                                                           ord(self.replacement), self.split))
        n = text.values.numel()
        device = text.device
        starts_word = torch.zeros(n, dtype=torch.bool, device=device)
        starts_word[text.offsets[:-1][text.offsets[:-1] < text.offsets[1:]]] = True
        if self.split:
            starts_word |= text.values == ord(self.replacement)
        return words_from_starts(text, starts_word)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "replacement": self.replacement, "prepend_scheme": self.prepend_scheme,
                "split": self.split}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> Metaspace:
        scheme = spec.get("prepend_scheme") or ("always" if spec.get("add_prefix_space", True) else "never")
        return cls(replacement=spec.get("replacement", spec.get("str_rep", "\u2581")), prepend_scheme=scheme,
                   split=spec.get("split", True))


def _prepend_unless_first(text: Ragged, *, char: str) -> tuple[Ragged, torch.Tensor]:
    """``char`` before each non-empty text that does not start with it; returns each character's source."""
    if _dispatch.on_cpu_kernels(text.device):
        values, offsets, src = word_split_numba.prepend_unless_first(
            text.values.numpy(), text.offsets.numpy(), -1, -1, ord(char), True)
        return Ragged(torch.from_numpy(values), torch.from_numpy(offsets)), torch.from_numpy(src)
    device = text.device
    lengths = text.lengths()
    nonempty = lengths > 0
    first = text.values[text.offsets[:-1].clamp(max=max(text.values.numel() - 1, 0))] if text.values.numel() else lengths
    add = (nonempty & (first != ord(char))).long()
    offsets = offsets_from_lengths(lengths + add)
    total = int(offsets[-1])
    row = row_ids(offsets, total)
    pos = positions_in_rows(offsets, total) - add[row]  # -1: the prepended character
    src = text.offsets[:-1][row] + pos.clamp(min=0)
    values = text.values[src] if total else text.values[:0]
    values = torch.where(pos < 0, torch.tensor(ord(char), dtype=values.dtype, device=device), values)
    return Ragged(values, offsets), src


class UnicodeScripts:
    """huggingface's UnicodeScripts: a text cut wherever the Unicode script changes (Hiragana and
    Katakana count as Han; the space belongs to the words before it; leading spaces are dropped),
    one kernel pass per text (``kernels/unicode_scripts_numba.py``) over huggingface's own script
    table (:func:`script_table`). Other devices run it on a CPU copy."""

    type = "UnicodeScripts"

    def __call__(self, text: Ragged) -> Words:
        from .kernels import unicode_scripts_numba

        out = unicode_scripts_numba.split_scripts(text.values.cpu().numpy(), text.offsets.cpu().numpy(),
                                                  script_table())
        return Words(*(torch.from_numpy(a).to(text.device) for a in out))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> UnicodeScripts:
        return cls()


@functools.lru_cache(maxsize=1)
def script_table():
    """The script class (uint8) of every codepoint as huggingface reads it: 0 for the space
    ("Any"), one number per script otherwise (decoded from :mod:`gputok._script_table`, which
    ``tools/make_script_table.py`` derives from huggingface itself)."""
    from . import _script_table

    return unicode.from_runs(_script_table.SCRIPT_RUNS)


PRE_TOKENIZERS = {cls.type: cls for cls in (BertPreTokenizer, Split, ByteLevel, Sequence, WhitespaceSplit, Metaspace,
                                           Whitespace, Punctuation, Digits, CharDelimiterSplit, FixedLength,
                                           UnicodeScripts)}


def from_json(spec: dict[str, Any] | None):
    return _components.from_json(spec, PRE_TOKENIZERS, "pre_tokenizer")
