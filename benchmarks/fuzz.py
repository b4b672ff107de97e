"""The standing fuzz campaign: gputok against its reference libraries, and malformed files.

    python benchmarks/fuzz.py --minutes 3                      # a sample run
    python benchmarks/fuzz.py --minutes 60 --strings 1000000 --files 1000 --workers 2   # the acceptance run
    python benchmarks/fuzz.py --replay text:cl100k-tiktoken:batch64:123   # one job again, printed

(a) Differential fuzz: every family of ``_oracles.FAMILIES`` (BERT tokenizer.json, gpt2 and cl100k
.tiktoken, gputok's cl100k tokenizer.json in gputok and in huggingface, Mistral SentencePiece BPE,
two SentencePiece Unigram models, char-level BPE) encodes random Unicode, adversarial text and long
lines (``_fuzz_text``) in batches of 1, 7, 64 and 1000 texts; the ids must equal the reference's.
A mismatch or a gputok exception is shrunk to a small failing string and saved.
(b) Malformed files (``_fuzz_files``): named mutations of real .tiktoken, tokenizer.json, vocab.txt
and .model files. gputok must reject each with a ValueError whose message names the file, or load
it and encode a probe set to the reference's ids; a file gputok loads while the reference rejects
it, or that encodes otherwise (or to nothing), is "silently loaded".

Each job runs in a worker process under a memory cap (RLIMIT_AS) and a watchdog: a stage (one
encode call, one load) that runs past ``--hang-seconds`` is a hang, the worker is killed and
replaced. Prints a table per family and per file mutation; writes the findings as JSON
(default bench-results/fuzz.json). The exit status is 1 when anything was found.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from multiprocessing.connection import wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _fuzz_files  # noqa: E402
import _fuzz_text  # noqa: E402
import _oracles  # noqa: E402

PROBE = ["hello world", "Hello, World! 123", "ab c", "The quick brown fox jumps over the lazy dog.", "naïve café",
         "中文文本测试，没有空格。", "日本語のテキスト", "한국어 텍스트", "😀👍🏽 emoji", "  leading and   multiple   spaces ",
         "line\nbreak\r\nand\ttab", "don't you're I'M we'LL", "1234567890 3.14", "[CLS] [MASK] <s> </s> <unk> <|endoftext|>",
         "▁x▁ ##ing </w> Ġ", "x" * 200, "e\u0301 \u0301", "Ελληνικά Русский العربية हिन्दी ไทย", "a", " ", "",
         "\x00\ufffd\x7f", "ǅ Ǆ ǆ ﬁ ＡＢＣ１２３ ｶﾞ", "unaffable tokenization", "+------+ ==> <= !== ..."]
ALLOWED_ERRORS = (ValueError,)  # UnicodeDecodeError and json.JSONDecodeError are ValueErrors too
SHRINK_SECONDS, SHRINK_CALLS, SHRINKS_PER_JOB, TEXT_KEPT = 20.0, 400, 3, 400


# ---- worker side ----------------------------------------------------------------------------

class _Worker:
    """The state of one worker process: its families (loaded once) and a scratch directory."""

    def __init__(self, conn, threads: int, scratch: str):
        self.conn = conn
        self.families: dict[str, _oracles.Family] = {}
        self.scratch = Path(tempfile.mkdtemp(prefix="worker-", dir=scratch))
        self.threads = threads

    def stage(self, what: str) -> None:
        self.conn.send(("stage", what))

    def family(self, name: str) -> _oracles.Family:
        if name not in self.families:
            self.stage(f"load family {name}")
            self.families[name] = _oracles.FAMILIES[name]()
        return self.families[name]


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:300]}"


def _outcome(family: _oracles.Family, text: str) -> str:
    """'ok', 'mismatch', 'crash:<exception type>' or 'reference' (the reference failed) for one text."""
    try:
        ours = family.ours([text])[0]
    except Exception as e:  # noqa: BLE001 (any exception of gputok's is the finding)
        return f"crash:{type(e).__name__}"
    try:
        return "ok" if ours == family.reference([text])[0] else "mismatch"
    except BaseException:  # noqa: BLE001 (pyo3 panics are BaseExceptions)
        return "reference"


def shrink(text: str, still_fails, stage) -> str:
    """A shorter text that ``still_fails`` too: drop chunks, halving the chunk size (ddmin-like),
    within SHRINK_CALLS calls and SHRINK_SECONDS."""
    calls, start, chunk = 0, time.monotonic(), max(len(text) // 2, 1)
    while chunk >= 1:
        i = 0
        while i < len(text):
            if calls >= SHRINK_CALLS or time.monotonic() - start > SHRINK_SECONDS:
                return text
            candidate = text[:i] + text[i + chunk:]
            stage(f"shrink: a text of {len(candidate)} characters")
            calls += 1
            if still_fails(candidate):
                text = candidate
            else:
                i += chunk
        chunk //= 2
    return text


def _finding(worker, family, kind, seed, text, outcome, detail, shrinks_left) -> dict:
    """One text finding, shrunk while the job has shrinks left."""
    alone = _outcome(family, text) == outcome
    small = text
    if alone and shrinks_left > 0:
        small = shrink(text, lambda t: _outcome(family, t) == outcome, worker.stage)
    found = {"type": "mismatch" if outcome == "mismatch" else "crash", "family": family.name,
             "replay": f"text:{family.name}:{kind}:{seed}",
             "outcome": outcome, "length": len(text), "text": text[:TEXT_KEPT], "fails_alone": alone,
             "shrunk": small[:TEXT_KEPT], "detail": detail}
    if alone:
        try:
            found["ours"] = family.ours([small])[0][:60]
            found["reference"] = family.reference([small])[0][:60]
        except BaseException as e:  # noqa: BLE001
            found["error"] = _error(e)
    return found


def text_job(worker: _Worker, family_name: str, kind: str, seed: int) -> dict:
    """Encode the batches of one job with gputok and the reference; findings for every difference."""
    family = worker.family(family_name)
    batches = _fuzz_text.job_batches(kind, seed)
    result = {"strings": 0, "findings": [], "mismatches": 0, "crashes": 0, "reference_errors": 0, "chars": 0}
    shrinks_left = SHRINKS_PER_JOB
    for number, batch in enumerate(batches):
        result["strings"] += len(batch)
        result["chars"] += sum(map(len, batch))
        where = f"batch {number} of {len(batch)} texts, longest {max(map(len, batch))} characters"
        worker.stage(f"gputok encode, {where}")
        try:
            ours = family.ours(batch)
        except Exception as e:  # noqa: BLE001
            result["crashes"] += 1
            culprit = next((t for t in batch if _outcome(family, t).startswith("crash")), batch[0])
            result["findings"].append(_finding(worker, family, kind, seed, culprit, _outcome(family, culprit),
                                               _error(e) + "\n" + traceback.format_exc(limit=-4), shrinks_left))
            shrinks_left -= 1
            continue
        worker.stage(f"reference encode, {where}")
        try:
            reference = family.reference(batch)
        except BaseException:  # noqa: BLE001 (compare text by text, leaving out what the reference cannot take)
            reference = []
            for text in batch:
                try:
                    reference.append(family.reference([text])[0])
                except BaseException:  # noqa: BLE001
                    reference.append(None)
                    result["reference_errors"] += 1
        for text, got, expected in zip(batch, ours, reference, strict=True):
            if expected is not None and got != expected:
                result["mismatches"] += 1
                if shrinks_left > -20:  # keep the first few findings of a job, shrunk
                    result["findings"].append(_finding(worker, family, kind, seed, text, "mismatch",
                                                       f"in a batch of {len(batch)}", shrinks_left))
                shrinks_left -= 1
    return result


def _load(loader, path, options):
    """(encode, None) or (None, the exception)."""
    try:
        return loader(path, **options), None
    except BaseException as e:  # noqa: BLE001 (whatever it is, it is the verdict)
        return None, e


def file_case(worker: _Worker, base: str, mutation: str, seed: int) -> dict:
    """Load one malformed file with gputok and the reference, and judge gputok's answer."""
    fmt = _fuzz_files.BASES[base][0]
    worker.stage(f"make {base} {mutation} {seed}")
    data, options = _fuzz_files.make_case(base, mutation, seed)
    path = worker.scratch / f"case-{seed}-{mutation}-{base}"
    path.write_bytes(data)
    ours_loader, reference_loader = _oracles.LOADERS[fmt]
    case = {"base": base, "mutation": mutation, "seed": seed, "replay": f"file:{base}:{mutation}:{seed}",
            "options": options, "bytes": len(data)}
    worker.stage(f"gputok load {base} {mutation} {seed}")
    ours, ours_error = _load(ours_loader, path, options)
    if isinstance(ours_error, MemoryError):  # the process may be left short of memory: judge this case alone
        case["restart"] = True
        reference, reference_error = None, None
    else:
        worker.stage(f"reference load {base} {mutation} {seed}")
        reference, reference_error = _load(reference_loader, path, options)
    expected = None
    if reference is not None:
        try:
            expected = reference(PROBE)
        except BaseException as e:  # noqa: BLE001 (loads, then cannot encode: a file it does not take)
            reference_error = e
    case["reference"] = "loads" if reference_error is None else f"rejects ({_error(reference_error)[:160]})"
    if ours is None:
        # The message names what is wrong: the file, or the odd option (a tiktoken pattern) given with it.
        named = [path.name] + [repr(v) for v in options.values()]
        clean = isinstance(ours_error, ALLOWED_ERRORS) and any(n in str(ours_error) for n in named)
        case["verdict"] = "rejected" if clean else "unclean-error"
        case["gputok"] = _error(ours_error)
        if not clean:
            case["why"] = ("the message does not name the file (or the bad option)" if isinstance(ours_error, ALLOWED_ERRORS) else
                           f"{type(ours_error).__name__} is not a ValueError")
        return case
    case["gputok"] = "loads"
    if reference_error is not None:
        return dict(case, verdict="silently-loaded", why="the reference rejects the file")
    worker.stage(f"gputok probe {base} {mutation} {seed}")
    try:
        got = ours(PROBE)
    except BaseException as e:  # noqa: BLE001
        return dict(case, verdict="silently-loaded", why=f"loads, then encode raises {_error(e)}")
    wrong = [(t, g[:30], e[:30]) for t, g, e in zip(PROBE, got, expected) if g != e]
    if wrong:
        return dict(case, verdict="silently-loaded", why=f"{len(wrong)} probe texts encode otherwise", example=wrong[0])
    if not any(got[i] for i, t in enumerate(PROBE) if t.strip()):
        return dict(case, verdict="silently-loaded", why="encodes every probe text to nothing")
    if hasattr(reference, "decode"):
        wrong = [(e[:20], ours.decode(e), reference.decode(e)) for e in expected if ours.decode(e) != reference.decode(e)]
        if wrong:
            return dict(case, verdict="silently-loaded", why="decodes otherwise", example=wrong[0])
    return dict(case, verdict="agrees")


