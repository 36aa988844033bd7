"""Stand-in for Megatron-LM 1dcf0daf (MEGATRON_DIR): only megatron.training.arguments, for `make doctor`'s
check of a command line against the installed parsers."""
