"""Reading slime's own job log (pyhelpers/launch/slime_log.py): which rollouts' training is over."""

from __future__ import annotations

import time

from pyhelpers.launch import slime_log

# Ray's driver log of a slime job: the RolloutManager's line after a generation
# (rollout_metrics.py:268) and the Megatron main rank's after the training
# (train_metric_utils.py:401), both forwarded by Ray with their actor's prefix, in slime's format
# (logging_utils.py:21).
LOG = """\
(RolloutManager pid=4242) [2026-12-05 10:00:01] rollout_metrics.py:268 - perf 20: {'perf/rollout_time': 61.2}
(MegatronTrainRayActor pid=4301) [2026-12-05 10:01:09] train_metric_utils.py:401 - perf 20: {'perf/actor_train_time': 52.0}
(MegatronTrainRayActor pid=4301) [2026-12-05 10:01:09] model.py:120 - step 20: loss 0.31
(RolloutManager pid=4242) [2026-12-05 10:02:10] rollout_metrics.py:268 - perf 21: {'perf/rollout_time': 60.1}
"""


def test_only_the_training_line_says_a_rollouts_training_is_over():
    ((rid, when),) = slime_log.trained(LOG)
    assert rid == 20
    # the end of the logged second, in this machine's local time (slime's logger writes local time)
    assert when == time.mktime(time.strptime("2026-12-05 10:01:09", "%Y-%m-%d %H:%M:%S")) + 1


def test_the_tail_hands_over_whole_lines_once(tmp_path):
    path = tmp_path / "slime-log.log"
    tail = slime_log.Tail(path)
    assert tail.new_text() == ""  # no file yet
    first, second = LOG.splitlines(keepends=True)[1], LOG.splitlines(keepends=True)[3]
    path.write_text(first + second[:30])  # the second line is still being written
    assert [r for r, _ in slime_log.trained(tail.new_text())] == [20]
    with path.open("a") as f:
        f.write(second[30:] + first.replace("perf 20", "perf 21"))
    text = tail.new_text()
    assert text.startswith(second) and [r for r, _ in slime_log.trained(text)] == [21]
    assert tail.new_text() == ""
