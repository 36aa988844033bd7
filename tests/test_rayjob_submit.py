"""Submitting the slime job while Ray's job API is still finding its agent: on a busy machine the
dashboard answers before the head node id and the agent are in GCS, and the job API answers 500
"No available agent" (ray 2.60 dashboard/modules/job/job_head.py:294-319, 418-426) or drops the
connection. The submission waits that out (up to its deadline); anything else fails at once.
A real HTTP server on loopback plays the job API."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.http import reply

from pyhelpers.errors import ToolkitError
from pyhelpers.launch import rayjob

NO_AGENT = (500, "No available agent to submit job, please try again later.")
EXISTS = (400, "Job with submission_id job-1 already exists. Please use a different submission_id.")


class JobApiStandIn:
    """Answers POST /api/jobs/ from a script: (status, text) or "drop" (close without answering)."""

    def __init__(self, script):
        self.script, self.seen = list(script), []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.seen.append((body["submission_id"], self.headers.get("Authorization")))
                step = stand_in.script.pop(0) if stand_in.script else (200, json.dumps({"submission_id": "job-1"}))
                if step == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                status, text = step
                reply(self, status, text.encode())

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def close(self):
        self.server.shutdown()


@pytest.fixture
def api_for(tmp_path):
    made = []
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "auth-token").write_text("t0ken")

    def make(script):
        made.append(JobApiStandIn(script))
        return made[-1], rayjob.JobApi(made[-1].port, tmp_path, timeout=5.0)
    yield make
    for s in made:
        s.close()


def test_submit_waits_for_the_job_agent(api_for):
    stand_in, api = api_for([NO_AGENT, "drop", NO_AGENT])
    assert api.submit("job-1", "python3 train.py", {}, agent_wait=30, retry_every=0.05) == "job-1"
    assert stand_in.seen == [("job-1", "Bearer t0ken")] * 4


def test_a_submission_that_got_through_before_the_drop_counts(api_for):
    stand_in, api = api_for(["drop", EXISTS])
    assert api.submit("job-1", "python3 train.py", {}, agent_wait=30, retry_every=0.05) == "job-1"


def test_other_refusals_and_the_deadline_fail_naming_the_answer(api_for):
    _, api = api_for([(400, "bad entrypoint")])
    with pytest.raises(ToolkitError, match="HTTP 400: bad entrypoint"):
        api.submit("job-1", "x", {}, agent_wait=30, retry_every=0.05)
    _, api = api_for([EXISTS])  # on the first try, an existing id is someone else's job
    with pytest.raises(ToolkitError, match="already exists"):
        api.submit("job-1", "x", {}, agent_wait=30, retry_every=0.05)
    _, api = api_for([NO_AGENT] * 1000)
    with pytest.raises(ToolkitError, match="No available agent"):
        api.submit("job-1", "x", {}, agent_wait=0.3, retry_every=0.05)
    stand_in, api = api_for([NO_AGENT] * 1000)  # the head died: its agent never comes
    with pytest.raises(ToolkitError, match="No available agent"):
        api.submit("job-1", "x", {}, agent_wait=30, retry_every=0.05, head_up=lambda: False)
    assert len(stand_in.seen) == 1
