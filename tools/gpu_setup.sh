#!/usr/bin/env bash
# climnb on an NVIDIA GPU machine (Debian/Ubuntu, x86_64): set up tensorflow[and-cuda] and
# Horovod with NCCL, then run the model benchmark at full size.
#
#   1. the GPUs, from nvidia-smi: name, memory, driver, compute capability
#   2. system packages as tools/setup.sh installs them (apt-get, only as root)
#   3. a virtual environment ($VENV, default .venv-gpu) with `pip install -e .[gpu,dev]`:
#      tensorflow[and-cuda]==2.18.* brings CUDA 12, cuDNN 9 and NCCL 2 as pip wheels
#   4. a CUDA home and an NCCL home made of links into those wheels (or the system's CUDA
#      toolkit where nvcc is installed), so that Horovod's CUDA kernels compile with the same
#      CUDA major version TensorFlow runs with, and Horovod links the wheels' NCCL
#   5. Horovod 0.28.1 built with HOROVOD_GPU_OPERATIONS=NCCL (and MPI, Gloo) for the GPUs'
#      compute capabilities; `horovodrun --check-build` must list NCCL
#   6. benchmarks/bench_models.py --full: GEMM peaks (FP32, TF32, FP16, BF16) and one training
#      step of each paper network at 768 x 1152 x 16 in float32, mixed_float16 and
#      mixed_bfloat16, next to the paper's per-GPU rates (on the first GPU), and float32 with
#      Keras' unfused batch norm (climnb's fused one, cuDNN's on a GPU, is the default)
#   No XLA flags: climnb does not jit-compile its training step (XLA made CPU steps ~4x
#   slower: `bench_models.py --knobs`); on a GPU, try `--knobs` to see whether XLA pays there.
#
# Usage:
#   tools/gpu_setup.sh [--dry-run] [--skip-setup] [--skip-bench] [--nvidia-smi-output FILE]
#     --dry-run               print the GPU facts and every command, run none of them
#     --skip-setup            benchmark with the environment already made
#     --nvidia-smi-output F   read the GPU facts from F (the output of the nvidia-smi query
#                             below) instead of running nvidia-smi (for tests)
# Environment: VENV, PYTHON, CLIMNB_CACHE (wheel cache), OUT (report folder, default
#              gpu-bench), CLIMNB_SKIP_APT=1.
#
# Written for a GPU machine it has not been run on (the project's machines have no GPU); the
# dry run and the parsing are tested (tests/test_gpu_setup.py).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${VENV:-$ROOT/.venv-gpu}
CACHE=${CLIMNB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/climnb}
OUT=${OUT:-$ROOT/gpu-bench}
HOROVOD_VERSION=0.28.1
APT_PACKAGES=(build-essential cmake openmpi-bin libopenmpi-dev libhighwayhash-dev libfarmhash-dev)
QUERY=name,memory.total,driver_version,compute_cap

DRY=0 SETUP=1 BENCH=1 SMI_FILE=
while (($#)); do
    case $1 in
        --dry-run) DRY=1 ;;
        --skip-setup) SETUP=0 ;;
        --skip-bench) BENCH=0 ;;
        --nvidia-smi-output) SMI_FILE=$2; shift ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '[gpu-setup %4ds] %s\n' "$SECONDS" "$*"; }
die() { printf '[gpu-setup] ERROR: %s\n' "$*" >&2; exit 1; }
run() {  # print a command; run it unless this is a dry run
    printf '+ %s\n' "$*"
    ((DRY)) || "$@"
}

# --- 1. the GPUs ---------------------------------------------------------------------------
if [[ -n $SMI_FILE ]]; then
    smi=$(cat "$SMI_FILE")
elif command -v nvidia-smi >/dev/null; then
    smi=$(nvidia-smi --query-gpu=$QUERY --format=csv,noheader) \
        || die "nvidia-smi failed: is the NVIDIA driver loaded?"
else
    die "no nvidia-smi: this script needs an NVIDIA GPU with its driver installed
  (CPU machines: use tools/setup.sh)"
