# ShopSimRL: the menu. `make` alone lists the targets and every knob with its default.
# Knob defaults live only in env/defaults.env; `make KNOB=value` passes through to them
# (make exports command-line variables to recipes). This file never includes .env.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

.PHONY: help
help: ## Show this menu: targets, then knobs and their defaults
	@bin/menu

.PHONY: setup
setup: ## Create/update .venv with the pinned packages (fast no-op when up to date)
	@bin/setup

.PHONY: test
test: setup ## Lint (shellcheck, ruff), then run the test suite
	@bin/test

.PHONY: config
config: setup ## Print the resolved configuration (secrets as ***)
	@.venv/bin/python -m pyhelpers config show

.PHONY: check
check: setup ## Validate the configuration; names each bad knob and the fix
	@.venv/bin/python -m pyhelpers config check

.PHONY: readme-knobs
readme-knobs: setup ## Regenerate README.md's knob table from env/defaults.env
	@bin/readme-knobs