def _worker_main(conn, memory_bytes: int, threads: int, scratch: str) -> None:
    import resource

    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # The references print panics (tiktoken on duplicate ranks) to stderr; the verdicts hold what matters.
    os.environ["RUST_BACKTRACE"] = "0"
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
    import torch

    torch.set_num_threads(threads)
    worker = _Worker(conn, threads, scratch)
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            if job[0] == "text":
                out = text_job(worker, *job[1:])
            else:
                out = file_case(worker, *job[1:])
        except BaseException as e:  # noqa: BLE001 (the harness itself: reported, not hidden)
            out = {"harness_error": _error(e) + "\n" + traceback.format_exc()}
        conn.send(("done", out))


# ---- campaign side --------------------------------------------------------------------------

@dataclasses.dataclass
class _Slot:
    """A worker process, the job it runs and when it last reported."""
    process: multiprocessing.Process
    conn: object
    job: tuple | None = None
    stage: str = ""
    since: float = 0.0  # the last report
    started: float = 0.0  # the job's start


class Campaign:
    def __init__(self, *, seed: int = 0, families: list[str] | None = None, bases: list[str] | None = None,
                 hang_seconds: float = 60.0, memory_gb: float = 4.0, workers: int = 1, threads: int = 1,
                 file_share: float = 0.25, verbose: bool = True):
        self.rng = random.Random(seed)
        self.seed = seed
        self.families = families or list(_oracles.FAMILIES)
        self.bases = bases or list(_fuzz_files.BASES)
        self.hang_seconds, self.memory_bytes, self.threads = hang_seconds, int(memory_gb * 2**30), threads
        self.file_share, self.verbose = file_share, verbose
        self.context = multiprocessing.get_context("spawn")
        self.scratch = tempfile.TemporaryDirectory(prefix="gputok-fuzz-")  # the malformed files, removed at close
        self.slots = [self._start() for _ in range(workers)]
        self.text_stats = defaultdict(Counter)  # family -> counts
        self.file_stats = defaultdict(Counter)  # (format, mutation) -> counts
        self.findings: list[dict] = []
        self.harness_errors: list[str] = []
        self.seconds = Counter()  # 'text' / 'file' -> worker seconds
        self.jobs = 0
        self._file_cases = self._file_case_order()
        self.queue: list[tuple] | None = None  # fixed jobs (run_jobs) instead of random ones

    def run_jobs(self, jobs: list[tuple], *, seconds: float = 3600) -> dict:
        """Run exactly these jobs (``("text", family, kind, seed)`` or ``("file", base, mutation, seed)``)."""
        self.queue = list(jobs)
        return self.run(seconds=seconds)

    def _start(self) -> _Slot:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_worker_main, args=(child, self.memory_bytes, self.threads, self.scratch.name),
                                          daemon=True)
        process.start()
        child.close()
        return _Slot(process, parent)

    def _file_case_order(self):
        """Every (base, mutation) in turn, so that each mutation is tried about equally often."""
        pairs = [(b, m) for b in self.bases for m in _fuzz_files.mutations_of(b)]
        number = 0
        while True:
            self.rng.shuffle(pairs)
            for base, mutation in pairs:
                number += 1
                yield ("file", base, mutation, self.seed * 1_000_003 + number)

    def _next_job(self, want_text: bool, want_files: bool) -> tuple | None:
        if self.queue is not None:
            return self.queue.pop(0) if self.queue else None
        self.jobs += 1
        text_time, file_time = self.seconds["text"], self.seconds["file"]
        files_turn = want_files and (not want_text or file_time <= self.file_share * (text_time + file_time))
        if files_turn:
            return next(self._file_cases)
        family = self.families[self.jobs % len(self.families)]
        kind = self.rng.choices(list(_fuzz_text.JOB_WEIGHTS), weights=list(_fuzz_text.JOB_WEIGHTS.values()))[0]
        return ("text", family, kind, self.seed * 1_000_003 + self.jobs)

    def strings(self) -> int:
        return sum(s["strings"] for s in self.text_stats.values())

    def files(self) -> int:
        return sum(s["files"] for s in self.file_stats.values())

    def run(self, *, seconds: float, strings: int | None = None, files: int | None = None) -> dict:
        """Run jobs until ``seconds`` pass, or both targets are met (a target of None: time alone)."""
        start = time.monotonic()
        deadline = start + seconds
        last_print = start
        try:
            while True:
                now = time.monotonic()
                want_text = strings is None or self.strings() < strings
                want_files = files is None or self.files() < files
                stop = now >= deadline or not (want_text or want_files)
                for slot in self.slots:
                    job = None if stop or slot.job is not None else self._next_job(want_text, want_files)
                    if job is not None:
                        slot.job, slot.stage, slot.since, slot.started = job, "sent", now, now
                        slot.conn.send(job)
                busy = [s for s in self.slots if s.job is not None]
                if not busy:
                    break
                timeout = max(0.0, min(s.since + self.hang_seconds for s in busy) - time.monotonic())
                ready = wait([s.conn for s in busy], timeout=min(timeout, 5.0))
                for slot in busy:
                    if slot.conn in ready:
                        self._receive(slot)
                    elif time.monotonic() - slot.since > self.hang_seconds:
                        self._lost(slot, "hang", f"no progress for {self.hang_seconds:.0f} s in: {slot.stage}")
                if self.verbose and time.monotonic() - last_print > 30:
                    last_print = time.monotonic()
                    print(f"[{last_print - start:6.0f} s] {self.strings()} strings, {self.files()} files, "
                          f"{len(self.findings)} findings", flush=True)
        finally:
            self.close()
        return self.report(time.monotonic() - start)

    def _receive(self, slot: _Slot) -> None:
        try:
            kind, payload = slot.conn.recv()
        except (EOFError, OSError):
            slot.process.join(5)
            self._lost(slot, "crash", f"the worker died (exit code {slot.process.exitcode}) in: {slot.stage}")
            return
        slot.since = time.monotonic()
        if kind == "stage":
            slot.stage = payload
            return
        job, slot.job = slot.job, None
        self.seconds[job[0]] += time.monotonic() - slot.started
        if payload.pop("restart", False):  # a MemoryError: the next job gets a fresh worker
            self._replace(slot)
        if "harness_error" in payload:
            self.harness_errors.append(f"{job}: {payload['harness_error']}")
            if self.verbose:
                print(f"harness error in {job}:\n{payload['harness_error']}", file=sys.stderr)
            return
        if job[0] == "text":
            stats = self.text_stats[job[1]]
            for key in ("strings", "chars", "mismatches", "crashes", "reference_errors"):
                stats[key] += payload[key]
            self.findings += payload["findings"]
        else:
            stats = self.file_stats[(_fuzz_files.BASES[job[1]][0], job[2])]
            stats["files"] += 1
            stats[payload["verdict"]] += 1
            if payload["verdict"] not in ("rejected", "agrees"):
                self.findings.append(dict(payload, type=payload["verdict"], format=_fuzz_files.BASES[job[1]][0]))

    def _lost(self, slot: _Slot, what: str, detail: str) -> None:
        """The worker hung or died: count it against the job, and start a new worker."""
        job = slot.job
        self.seconds[job[0]] += time.monotonic() - slot.started
        found = {"type": what, "replay": ":".join(map(str, job)), "detail": detail}
        if job[0] == "text":
            family, kind, seed = job[1:]
            stats = self.text_stats[family]
            stats["strings"] += sum(map(len, _fuzz_text.job_batches(kind, seed)))
            stats[what + "es" if what == "crash" else what + "s"] += 1
            found["family"] = family
        else:
            stats = self.file_stats[(_fuzz_files.BASES[job[1]][0], job[2])]
            stats["files"] += 1
            stats[what] += 1
            found.update(format=_fuzz_files.BASES[job[1]][0], base=job[1], mutation=job[2], seed=job[3])
        self.findings.append(found)
        if self.verbose:
            print(f"{what}: {found['replay']}: {detail}", file=sys.stderr, flush=True)
        self._replace(slot)

    def _replace(self, slot: _Slot) -> None:
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join(10)
        slot.conn.close()
        replacement = self._start()
        slot.process, slot.conn, slot.job, slot.stage = replacement.process, replacement.conn, None, ""

    def close(self) -> None:
        for slot in self.slots:
            if slot.job is None and slot.process.is_alive():
                try:
                    slot.conn.send(None)
                except OSError:
                    pass
            slot.process.join(5)
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(5)
        self.scratch.cleanup()

    def report(self, elapsed: float) -> dict:
        text_rows = [{"family": f, **dict(self.text_stats[f])} for f in self.families if f in self.text_stats]
        file_rows = [{"format": fmt, "mutation": m, **dict(c)} for (fmt, m), c in sorted(self.file_stats.items())]
        failures = Counter(f["type"] for f in self.findings)
        return {"seed": self.seed, "seconds": elapsed, "strings": self.strings(), "files": self.files(),
                "failures": dict(failures), "harness_errors": self.harness_errors,
                "text": text_rows, "malformed_files": file_rows, "findings": self.findings}


