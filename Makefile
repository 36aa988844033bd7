# ShopSimRL: the menu. `make` alone lists the targets and every knob with its default.
# `make T` runs bin/T, one verb per file (rbenv-style): its `# Summary:` header is T's line in the
# menu (bin/help prints this file's targets and groups with those lines), `# Usage:` its arguments.
# A recipe only turns make variables (ROUND, SERVICE, ...) into the verb's arguments.
# Knob defaults live only in env/defaults.env; `make KNOB=value` passes through to them
# (make exports command-line variables to recipes). This file never includes .env.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# With REHEARSAL=1, stop/status/watch/plan/logs/report and migrate-* act on the rehearsal (its stand-in configuration).
IN_RUN = $(if $(REHEARSAL),bin/rehearse --env )

# A run stopped on request (make stop: 143, Ctrl-C: 130) has printed how to continue; make adds no
# "Error" line to that. bin/train's own exit status stays non-zero for scripts.
STOP_IS_NO_ERROR = || { status=$$?; [[ $$status == 130 || $$status == 143 ]] || exit $$status; }

# Control and inspection targets (stop, status, logs, plan, report, ...) only need a venv to exist:
# they never run `setup`, which would reinstall packages under a live run after a pull.
VENV := .venv/bin/python
$(VENV):
	@echo "shopsimrl: the toolkit's virtualenv is missing: $(CURDIR)/.venv (run: make setup)" >&2; exit 1

.PHONY: help
help:
	@bin/help

## --- The run ---

.PHONY: train
train: setup
	@bin/train $(STOP_IS_NO_ERROR)

.PHONY: resume
resume: setup
	@bin/resume $(if $(ROUND),--round $(ROUND)) $(STOP_IS_NO_ERROR)

.PHONY: stop
stop: | $(VENV)
	@$(IN_RUN)bin/stop

.PHONY: join
join: setup
	@bin/join

.PHONY: leave
leave: | $(VENV)
	@bin/leave

.PHONY: status
status: | $(VENV)
	@$(IN_RUN)bin/status

.PHONY: logs
logs: | $(VENV)
	@$(IN_RUN)bin/logs $(if $(SERVICE),--service $(SERVICE)) $(if $(LINES),--lines $(LINES)) $(if $(FOLLOW),--follow)

.PHONY: watch
watch: | $(VENV)
	@$(IN_RUN)bin/watch $(if $(INTERVAL),--interval $(INTERVAL))

.PHONY: report
report: | $(VENV)
	@$(IN_RUN)bin/report

.PHONY: plan
plan: | $(VENV)
	@$(IN_RUN)bin/plan

.PHONY: wandb-sync
wandb-sync: | $(VENV)
	@bin/wandb-sync $(if $(DRY_RUN),--dry-run)

.PHONY: rehearse
rehearse: setup
	@bin/rehearse $(if $(RESUME),--resume $(if $(ROUND),--round $(ROUND))) $(STOP_IS_NO_ERROR)

## --- The machine ---

.PHONY: doctor
doctor: | $(VENV)
	@bin/doctor

.PHONY: install-hooks
install-hooks: setup
	@bin/install-hooks

.PHONY: convert-base
convert-base: setup
	@bin/convert-base

.PHONY: smoke
smoke: setup
	@bin/smoke

.PHONY: migrate-pack
migrate-pack: | $(VENV)
	@$(IN_RUN)bin/migrate-pack

.PHONY: migrate-machine
migrate-machine: setup
	@$(IN_RUN)bin/migrate-machine --from "$(FROM)"

.PHONY: plan-memory
plan-memory: | $(VENV)
	@bin/plan-memory

## --- The toolkit ---

# Run first by train, rehearse, test ...: it then says the venv is ready for that target.
.PHONY: setup
setup:
	@bin/setup $(if $(filter-out setup,$(MAKECMDGOALS)),--for "$(filter-out setup,$(MAKECMDGOALS))")

.PHONY: test
test: setup
	@bin/test

.PHONY: test-fast
test-fast: setup
	@bin/test-fast

.PHONY: test-slime
test-slime: setup
	@bin/test-slime

.PHONY: config
config: | $(VENV)
	@bin/config

.PHONY: check
check: | $(VENV)
	@bin/check

.PHONY: readme-knobs
readme-knobs: setup
	@bin/readme-knobs
