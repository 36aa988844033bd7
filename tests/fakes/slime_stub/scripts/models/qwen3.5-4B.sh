# shellcheck shell=bash
# Stand-in for slime's scripts/models/qwen3.5-4B.sh: defines MODEL_ARGS, the Megatron architecture
# flags of Qwen3.5-4B (32 layers, hidden 2560, vocab 248,320, tied
# embeddings: slime 624b824 scripts/models/qwen3.5-4B.sh), in
# the form slime's model scripts use. Every name is a real flag of the pinned stack.
# shellcheck disable=SC2034  # read by the script that sources this file
MODEL_ARGS=(
   --disable-bias-linear
   --qk-layernorm
   --group-query-attention
   --num-attention-heads 16
   --num-query-groups 4
   --kv-channels 256
   --num-layers 32
   --hidden-size 2560
   --ffn-hidden-size 9216
   --normalization RMSNorm
   --position-embedding-type rope
   --norm-epsilon 1e-6
   --rotary-percent 0.25
   --swiglu
   --vocab-size 248320
   --rotary-base 10000000
)