def ci_jobs(seed: int = 22, *, long_families=("cl100k-tiktoken", "bert-json", "sp-test-unigram")) -> list[tuple]:
    """The CI profile (tests/test_fuzz.py): every family at every batch size once, a long line for
    a few, and every mutation of every base file once; the same jobs for the same seed."""
    jobs = [("text", family, kind, seed * 1000 + number)
            for number, family in enumerate(_oracles.FAMILIES)
            for kind in ("batch1000", "batch64", "batch7", "single")]
    jobs += [("text", family, "long", seed) for family in long_families]
    jobs += [("file", base, mutation, seed * 1000 + number)
             for number, base in enumerate(_fuzz_files.BASES) for mutation in _fuzz_files.mutations_of(base)]
    return jobs


def summarize(findings: list[dict], limit: int = 40) -> str:
    """One line per finding, deduplicated: family or file mutation, what, and a short repro."""
    lines = []
    for f in findings:
        if "family" in f:
            text = f.get("shrunk", "")
            lines.append(f"{f['type']} {f['family']} (--replay {f['replay']}): "
                         f"{ascii(text[:60])}{'...' if len(text) > 60 else ''} ({len(text)} chars) {f.get('detail', '')[:100]}")
        else:
            lines.append(f"{f['type']} {f['format']} {f['mutation']} (--replay {f['replay']}): "
                         f"{f.get('why', '')} {f.get('gputok', f.get('detail', ''))[:100]}")
    unique = list(dict.fromkeys(line.split(" (--replay")[0] + line.split(")", 1)[-1][:60] for line in lines))
    return "\n".join(lines[:limit]) + (f"\n... {len(lines) - limit} more" if len(lines) > limit else "") + \
        f"\n({len(lines)} findings, {len(unique)} distinct)"


