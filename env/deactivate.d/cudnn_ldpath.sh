# shellcheck shell=sh
# ShopSimRL cuDNN hook (M4), sourced by `conda deactivate` from the env's
# etc/conda/deactivate.d/: restores the LD_LIBRARY_PATH and CUDNN_PATH that
# activate.d/cudnn_ldpath.sh saved (unsetting a variable that was not set before).
if [ -n "${_SHOPSIMRL_OLD_LD_LIBRARY_PATH+x}" ]; then
  if [ "$_SHOPSIMRL_OLD_LD_LIBRARY_PATH" = __unset__ ]; then
    unset LD_LIBRARY_PATH
  else
    export LD_LIBRARY_PATH="$_SHOPSIMRL_OLD_LD_LIBRARY_PATH"
  fi
  unset _SHOPSIMRL_OLD_LD_LIBRARY_PATH
fi
if [ -n "${_SHOPSIMRL_OLD_CUDNN_PATH+x}" ]; then
  if [ "$_SHOPSIMRL_OLD_CUDNN_PATH" = __unset__ ]; then
    unset CUDNN_PATH
  else
    export CUDNN_PATH="$_SHOPSIMRL_OLD_CUDNN_PATH"
  fi
  unset _SHOPSIMRL_OLD_CUDNN_PATH
fi
