"""``gputok compile`` (``gputok/precompile.py``): the kernels a tokenizer's calls need, compiled
into the cache ahead of use, in processes of their own; a fresh process then compiles nothing for
those calls. No timings: ``python -m gputok compile`` prints them."""

import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import gputok
from gputok import precompile

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", ",", ".", "!", "a", "##s", "##t", "中",
         "文", "é", "this", "is", "first", "batch"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Two vocab files and a numba cache that ``gputok compile`` filled from empty for the first,
    with the command's output."""
    root = tmp_path_factory.mktemp("precompile")
    vocabs = [root / "vocab.txt", root / "other-vocab.txt"]
    for path in vocabs:
        path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(root / "cache"))
    return vocabs, env, _cli(["--tokenizer", str(vocabs[0]), "--jobs", "1"], env)


def _cli(args: list[str], env: dict) -> str:
    done = subprocess.run([sys.executable, "-m", "gputok", "compile", *args], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return done.stdout


RESULT_LINE = re.compile(r"^(.+): [\d.]+ s \([\d.]+ s CPU\), (\d+) kernels compiled$", re.M)


def _kernels_compiled(output: str, as_list: bool = False) -> dict[str, int] | list[tuple[str, int]]:
    found = [(name, int(count)) for name, count in RESULT_LINE.findall(output)]
    return found if as_list else dict(found)


def test_a_fresh_process_compiles_nothing_for_the_calls_compiled_ahead(compiled):
    vocabs, env, output = compiled
    assert _kernels_compiled(output)[str(vocabs[0])] > 0  # the cache started empty
    assert re.search(r"^compiled in [\d.]+ s$", output, re.M)
    _assert_nothing_compiles(vocabs[0], env)


def test_a_tokenizer_split_between_two_jobs_compiles_every_call(tmp_path):
    # two jobs for one tokenizer: its batch sizes split between them (SPLIT_BATCH_SIZES), reported once
    assert sorted(size for sizes in precompile.SPLIT_BATCH_SIZES for size in sizes) == sorted(
        precompile.WARM_BATCH_SIZES)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    found = _kernels_compiled(_cli(["--tokenizer", str(vocab), "--jobs", "2"], env), as_list=True)
    assert len(found) == 1 and found[0][0] == str(vocab) and found[0][1] > 0
    _assert_nothing_compiles(vocab, env)


def _assert_nothing_compiles(vocab, env: dict) -> None:
    """A fresh process on ``env``'s cache compiles no kernel for the warm-up calls or a user's."""
    code = f"""
        from gputok import precompile

        tok = precompile.load({str(vocab)!r})
        with precompile.compiled_kernels() as compiled:
            precompile.warm_calls(tok)
            # the same shapes as a user's calls reach them: default options, padded or ragged
            tok(["Hello, world!"] * 3, padding=True)
            tok(["hello world"] * 2000, padding=False)
        print([kernel.__name__ for kernel in compiled])
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=600, check=True)
    assert done.stdout.strip() == "[]"


def test_jobs_run_each_tokenizer_once_in_processes_of_their_own(compiled):
    vocabs, env, _ = compiled
    output = _cli(["--tokenizer", str(vocabs[0]), str(vocabs[1]), str(vocabs[0]), "--jobs", "2"], env)
    # each file once; both load what the first run compiled (the kernels are the pipeline's, not the vocabulary's)
    assert sorted(_kernels_compiled(output, as_list=True)) == sorted([(str(vocabs[0]), 0), (str(vocabs[1]), 0)])


def test_a_tokenizer_that_fails_is_reported_and_the_others_compile(compiled, tmp_path):
    vocabs, env, _ = compiled
    bad = tmp_path / "vocab.json"  # a GPT-2 vocab.json without its merges: load_tokenizer refuses it
    bad.write_text('{"a": 0}', encoding="utf-8")
    # four jobs: each tokenizer split between two, the bad one failing in both (reported once)
    done = subprocess.run([sys.executable, "-m", "gputok", "compile", "--tokenizer", str(bad), str(vocabs[0]),
                           "--jobs", "4"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1
    assert f"{bad}: failed: gputok: {bad} has no \"model\"" in done.stderr
    assert _kernels_compiled(done.stdout) == {str(vocabs[0]): 0}
    assert done.stdout.rstrip().endswith(f"; failed: {bad}")


def test_a_torch_device_is_taken_as_its_name(tmp_path, monkeypatch):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB), encoding="utf-8")
    jobs = []
    monkeypatch.setattr(precompile, "_compile_one",
                        lambda job: jobs.append(job) or precompile.Compiled(job[0], 0, 0, 0))
    precompile.compile_kernels([str(tmp_path / "vocab.txt")], device=torch.device("cpu"), jobs=1)
    assert jobs == [(str(tmp_path / "vocab.txt"), "cpu", None, None)]


def test_bad_arguments_are_refused_before_any_work(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB), encoding="utf-8")
    with pytest.raises(ValueError, match="neither a gputok bench tokenizer"):
        precompile.compile_kernels([str(tmp_path / "vocab.txt"), str(tmp_path / "missing.json")])
    with pytest.raises(ValueError, match="no tokenizers"):
        gputok.compile_kernels([])
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device='cuda'"):
            gputok.compile_kernels([str(tmp_path / "vocab.txt")], device="cuda")
    for device in ("mps", "gpu", 99):  # 99: cuda:99, on a machine with or without CUDA
        with pytest.raises(ValueError, match=re.escape(f"device={device!r}")):
            gputok.compile_kernels([str(tmp_path / "vocab.txt")], device=device)
    for jobs in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="jobs="):
            precompile.compile_kernels([str(tmp_path / "vocab.txt")], jobs=jobs)
    done = subprocess.run([sys.executable, "-m", "gputok", "compile", "--tokenizer", "no-such-tokenizer"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "gputok compile: 'no-such-tokenizer' is neither" in done.stderr


def test_the_warm_up_reaches_every_cpu_path():
    # One text, one kernel call, parts and chunks (padded rows filled in ranges): the batch sizes
    # must keep reaching each path as their thresholds move.
    from gputok import _cpu_threads, tokenizer

    sizes = precompile.WARM_BATCH_SIZES
    chars = [sum(len(precompile.WARM_TEXTS[i % len(precompile.WARM_TEXTS)]) for i in range(n)) for n in sizes]
    assert sizes[0] == 1
    assert chars[1] < 2 * _cpu_threads.MIN_CHUNK_CHARS  # one call
    assert 2 * _cpu_threads.MIN_CHUNK_CHARS <= chars[2] <= tokenizer.PARTS_MAX_CHARS  # parts
    assert chars[3] > tokenizer.PARTS_MAX_CHARS and sizes[3] >= tokenizer.PADDED_IN_RANGES_FROM  # chunks, ranges


def test_a_tiktoken_file_takes_its_split_rule_from_pattern(tmp_path):
    import base64

    ranks = tmp_path / "ranks.tiktoken"  # a name that does not tell the split rule
    ranks.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    with pytest.raises(SystemExit, match="which split rule"):
        precompile.load(str(ranks))
    assert precompile.load(str(ranks), pattern="cl100k").pre_tokenizer is not None
    failed = precompile.compile_kernels([str(ranks)], jobs=1)[0]
    assert failed.error.startswith("gputok: which split rule does") and failed.kernels == 0


def _dies_on_its_file(job):
    """A job (run in a spawned process) whose process dies for a file named die.txt."""
    if job[0].endswith("die.txt"):
        os._exit(3)
    return precompile._compile_one(job)


def test_a_job_whose_process_dies_is_reported_and_the_call_returns(compiled, tmp_path, monkeypatch):
    vocabs, env, _ = compiled
    (tmp_path / "die.txt").write_text("\n".join(VOCAB), encoding="utf-8")
    monkeypatch.setenv("NUMBA_CACHE_DIR", env["NUMBA_CACHE_DIR"])
    monkeypatch.setattr(precompile, "_compile_one", _dies_on_its_file)
    results = precompile.compile_kernels([str(tmp_path / "die.txt"), str(vocabs[0])], jobs=2)
    assert [r.tokenizer for r in results] == [str(tmp_path / "die.txt"), str(vocabs[0])]
    assert results[0].error.startswith("not compiled: a job's process died")
    # the other job finished before the pool broke, or was cut short with it
    assert results[1].error is None or results[1].error.startswith("not compiled: a job's process died")


def test_the_default_tokenizers_are_the_benchs_four():
    from gputok import bench

    assert sorted(precompile.FAMILIES) == sorted(bench.ALL)


def test_prune_removes_the_other_kernel_sources_folders_only(tmp_path):
    from gputok.kernels import _numba

    numba_home = tmp_path / "home" / "numba"
    other, current = numba_home / "0123456789abcdef", numba_home / _numba._sources_hash()
    for folder, size in ((other, 1000), (current, 10)):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "kernel.nbc").write_bytes(b"x" * size)
    env = dict(os.environ, GPUTOK_CACHE=str(tmp_path / "home"))
    env.pop("NUMBA_CACHE_DIR", None)
    code = "from gputok import precompile; print(*precompile.prune_caches())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.split() == ["1", "1000"]
    assert not other.exists() and (current / "sub" / "kernel.nbc").exists()
    # a cache the user named is theirs
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "theirs")
    done = subprocess.run([sys.executable, "-m", "gputok", "compile", "--prune", "--tokenizer", "bert"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "NUMBA_CACHE_DIR is set: that cache is yours to prune" in done.stderr


def test_jobs_fork_only_where_it_is_safe():
    # a fresh process: pytest's may run threads (gputok's pool, from earlier tests)
    code = textwrap.dedent("""
        import threading, torch
        from gputok import precompile
        cpu = torch.device("cpu")
        print(precompile._start_method(cpu), precompile._start_method(torch.device("cuda")))
        threading.Thread(target=threading.Event().wait, args=(30,), daemon=True).start()
        print(precompile._start_method(cpu))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    expected = "fork spawn\nspawn" if sys.platform.startswith("linux") else "spawn spawn\nspawn"
    assert done.stdout.split("\n")[:2] == expected.split("\n")


def test_a_process_running_threads_spawns_its_jobs(compiled):
    # the spawn path end to end: a caller with another thread running (its jobs not forked) gets its
    # tokenizer compiled (from the fixture's cache: nothing left to compile) and a result per job
    vocabs, env, _ = compiled
    code = textwrap.dedent(f"""
        import threading
        from gputok import precompile
        threading.Thread(target=threading.Event().wait, args=(60,), daemon=True).start()
        assert precompile._start_method(__import__("torch").device("cpu")) == "spawn"
        done = precompile.compile_kernels([{str(vocabs[0])!r}], jobs=2)
        print(done[0].error, done[0].kernels)
    """)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "0"]