# ---- report ------------------------------------------------------------------------------------

FILE_FAILURES = ("unclean-error", "hang", "crash", "silently-loaded")


def print_tables(report: dict) -> None:
    print(f"\nfuzz campaign, seed {report['seed']}, {report['seconds']:.0f} s: {report['strings']} strings, "
          f"{report['files']} malformed files")
    header = f"{'family':<18} {'strings':>9} {'MB':>7} {'mismatch':>9} {'crashes':>8} {'hangs':>6} {'ref-err':>8}"
    print(header + "\n" + "-" * len(header))
    for row in report["text"]:
        print(f"{row['family']:<18} {row.get('strings', 0):>9} {row.get('chars', 0) / 1e6:>7.1f} "
              f"{row.get('mismatches', 0):>9} {row.get('crashes', 0):>8} {row.get('hangs', 0):>6} "
              f"{row.get('reference_errors', 0):>8}")
    header = (f"{'format':<15} {'mutation':<26} {'files':>6} {'reject':>7} {'agree':>6} {'unclean':>8} {'crash':>6} "
              f"{'hang':>5} {'silent':>7}")
    print("\n" + header + "\n" + "-" * len(header))
    for row in report["malformed_files"]:
        print(f"{row['format']:<15} {row['mutation']:<26} {row.get('files', 0):>6} {row.get('rejected', 0):>7} "
              f"{row.get('agrees', 0):>6} {row.get('unclean-error', 0):>8} {row.get('crash', 0):>6} "
              f"{row.get('hang', 0):>5} {row.get('silently-loaded', 0):>7}")
    totals = Counter()
    for row in report["text"]:
        totals.update({k: row.get(k, 0) for k in ("mismatches", "crashes", "hangs")})
    for row in report["malformed_files"]:
        totals.update({"file " + k: row.get(k, 0) for k in FILE_FAILURES})
    print("\ntotals: " + ", ".join(f"{k} {v}" for k, v in totals.items()) + f"; harness errors {len(report['harness_errors'])}")


