"""The one-call kernels' post-processing tail compiles untruncated rows apart from truncated ones
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


def test_packed_options_tell_truncation_by_their_shape():
    item = np.array([-1, 0], np.int64), np.array([101, 0], np.int64), np.zeros(2, np.int64)
    untruncated = cells_numba.pack_padded(0, None, 0, *item, 0, 0, False, 0, False)
    truncating = cells_numba.pack_padded(9, 1, 2, *item, 0, 0, False, 0, False)
    assert untruncated.ndim == 1 and untruncated[cells_numba.STRATEGY] == -1
    assert truncating.shape == (1, untruncated.size) and truncating[0, cells_numba.STRATEGY] == 1
