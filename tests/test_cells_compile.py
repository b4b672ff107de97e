"""The post-processing kernels compile untruncated rows apart from truncated ones
(``kernels/cells_numba.py``: ``strategy`` None, packed options [n] against [1, n]), so that the
untruncated kernel, the one nearly every call runs, holds no truncation code (issue 17's cold
compile). No timings: ``benchmarks/cold_start.py`` measures them."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from gputok.kernels import cells_numba


def test_untruncated_cells_compile_without_the_truncation(tmp_path):
    # In a fresh process with an empty cache (from a warm one the kernel loads and nothing compiles):
    # which callees each options type compiled; the same cells as an untruncating truncation.
    code = """
        import json
        import numpy as np
        from gputok.kernels import cells_numba, postprocess_numba

        ids, offsets = np.arange(7, dtype=np.int64), np.array([0, 3, 3, 7], np.int64)
        item = np.array([-1, 0, -1], np.int64), np.array([101, 0, 102], np.int64), np.zeros(3, np.int64)
        options = (0, None, 0, *item, 0, 4, False, 0, True)
        untruncated = cells_numba.padded_cells_packed(ids, offsets, cells_numba.pack_padded(*options))[0]
        compiled = [len(postprocess_numba._rows_of.overloads), len(postprocess_numba._fill_padded.overloads)]
        # strategy 0 with a budget nothing exceeds: every row whole, through the row plan
        truncating = (100, 0, *options[2:])
        truncated = cells_numba.padded_cells_packed(ids, offsets, cells_numba.pack_padded(*truncating))[0]
        print(json.dumps([compiled, [len(postprocess_numba._rows_of.overloads)], untruncated.tolist(),
                          truncated.tolist()]))
    """
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          check=True, timeout=600)
    compiled, after, untruncated, truncated = json.loads(done.stdout.splitlines()[-1])
    assert compiled == [0, 0]  # the untruncated compile typed no truncation
    assert after == [1]
    assert untruncated == truncated
    assert np.array(untruncated).shape == (3, 3, 8)  # ids, mask, types; 3 rows of 6 padded to a multiple of 4


def test_untruncated_row_plans_compile_without_truncate_rows(tmp_path):
    # The large-batch and ragged post-processing kernels take strategy None where nothing is cut
    # (postprocess_numba._rows_of): no truncate_rows compiled for them, and the same rows, single
    # sequences and pairs, as a truncation that cuts nothing (strategy 0, a budget above every row).
    code = """
        import json
        import numpy as np
        from gputok.kernels import cells_numba, postprocess_numba as post

        a_ids, a_offsets = np.arange(7, dtype=np.int64), np.array([0, 3, 3, 7], np.int64)
        b_ids, b_offsets = np.arange(50, 55, dtype=np.int64), np.array([0, 2, 5, 5], np.int64)
        none, spans = np.zeros(0, np.int64), np.zeros((0, 2), np.int64)
        single = np.array([-1, 0, -1], np.int64), np.array([101, 0, 102], np.int64), np.zeros(3, np.int64)
        pair = np.array([-1, 0, -1, 1], np.int64), np.array([101, 0, 102, 0], np.int64), np.array([0, 0, 0, 1])

        def outputs(budget, strategy):
            got = []
            for (b, b_off, item) in ((none, none, single), (b_ids, b_offsets, pair)):
                head = (a_offsets, b_off, budget, strategy, 0, False)
                got.append(post.ragged_rows(*head, *item, a_ids, b, spans, spans, True, False))
                got.append(post.padded_rows(*head, *item, a_ids, b, spans, spans, 0, 0, False, 0, True, False))
                got.append(post.plan_padded(*head, item[0], 0, 0))
            got.append(cells_numba.ragged_cells(a_ids, a_offsets, budget, strategy, 0, *single, True))
            return [[x.tolist() if isinstance(x, np.ndarray) else x for x in out] for out in got]

        untruncated = outputs(0, None)
        compiled = len(post.truncate_rows.overloads)
        truncated = outputs(100, 0)
        print(json.dumps([compiled, len(post.truncate_rows.overloads), untruncated, truncated]))
    """
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          check=True, timeout=600)
    compiled, after, untruncated, truncated = json.loads(done.stdout.splitlines()[-1])
    assert compiled == 0 and after == 1
    assert untruncated == truncated
    assert untruncated[0][0] == [101, 0, 1, 2, 102, 101, 102, 101, 3, 4, 5, 6, 102]  # ragged ids, single rows


def test_packed_options_tell_truncation_by_their_shape():
    item = np.array([-1, 0], np.int64), np.array([101, 0], np.int64), np.zeros(2, np.int64)
    untruncated = cells_numba.pack_padded(0, None, 0, *item, 0, 0, False, 0, False)
    truncating = cells_numba.pack_padded(9, 1, 2, *item, 0, 0, False, 0, False)
    assert untruncated.ndim == 1 and untruncated[cells_numba.STRATEGY] == -1
    assert truncating.shape == (1, untruncated.size) and truncating[0, cells_numba.STRATEGY] == 1


def test_ragged_small_call_shares_the_parts_paths_compile(tmp_path):
    # A ragged small batch is the pipeline's encode_texts then ragged_cells, two kernel calls, not a
    # fused kernel of its own: after it, a batch on the parts path (encode_texts per part, then
    # ragged_cells) compiles none of the pipeline's kernels, and both give huggingface's ids.
    code = """
        import json
        import tokenizers
        from gputok import Tokenizer, assets, precompile, set_num_threads

        set_num_threads(2)
        tok = Tokenizer.from_file(assets.fetch("bert-tokenizer-json"))
        small = ["Hello world, this is a first batch.", "naïve café 中文"]
        large = [f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(2000)]

        def rows(out):  # a ragged output's rows
            ids, offsets = out["input_ids"].tolist(), out["row_offsets"].tolist()
            return [ids[a:b] for a, b in zip(offsets, offsets[1:])]

        first = rows(tok(small, padding=False))
        with precompile.compiled_kernels() as compiled:
            second = rows(tok(large, padding=False))
        oracle = tokenizers.Tokenizer.from_file(str(assets.fetch("bert-tokenizer-json")))
        oracle.no_padding()
        staged = [e.ids for e in oracle.encode_batch(small + large[:50])]
        modules = [kernel.__module__ for kernel in compiled]
        print(json.dumps([modules, first == staged[:2], second[:50] == staged[2:]]))
    """
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          check=True, timeout=600)
    compiled, small_same, large_same = json.loads(done.stdout.splitlines()[-1])
    assert not [module for module in compiled if module.endswith("wordpiece_texts_numba")], compiled
    assert small_same and large_same
