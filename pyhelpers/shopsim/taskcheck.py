"""Is the task the simulator started the task the task file means? Checked after every reset.

A task file names each task by its position in the server's goal list (`shopsim_idx`). If the
server loads another file, or the builder guessed the server's order wrong, every index can be
shifted: resets still succeed, and episodes are scored against other goals without a sign. So
the instruction the reset answers (docs/shopsim_protocol.md) must equal the task file's, and an
index the server does not have ('list index out of range' after the pop) is the same kind of
problem. Both are task errors: the stage stops, naming the task, and never retries them as
infrastructure. Stdlib only (the rollout plugin runs this inside slime's environment).
"""

from __future__ import annotations

from pyhelpers.errors import ToolkitError
from pyhelpers.shopsim.protocol import ResetResult, goal_instruction

REMEDY = ("the task file does not match the task list the running ShopSimulator loaded: rebuild TRAIN_TASKS and "
          "VAL_TASKS from the file the server loads, `pyhelpers data build --server-file "
          "<SHOPSIM_DIR>/shop_env/data/items_eval_train.json ...`, or start ShopSimulator on the data the tasks "
          "were built from")


class TaskError(ToolkitError):
    """A task cannot be played as its file describes it (never an infrastructure error)."""


def check_reset(task: dict, reset: ResetResult, where: str = "") -> None:
    """Raise TaskError when the server's goal for the task's index is not the file's: its
    instruction, and its goal options when the file has them (two goals can share a text)."""
    want, got = str(task["instruction"]).strip(), goal_instruction(reset.instruction)
    what = "instruction"
    if got == want and "goal_options" in task and reset.goal_options is not None \
            and task["goal_options"] != reset.goal_options:
        what, want, got = "goal options", task["goal_options"], reset.goal_options
    if got != want:
        raise TaskError(f"task {task['task_id']} (shopsim_idx {task['shopsim_idx']}): ShopSimulator's {what} "
                        f"for that index is {got!r}, the task file's is {want!r}", where, REMEDY)


def bad_index(task: dict, where: str = "") -> TaskError:
    """The error for a task whose reset the server answered 'list index out of range' twice
    (ShopSimClient.reset retries once: the same answer comes from a slot number beyond the pool)."""
    return TaskError(f"task {task['task_id']}: ShopSimulator has no task index {task['shopsim_idx']} (two resets "
                     "answered 'list index out of range'; the slots they took are freed by the stage's clean-up). "
                     "If the index is right, the simulator's free list holds slot numbers beyond its pool instead "
                     "(another client's release_one of such a number): restart ShopSimulator",
                     where, REMEDY)
