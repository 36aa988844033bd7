"""slime.utils.arguments (624b824): get_slime_extra_args_provider (arguments.py:35) returns the function
that adds slime's own flags to Megatron's parser. The stand-in's Megatron (tests/fakes/megatron_stub)
registers slime's names with its own, so this provider adds none."""


def get_slime_extra_args_provider(add_custom_arguments=None):
    def add_slime_arguments(parser):
        if add_custom_arguments is not None:
            parser = add_custom_arguments(parser) or parser
        return parser

    return add_slime_arguments
