#!/usr/bin/env bash
# gputok on a lent GPU machine (the `device` tool): one prepared run, every step time-boxed, every
# log under $OUT. The machine has no network: the assets travel as .gpu/assets.tar.xz (an
# ignored folder named in `carry`), packed from the cache dir here:
#   tar cJf .gpu/assets.tar.xz -C ~/.cache/gputok vocab/{bert-vocab,bert-tokenizer-json,cl100k-tiktoken,\
#     gpt2-tiktoken,mistral-sp-model,sp-test-model} corpus/english-20MB.txt corpus/parity.txt \
#     unigram-tests/unigram-8000-unk-2MB.model
# Steps: versions; warm the numba, Triton and table caches (one process per family, in parallel);
# tests/test_cuda.py; `gputok bench --device cuda` for every family against the CPU anchors.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0 GPUTOK_CACHE=/tmp/gputok-cache PYTHONPATH=$PWD
[ -e gputok/kernels ] || ln -s ../kernels gputok/kernels  # what the editable install maps
mkdir -p "$GPUTOK_CACHE" && tar xJf .gpu/assets.tar.xz -C "$GPUTOK_CACHE"
MB=${MB:-10}; PASSES=${PASSES:-2}; TEST_S=${TEST_S:-150}; BENCH_S=${BENCH_S:-330}
{ nvidia-smi -L; nproc; python3 -c "import sys, torch, triton, numba, tokenizers, sentencepiece, tiktoken
print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'numba', numba.__version__,
      'tokenizers', tokenizers.__version__, 'sentencepiece', sentencepiece.__version__, 'tiktoken', tiktoken.__version__,
      torch.cuda.get_device_name())"; } 2>&1 | tee "$OUT/versions.txt"
start=$SECONDS
for family in bert cl100k unigram mistral; do
  timeout 120 python3 -c "
import sys, time, torch
from gputok import bench
t = time.perf_counter(); tok = bench.make_tokenizer('$family')
tok(['warm up'] * 4, padding=True); tok(['warm up the tables ' * 2000] * 4, device='cuda', padding=True)
torch.cuda.synchronize(); print('$family warm in', round(time.perf_counter() - t, 1), 's')" &
done 2>&1 | tee "$OUT/warm.txt"; wait
echo "warm-up: $((SECONDS - start)) s" | tee -a "$OUT/warm.txt"
timeout "$TEST_S" python3 -m pytest -q -p no:cacheprovider -rA tests/test_cuda.py "tests/test_sentencepiece_options.py::test_user_pieces_written_in_the_text_on_cuda" 2>&1 | tee "$OUT/test_cuda.txt" | tail -25
echo "tests: $((SECONDS - start)) s"
timeout "$BENCH_S" python3 -m gputok bench --tokenizer all --device cuda --threads "$(nproc)" \
  --batch-sizes 32 1024 65536 --megabytes "$MB" --passes "$PASSES" --json "$OUT/bench_cuda.json" 2>&1 | tee "$OUT/bench.txt"
echo "total: $((SECONDS - start)) s"
