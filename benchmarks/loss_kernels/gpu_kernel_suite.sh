#!/usr/bin/env bash
# The fused AS-Softmax kernel on a GPU (issue 45), most wanted first, each step under its own
# time limit and none stopping the next:
#   1. the card, the driver, torch's and triton's versions;
#   2. correctness: pytest -m gpu on the Triton and torch AS-Softmax tests (bf16 included);
#   3. the profile: kernels and device time of one forward+backward (profile_loss.py);
#   4. the loss benchmark, bf16 then float32 (loss_overhead.py: torch AS, triton AS,
#      torch.compile, cross-entropy, the memory floor).
# Usage: benchmarks/loss_kernels/gpu_kernel_suite.sh OUT_DIR [SECONDS]
#   OUT_DIR gets log.txt, versions.txt, pytest_gpu.xml and the JSON reports; SECONDS (default 370)
#   bounds the whole run, its last 15 s kept for the end: give the device call a minute more.
#   Needs no data, backbone or network: torch and triton (the GPU image's) and this checkout.
#   GPU_SUITE_SCALE=tiny runs every step on the CPU at toy sizes (triton under its interpreter,
#   the CUDA-only parts skipped with a line), to check this script without a GPU.
set -uo pipefail
py=${PYTHON:-python3}  # a lent GPU machine has python3 (the one with torch) and no python
if (($# < 1)) || { (($# > 1)) && ! [[ $2 =~ ^[0-9]+$ ]]; }; then
    echo "usage: $0 OUT_DIR [SECONDS] (SECONDS a whole number; got: $*)" >&2
    exit 2
fi
out=$1 budget=${2:-370}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # the steps run from the checkout's root
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"  # where python -m benchmarks.<study>.<script> finds the benchmarks
export PYTHONUNBUFFERED=1
log="$out/log.txt" start=$SECONDS reserve=15
# shellcheck source=benchmarks/common/steps.sh
source "$root/benchmarks/common/steps.sh"  # say, left, step

if [[ ${GPU_SUITE_SCALE:-full} == tiny ]]; then
    bench=(env TRITON_INTERPRET=1 "$py")  # the pytest step's CPU test must run without it
    device=cpu marks="not gpu" tests=("$root/tests/test_as_softmax_triton.py")
    sizes=256x5,128x151,16x5201 loss_extra=(--rounds 2 --block 2 --no-compile) steps=2
    dtypes=(float32)  # the interpreter lacks bf16
    say "tiny scale on the CPU: triton interpreted, CUDA-only parts (gpu tests, kernel counts) skipped"
else
    bench=("$py") device=cuda marks=gpu sizes=16384x5,16384x151,8192x5201 loss_extra=() steps=5
    dtypes=(bfloat16 float32)
    tests=("$root/tests/test_as_softmax_triton.py" "$root/tests/test_as_softmax.py")
fi


{
    date -u
    nvidia-smi 2>&1 || echo "nvidia-smi: not available"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
    "$py" -c 'import platform, torch; print("python", platform.python_version(), "torch",
        torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
        torch.cuda.get_device_name() if torch.cuda.is_available() else "")' 2>&1
    "$py" -c 'import triton; print("triton", triton.__version__)' 2>&1
} >"$out/versions.txt"
tee -a "$log" <"$out/versions.txt"

step 120 "pytest -m $marks" "$py" -m pytest -q -p no:cacheprovider -m "$marks" \
    --junitxml "$out/pytest_gpu.xml" "${tests[@]}"
for dtype in "${dtypes[@]}"; do
    step 25 "profile $dtype" "${bench[@]}" -m benchmarks.loss_kernels.profile_loss --device "$device" --dtype "$dtype" \
        --sizes "$sizes" --steps "$steps" --json "$out/profile_loss_${dtype}.json"
done
for dtype in "${dtypes[@]}"; do
    step 90 "loss $dtype" "${bench[@]}" -m benchmarks.loss_kernels.loss_overhead --device "$device" --dtype "$dtype" \
        --sizes "$sizes" "${loss_extra[@]}" --json "$out/loss_overhead_${dtype}.json"
done
say "done"
