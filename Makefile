# ShopSimRL: the menu. `make` alone lists the targets and every knob with its default.
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
help: ## Show this menu: targets, then knobs and their defaults
	@bin/menu

## --- The run ---

.PHONY: train
train: setup ## The whole run: preflight, then ROUNDS x (train, rotate, export, compile, evaluate, inject); continues a stopped run
	@bin/train $(STOP_IS_NO_ERROR)

.PHONY: resume
resume: setup ## Continue the run from its artifacts (stops what a killed driver left); ROUND=N asserts where
	@bin/train --resume $(if $(ROUND),--round $(ROUND)) $(STOP_IS_NO_ERROR)

.PHONY: stop
stop: | $(VENV) ## Stop the run from any shell (driver, job, services, Ray) by process group; final until make resume
	@$(IN_RUN).venv/bin/python -m pyhelpers run stop

.PHONY: join
join: setup ## On a worker machine (NNODES>1): check it against the head, then join the run's Ray as a worker node
	@bin/join

.PHONY: leave
leave: | $(VENV) ## On a worker machine: stop only its Ray node (make stop on the head stops every node)
	@bin/leave

.PHONY: status
status: | $(VENV) ## Where the run stands: round, stage, step, services (pids, ports), disk, val/gate results, logs
	@$(IN_RUN).venv/bin/python -m pyhelpers run status

.PHONY: logs
logs: | $(VENV) ## Which logs exist (sizes, ages), or one: SERVICE=driver|shopsim|slime|... [LINES=200] [FOLLOW=1]
	@$(IN_RUN).venv/bin/python -m pyhelpers run logs $(if $(SERVICE),--service $(SERVICE)) $(if $(LINES),--lines $(LINES)) $(if $(FOLLOW),--follow)

.PHONY: watch
watch: | $(VENV) ## make status, refreshed every few seconds (INTERVAL=3) until Ctrl-C
	@$(IN_RUN).venv/bin/python -m pyhelpers run watch $(if $(INTERVAL),--interval $(INTERVAL))

.PHONY: report
report: | $(VENV) ## The run at a glance without W&B: runs/<RUN_NAME>/report/index.html with plots and CSVs
	@$(IN_RUN).venv/bin/python -m pyhelpers run report

.PHONY: plan
plan: | $(VENV) ## What make train / make resume would do: resume point, stages, command lines, disk, ports
	@$(IN_RUN)bin/plan

.PHONY: wandb-sync
wandb-sync: | $(VENV) ## Upload the run's offline W&B runs (key from .env or ~/.netrc); DRY_RUN=1 lists them
	@.venv/bin/python -m pyhelpers run wandb-sync $(if $(DRY_RUN),--dry-run)

.PHONY: rehearse
rehearse: setup ## The whole run on stand-ins (CPU, ~1 min): check a machine or config before GPU hours
	@bin/rehearse $(if $(RESUME),--resume $(if $(ROUND),--round $(ROUND))) $(STOP_IS_NO_ERROR)

## --- The machine ---

.PHONY: doctor
doctor: | $(VENV) ## Preflight this machine: PASS/WARN/FAIL/SKIP per check + fix (PROFILE=rehearse on a CPU box)
	@bin/doctor

.PHONY: install-hooks
install-hooks: setup ## Install the cuDNN activate/deactivate hooks into the slime env (DRY_RUN=1: plan only)
	@bin/install-hooks

.PHONY: convert-base
convert-base: setup ## HF_MODEL -> TORCH_DIST_MODEL with slime's converter (M18; needs the GPUs)
	@bin/convert-base

.PHONY: smoke
smoke: setup ## A 1-GPU TP=1 smoke (M1) on the real stack: a few steps, checkpoint + HF export, no eval
	@bin/smoke

.PHONY: migrate-pack
migrate-pack: | $(VENV) ## On the old machine: manifest + pack of the run (hashes, relative paths); prints the FROM to use
	@$(IN_RUN).venv/bin/python -m pyhelpers migrate pack

.PHONY: migrate-machine
migrate-machine: setup ## On the new machine: FROM=<user@host:/path | /mounted/path> -> checks, rsync, verify, make resume
	@$(IN_RUN).venv/bin/python -m pyhelpers migrate machine --from "$(FROM)"

.PHONY: plan-memory
plan-memory: | $(VENV) ## Per-GPU peak memory of a training micro-batch (vocab logits); WARNs with the knob to turn
	@.venv/bin/python -m pyhelpers plan memory

## --- The toolkit ---

.PHONY: setup
setup: ## Create/update .venv with the pinned packages (fast no-op when up to date)
	@bin/setup

.PHONY: test
test: setup ## Lint, then every test on parallel workers (about 10 min on 2 cores; CI runs this)
	@bin/test

.PHONY: test-fast
test-fast: setup ## Lint, then the tests without a rehearsal, Ray or service process (under a minute)
	@bin/test-fast

.PHONY: config
config: | $(VENV) ## Print the resolved configuration (secrets as ***)
	@.venv/bin/python -m pyhelpers config show

.PHONY: check
check: | $(VENV) ## Validate the configuration; names each bad knob and the fix
	@.venv/bin/python -m pyhelpers config check

.PHONY: readme-knobs
readme-knobs: setup ## Regenerate README.md's knob table from env/defaults.env
	@bin/readme-knobs
