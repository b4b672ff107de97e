"""The kernels, shipped as ``gputok.kernels``: Triton for CUDA tensors, numba for CPU tensors.

Triton: each file holds one op: a private ``@triton.jit`` kernel, its launcher ``<op>_triton`` and, in its
docstring, the name of the torch twin it must equal. The tests compare each kernel with its twin
under ``TRITON_INTERPRET=1``, compile the launches of small real workloads for sm_75, sm_80 and
sm_90 (``tests/test_kernels_compile.py``: the interpreter accepts code the compiler refuses, such as a
module global that is not a ``tl.constexpr``), and, on a CUDA machine, run them on the GPU
(``tests/test_cuda.py``).

CPU kernels are numba functions decorated with ``_numba.kernel`` (``@njit(nogil=True,
cache=True)``, cached under gputok's cache dir), in files of their own that import numba, not
triton: ``<op>_numba.py`` beside the Triton ``<op>.py`` of the same contract, each with its
contract and its reference in the docstring. A kernel is sequential over its rows; a batch's
chunks run on Python threads at once (``gputok._cpu_threads``), which nogil lets run in parallel.
By stage: ``ingest_numba``; ``normalize_numba``, ``charsmap_numba``, ``sentencepiece_whitespace``;
``word_split_numba``, ``regex_split_numba``, ``user_pieces_numba``; ``word_cache_numba``; ``wordpiece_match_numba``,
``bpe_symbols_numba`` + ``bpe_heap``, ``unigram_sentence``, ``unigram_words_numba``,
``unigram_finish_numba``, ``unigram_sample_numba``, ``unigram_nbest_numba`` (sharing
``unigram_trie_numba``); ``scatter_numba``; ``postprocess_numba``; ``decode_numba``; training:
``count_words_numba``, ``train_bpe_numba``, ``train_unigram_numba``; vocabulary extension:
``extend_savings_numba``; a whole BERT-style encode call in one CPU kernel: ``wordpiece_texts_numba``.
Only the CPU side of most of these exists yet: CUDA runs the Triton ops here plus the torch twins,
except where ``gputok.cuda_pipeline`` runs a whole call as Triton kernels (BERT): ``normalize``,
``word_split``, ``wordpiece_match`` (``wordpiece_encode_triton``) and ``postprocess``, the twins of
``normalize_numba``, ``word_split_numba``, ``wordpiece_match_numba`` and ``postprocess_numba``
(``tests/test_kernels_pipeline.py`` compares them); and cl100k-style byte-level BPE: ``regex_split``
and ``bpe_words``, the twins of ``regex_split_numba`` and ``bpe_symbols_numba`` + ``bpe_heap``
(``tests/test_kernels_bpe_pipeline.py``).
"""
