"""ShopSimRL's Python helpers.

Kept import-free on purpose: the rollout plugin imports this package inside slime's Ray actors
and the memory benchmark runs where only torch exists, so nothing heavy (click, dotenv, wandb)
may load here. Each concern is its own module; the click CLI lives in pyhelpers.cli.
"""

__version__ = "0.1.0"