def replay(spec: str) -> int:
    """Run one job again in this process and print what differs: ``text:FAMILY:KIND:SEED`` or
    ``file:BASE:MUTATION:SEED``."""
    what, *rest = spec.split(":")

    class _Here(_Worker):
        def stage(self, what):
            print("  stage:", what)

    with tempfile.TemporaryDirectory(prefix="gputok-fuzz-") as scratch:
        worker = _Here(None, 1, scratch)
        if what == "text":
            family, kind, seed = rest
            out = text_job(worker, family, kind, int(seed))
        else:
            base, mutation, seed = rest
            out = file_case(worker, base, mutation, int(seed))
    print(json.dumps(out, indent=2, ensure_ascii=True, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="wall-clock budget (default 3)")
    parser.add_argument("--strings", type=int, default=None, help="stop the text fuzz after this many strings")
    parser.add_argument("--files", type=int, default=None, help="stop the file fuzz after this many malformed files")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", nargs="+", choices=sorted(_oracles.FAMILIES), default=None)
    parser.add_argument("--bases", nargs="+", choices=sorted(_fuzz_files.BASES), default=None,
                        help="the real files the malformed ones are made from (default all)")
    parser.add_argument("--file-share", type=float, default=0.25, help="share of worker time on malformed files")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="torch/rayon threads per worker (default 1)")
    parser.add_argument("--hang-seconds", type=float, default=60.0, help="a stage longer than this is a hang")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="address-space cap per worker (RLIMIT_AS)")
    parser.add_argument("--json", default="bench-results/fuzz.json")
    parser.add_argument("--replay", help="text:FAMILY:KIND:SEED or file:BASE:MUTATION:SEED; run it here and print it")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay)
    campaign = Campaign(seed=args.seed, families=args.families, bases=args.bases, hang_seconds=args.hang_seconds,
                        memory_gb=args.memory_gb, workers=args.workers, threads=args.threads,
                        file_share=args.file_share)
    report = campaign.run(seconds=args.minutes * 60, strings=args.strings, files=args.files)
    print_tables(report)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1, ensure_ascii=True, default=str))
    print(f"wrote {args.json} ({len(report['findings'])} findings)")
    return 1 if report["findings"] or report["harness_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
