"""Reports training progress as Kubeflow Trainer's KEP-2779 describes it.

Rank 0 (TRAINSTEP_REPLICA_INDEX 0, or RANK 0) first posts once with a wrong
token and prints the answer, then posts STEPS statuses, one every INTERVAL
seconds, with urllib and ssl only, and prints each answer, reading the
token file again for each post. With --log-line it prints each status as
one JSON line instead of posting. It reads the KEP's variables
(KUBEFLOW_TRAINER_STATUS_*), or with --server-names those of Kubeflow
Trainer's TrainJobStatus plugin that the Kubeflow SDK and the transformers
integration read (KUBEFLOW_TRAINER_SERVER_*); with REPORT_URL set (a
template's $(KUBEFLOW_TRAINER_SERVER_URL)) it says whether that is the URL.
Every rank writes {"accuracy": 0.9} as its termination message.
"""

import datetime
import json
import os
import ssl
import sys
import time
from urllib import error, request

STEPS = int(os.environ.get("STEPS", "4"))
INTERVAL = float(os.environ.get("INTERVAL", "1"))


NAMES = "SERVER" if "--server-names" in sys.argv else "STATUS"


def variable(name):
    return os.environ[f"KUBEFLOW_TRAINER_{NAMES}_{name}"]


def update_training_status(payload, token=None):
    url = variable("URL")
    ca_file = variable("CA_CERT")
    if token is None:
        with open(variable("TOKEN")) as f:
            token = f.read()
    ssl_context = ssl.create_default_context(cafile=ca_file)
    req = request.Request(url, data=json.dumps(payload).encode(),
                          headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with request.urlopen(req, context=ssl_context, timeout=10) as resp:
            return resp.status
    except error.HTTPError as e:
        return e.code


def status(step):
    return {"trainerStatus": {
        "progressPercentage": step * 100 // STEPS,
        "estimatedRemainingSeconds": int((STEPS - step) * INTERVAL),
        "metrics": [{"name": "loss", "value": f"{1 / step:.4f}"}, {"name": "step", "value": str(step)}],
        "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }}


def main():
    rank = os.environ.get("TRAINSTEP_REPLICA_INDEX", os.environ.get("RANK", "0"))
    log_line = "--log-line" in sys.argv
    if rank == "0" and "REPORT_URL" in os.environ:
        print("REPORT_URL is the URL:", os.environ["REPORT_URL"] == variable("URL"), flush=True)
    if rank == "0" and not log_line:
        print("wrong token", update_training_status(status(1), token="0" * 64), flush=True)
    for step in range(1, STEPS + 1):
        time.sleep(INTERVAL)
        if rank != "0":
            continue
        if log_line:
            print(json.dumps(status(step)), flush=True)
        else:
            print("posted", step * 100 // STEPS, update_training_status(status(step)), flush=True)
    message = os.environ.get("TRAINSTEP_TERMINATION_MESSAGE_PATH", "/dev/termination-log")
    with open(message, "w") as f:
        f.write(json.dumps({"accuracy": 0.9}))


if __name__ == "__main__":
    main()