fi
# one line per GPU: "NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15, 9.0"
N_GPUS=0 CC_LIST=
while IFS=, read -r name memory driver cc; do
    [[ -z ${name// /} ]] && continue
    cc=${cc// /}
    [[ $cc =~ ^[0-9]+\.[0-9]+$ ]] || die "cannot read the compute capability '$cc' of '$name'
  from nvidia-smi (a driver older than 510 has no compute_cap field: set CC_LIST, e.g. 80)"
    say "GPU $N_GPUS: ${name# }, ${memory# }, driver ${driver# }, compute capability $cc"
    N_GPUS=$((N_GPUS + 1))
    cc=${cc/./}
    [[ ,$CC_LIST, == *,$cc,* ]] || CC_LIST=${CC_LIST:+$CC_LIST,}$cc
    major=${driver# }; major=${major%%.*}
    ((major >= 525)) || die "driver ${driver# } is too old for CUDA 12 (TensorFlow 2.18 needs >= 525)"
    [[ ${cc:0:1} -ge 6 || ${#cc} -ge 3 ]] || die "compute capability $cc: TensorFlow 2.18 needs >= 6.0"
done <<< "$smi"
((N_GPUS)) || die "nvidia-smi lists no GPU"
CC_LIST=${CC_LIST_OVERRIDE:-$CC_LIST}
say "$N_GPUS GPU(s); Horovod's CUDA kernels for compute capabilities $CC_LIST"

PY=$VENV/bin/python
SITE=  # site-packages of the venv, once it exists
site_packages() { "$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# --- 2.-5. set-up ---------------------------------------------------------------------------
if ((SETUP)); then
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        if [[ ${CLIMNB_SKIP_APT:-0} != 1 && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
            run apt-get update -qq
            run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
        else
            say "not root (or CLIMNB_SKIP_APT=1): assuming the system provides ${missing[*]}"
        fi
    fi

    PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3 || echo python3)}
    [[ -x $PY ]] || run "$PYTHON" -m venv "$VENV"
    run "$PY" -m pip install -q --upgrade pip setuptools wheel
    # [gpu] is tensorflow[and-cuda]==2.18.* instead of tensorflow-cpu: never both in one venv
    run "$PY" -m pip install -q -e ".[gpu,dev]"
    run "$PY" -m pip install -q cmake

    # CUDA home: the system toolkit where there is one, else links into the pip wheels
    if ((DRY)); then
        SITE='$SITE'  # shown literally in the plan
    else
        SITE=$(site_packages)
    fi
    NV=$SITE/nvidia
    # TensorFlow 2.18's wheels are CUDA 12: a system toolkit of another major version is no use
    CUDA_HOME_=
    nvcc_home=$(command -v nvcc >/dev/null && dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")" || true)
    for home in ${CUDA_HOME:-} /usr/local/cuda $nvcc_home; do
        release=$("$home/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p' || true)
        if [[ -f $home/include/cuda_runtime.h && $release == 12 ]]; then
            CUDA_HOME_=$home
            say "CUDA 12 toolkit in $home"
            break
        elif [[ -n $release ]]; then
            say "ignoring the CUDA $release toolkit in $home (TensorFlow 2.18 runs on CUDA 12)"
        fi
    done
    if [[ -z $CUDA_HOME_ ]]; then
        CUDA_HOME_=$VENV/cuda-home
        say "no CUDA toolkit on the system: making $CUDA_HOME_ from the pip wheels in $NV"
        if ! ((DRY)); then
            for tool in nvcc ptxas fatbinary cudafe++; do
                [[ -x $NV/cuda_nvcc/bin/$tool ]] || die "$NV/cuda_nvcc/bin has no $tool: install the
  CUDA 12 toolkit (https://developer.nvidia.com/cuda-downloads, package cuda-toolkit-12-5)
  and run again with CUDA_HOME=/usr/local/cuda"
            done
        fi
        run mkdir -p "$CUDA_HOME_/include" "$CUDA_HOME_/lib64"
        run ln -sfn "$NV/cuda_nvcc/bin" "$CUDA_HOME_/bin"
        run ln -sfn "$NV/cuda_nvcc/nvvm" "$CUDA_HOME_/nvvm"
        for inc in "$NV/cuda_nvcc/include" "$NV/cuda_runtime/include" "$NV/cuda_cccl/include"; do
            if ((DRY)) || [[ -d $inc ]]; then
                run find "$inc" -mindepth 1 -maxdepth 1 -exec ln -sfn {} "$CUDA_HOME_/include/" ';'
            fi
        done
        run find "$NV/cuda_runtime/lib" -name 'libcudart*' -exec ln -sfn {} "$CUDA_HOME_/lib64/" ';'
        run ln -sfn libcudart.so.12 "$CUDA_HOME_/lib64/libcudart.so"
    fi
    # NCCL home: the wheel ships lib/libnccl.so.2 and include/nccl.h; CMake looks for libnccl.so
    NCCL_HOME_=$VENV/nccl-home
    run mkdir -p "$NCCL_HOME_/lib"
    run ln -sfn "$NV/nccl/include" "$NCCL_HOME_/include"
    run ln -sfn "$NV/nccl/lib/libnccl.so.2" "$NCCL_HOME_/lib/libnccl.so.2"
    run ln -sfn libnccl.so.2 "$NCCL_HOME_/lib/libnccl.so"

    if ((DRY)); then tf_version='$TF_VERSION'; else
        tf_version=$("$PY" -c 'import importlib.metadata as m; print(m.version("tensorflow"))')
    fi
    wheel_dir=$CACHE/wheels/horovod-$HOROVOD_VERSION-tf$tf_version-cuda-cc$CC_LIST
    if ! ((DRY)) && compgen -G "$wheel_dir/horovod-*.whl" >/dev/null; then
        say "Horovod wheel cached in $wheel_dir"
    else
        say "building Horovod $HOROVOD_VERSION with NCCL (10-20 minutes)"
        run env PATH="$VENV/bin:$CUDA_HOME_/bin:$PATH" \
            HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
            HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
            HOROVOD_GPU=CUDA HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED \
            HOROVOD_CUDA_HOME="$CUDA_HOME_" HOROVOD_NCCL_HOME="$NCCL_HOME_" \
            HOROVOD_NCCL_INCLUDE="$NCCL_HOME_/include" HOROVOD_NCCL_LIB="$NCCL_HOME_/lib" \
            HOROVOD_BUILD_CUDA_CC_LIST="$CC_LIST" \
            "$PY" -m pip wheel -q --no-deps --no-cache-dir --no-build-isolation \
            -w "$wheel_dir" "horovod==$HOROVOD_VERSION"
    fi
    run "$PY" -m pip install -q --no-deps --force-reinstall "$wheel_dir"/horovod-$HOROVOD_VERSION-*.whl
fi

# --- 6. the benchmark -----------------------------------------------------------------------
if ((BENCH)); then
    run mkdir -p "$OUT"
    # the NCCL and CUDA runtime libraries of the wheels, for Horovod's library
    if ((DRY)); then SITE='$SITE'; else SITE=$(site_packages); fi
    export LD_LIBRARY_PATH=$SITE/nvidia/nccl/lib:$SITE/nvidia/cuda_runtime/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    if ! ((DRY)); then
        check=$("$VENV/bin/horovodrun" --check-build)
        echo "$check"
        grep -q "\[X\] NCCL" <<< "$check" || die "Horovod was built without NCCL (see above)"
        "$PY" -c 'import tensorflow as tf; g = tf.config.list_physical_devices("GPU"); print(g); assert g, "TensorFlow sees no GPU"'
    fi
    say "model benchmark at full size -> $OUT/bench_models.txt"
    if ((DRY)); then
        run "$PY" benchmarks/bench_models.py --full --precision all
    else
        run "$PY" benchmarks/bench_models.py --full --precision all | tee "$OUT/bench_models.txt"
    fi
fi
say "done"
