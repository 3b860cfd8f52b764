"""A small DistributedDataParallel training for trainstep's tests.

Every rank joins the process group with gloo on CPU from the env trainstep
renders (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), trains a linear
regression with DDP, and rank 0 writes {"loss", "steps"} to the
termination message path. Rank 0 keeps a checkpoint every 10 steps with
torch.save in $CKPT_DIR, and every rank resumes from it when it is there.

With REPORT_EVERY set, rank 0 reports its progress and loss every that many
steps with Kubeflow Trainer's protocol (KEP-2779's stdlib snippet), after one
post with a wrong token whose answer it prints; STEP_DELAY (seconds) paces
the steps.

UNTIL_FILE makes the ranks train on past STEPS until that file exists: rank 0
looks for it every 10 steps and tells the others, so that all stop at the
same step, and the termination message gives the steps trained. A test that
waits on something while the job trains tells it to end once it saw it,
however fast the machine trains.

KILL_RANK and KILL_AT make that rank kill itself with SIGKILL at that step,
once (a marker file in $CKPT_DIR remembers), as the OOM killer would; FAIL_RANK
makes that rank exit 1 at step KILL_AT, every time, as a bug would.
"""
import datetime
import json
import os
import signal
import ssl
import time
from urllib import error, request

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(os.environ.get("STEPS", "300"))
REPORT_EVERY = int(os.environ.get("REPORT_EVERY", "0"))
STEP_DELAY = float(os.environ.get("STEP_DELAY", "0"))
UNTIL_FILE = os.environ.get("UNTIL_FILE")


def update_training_status(payload, token=None):
    """Posts payload to the job's status endpoint; returns the HTTP code."""
    url = os.environ["KUBEFLOW_TRAINER_STATUS_URL"]
    ca_file = os.environ["KUBEFLOW_TRAINER_STATUS_CA_CERT"]
    if token is None:
        with open(os.environ["KUBEFLOW_TRAINER_STATUS_TOKEN"]) as f:
            token = f.read()
    ssl_context = ssl.create_default_context(cafile=ca_file)
    req = request.Request(url, data=json.dumps(payload).encode(),
                          headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with request.urlopen(req, context=ssl_context, timeout=10) as resp:
            return resp.status
    except error.HTTPError as e:
        return e.code
    except OSError as e:
        return f"unreachable: {e}"


def status(step, loss):
    return {"trainerStatus": {
        "progressPercentage": step * 100 // STEPS,
        "metrics": [{"name": "loss", "value": f"{loss:.6f}"}, {"name": "step", "value": str(step)}],
        "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }}


def until_file_seen(rank):
    """Whether rank 0 sees UNTIL_FILE, told to every rank."""
    seen = torch.tensor([1 if rank == 0 and os.path.exists(UNTIL_FILE) else 0])
    dist.broadcast(seen, 0)
    return bool(seen.item())


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ckpt_dir = os.environ["CKPT_DIR"]
    ckpt = os.path.join(ckpt_dir, "checkpoint.pt")
    torch.manual_seed(0)
    x = torch.randn(2000, 8)
    y = x @ torch.arange(1.0, 9.0).unsqueeze(1) + 0.5
    shard = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        print(f"rank {rank}: resuming at step {start}", flush=True)
    loss = None
    if rank == 0 and REPORT_EVERY:
        print("wrong token", update_training_status(status(0, 0.0), token="0" * 64), flush=True)
    step = start
    while step < STEPS or UNTIL_FILE and (step % 10 or not until_file_seen(rank)):
        step += 1
        if step == int(os.environ.get("KILL_AT", "-1")):
            if rank == int(os.environ.get("FAIL_RANK", "-1")):
                print(f"rank {rank}: failing at step {step}", flush=True)
                # At once, without the interpreter's shutdown: tearing gloo down
                # first would let a peer see the broken collective and exit
                # before this rank, which is the cause.
                os._exit(1)
            marker = os.path.join(ckpt_dir, "killed")
            if rank == int(os.environ.get("KILL_RANK", "-1")) and not os.path.exists(marker):
                open(marker, "w").close()
                print(f"rank {rank}: killed at step {step}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
        if rank == 0 and step % 50 == 0:
            print(f"step {step} loss {loss.item():.6f} world {world}", flush=True)
        if rank == 0 and REPORT_EVERY and step % REPORT_EVERY == 0:
            print("posted", step * 100 // STEPS, update_training_status(status(step, loss.item())), flush=True)
        if STEP_DELAY:
            time.sleep(STEP_DELAY)
    if loss is None:  # resumed at the end: the checkpoint's loss
        with torch.no_grad():
            loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
    total = torch.tensor([loss.item()])
    dist.all_reduce(total)
    if rank == 0:
        # The local backend says where; in a pod it is the container's termination log.
        path = os.environ.get("TRAINSTEP_TERMINATION_MESSAGE_PATH", "/dev/termination-log")
        with open(path, "w") as f:
            json.dump({"loss": total.item() / world, "steps": step}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
