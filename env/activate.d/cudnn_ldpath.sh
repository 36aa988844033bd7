# shellcheck shell=sh
# ShopSimRL cuDNN hook (M4), sourced by `conda activate` from the env's
# etc/conda/activate.d/. Installed only by `make install-hooks`.
#
# Puts pip's cuDNN (<site-packages>/nvidia/cudnn/lib) first on LD_LIBRARY_PATH, so the system
# cuDNN (9.8 on the AutoDL image) is not picked up, and sets CUDNN_PATH, which TransformerEngine
# searches before LD_LIBRARY_PATH. The previous values are saved; deactivate.d/cudnn_ldpath.sh
# restores them. Hooks run only on `conda activate`: launching the env's python directly skips
# this, which is why bin/ scripts always activate.
_shopsimrl_cudnn=""
for _shopsimrl_d in "${CONDA_PREFIX:-/nonexistent}"/lib/python3*/site-packages/nvidia/cudnn; do
  if [ -d "$_shopsimrl_d/lib" ]; then
    _shopsimrl_cudnn="$_shopsimrl_d"
    break
  fi
done
if [ -n "$_shopsimrl_cudnn" ]; then
  # __unset__ marks "was not set", so deactivation can unset instead of setting it empty.
  export _SHOPSIMRL_OLD_LD_LIBRARY_PATH="${LD_LIBRARY_PATH-__unset__}"
  export _SHOPSIMRL_OLD_CUDNN_PATH="${CUDNN_PATH-__unset__}"
  export LD_LIBRARY_PATH="$_shopsimrl_cudnn/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CUDNN_PATH="$_shopsimrl_cudnn"
fi
unset _shopsimrl_cudnn _shopsimrl_d
