# Sourced, not run: makes libcublasLt.so.13 (which CUDA-enabled gpufrac binaries link
# dynamically) loadable by adding its directory to LD_LIBRARY_PATH when ldconfig does not know it.
# Looks in /usr/local/cuda and in the pip nvidia-* wheels of python3 (torch's machines).
if ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt.so.13'; then
  for cuda_libs_dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 - 2>/dev/null <<'PY'
import glob, os, site
for base in site.getsitepackages():
    for lib in glob.glob(os.path.join(base, "nvidia", "*", "lib")):
        print(lib)
PY
); do
    if ls "$cuda_libs_dir"/libcublasLt.so.13* >/dev/null 2>&1; then
      export LD_LIBRARY_PATH="$cuda_libs_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "cuBLAS from $cuda_libs_dir" >&2
      break
    fi
  done
  unset cuda_libs_dir
fi
