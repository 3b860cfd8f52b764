"""Checkpoint on notice: a PyTorch DDP training that saves when told to stop.

trainstep's contract with training code (docs/failures.md):

- SIGTERM means "checkpoint now and exit". trainstep sends it to every rank
  at once when one of them is about to be disrupted (a drain of its node, a
  preemption, an eviction), while the ranks can still talk to each other.
- The ranks agree on the step to stop at: each step they all-reduce a stop
  flag (MAX), so a rank told a moment later than another stops at the same
  step, and none waits in a collective on a peer that already left.
- Rank 0 saves the checkpoint of that step; every rank then exits 143 (as a
  process killed by SIGTERM would).
- On restart every rank resumes from the checkpoint. TRAINSTEP_JOB_ATTEMPT
  says which whole-job attempt this is, TRAINSTEP_RESTART_REASON why the
  last one ended ("disruption" or "failure").

It runs with Debian's python3-torch (gloo on CPU) from the env trainstep
renders (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). CKPT_DIR must be a
directory every rank sees (a ReadWriteMany PersistentVolumeClaim). STEPS
steps are trained, STEP_DELAY seconds each; CKPT_EVERY > 0 also saves every
that many steps (the only checkpoints with CHECKPOINT_ON_SIGTERM=0, the
periodic-only job docs/failures.md compares). With
KUBEFLOW_TRAINER_STATUS_URL set, rank 0 reports progress and a "step" metric
to the step (else prints it as a log line, which the step reads too), and
the step says what each restart cost (the resumes output).
"""
import datetime
import json
import os
import signal
import ssl
import sys
import time
from urllib import error, request

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(os.environ.get("STEPS", "600"))
STEP_DELAY = float(os.environ.get("STEP_DELAY", "0.1"))
CKPT_EVERY = int(os.environ.get("CKPT_EVERY", "0"))
ON_SIGTERM = os.environ.get("CHECKPOINT_ON_SIGTERM", "1") == "1"
REPORT_EVERY = int(os.environ.get("REPORT_EVERY", "10"))

stop_requested = False


def on_sigterm(signum, frame):
    """Asks the training loop to stop at the next step the ranks agree on."""
    global stop_requested
    stop_requested = True
    marker = os.environ.get("SIGTERM_MARKER")  # tests: when each rank heard it
    if marker:
        with open(f"{marker}-{os.environ.get('RANK', '?')}", "w") as f:
            f.write(f"{time.time():.3f}")


def report(step, loss):
    """Reports progress with Kubeflow Trainer's protocol, to the step's
    endpoint, or as a log line the step reads when there is none; never
    fails the training."""
    payload = {"trainerStatus": {
        "progressPercentage": step * 100 // STEPS,
        "metrics": [{"name": "loss", "value": f"{loss:.6f}"}, {"name": "step", "value": str(step)}],
        "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }}
    url = os.environ.get("KUBEFLOW_TRAINER_STATUS_URL")
    if not url:
        print(json.dumps(payload), flush=True)
        return
    try:
        with open(os.environ["KUBEFLOW_TRAINER_STATUS_TOKEN"]) as f:
            token = f.read()
        context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_STATUS_CA_CERT"])
        req = request.Request(url, data=json.dumps(payload).encode(),
                              headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        request.urlopen(req, context=context, timeout=5).close()
    except (OSError, error.URLError):
        pass


def save(path, model, opt, step):
    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}, path + ".tmp")
    os.replace(path + ".tmp", path)


def main():
    if ON_SIGTERM:
        signal.signal(signal.SIGTERM, on_sigterm)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ckpt = os.path.join(os.environ["CKPT_DIR"], "checkpoint.pt")
    torch.manual_seed(0)
    x = torch.randn(2000, 8)
    y = x @ torch.arange(1.0, 9.0).unsqueeze(1) + 0.5
    shard = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    print(f"rank {rank}: attempt {os.environ.get('TRAINSTEP_JOB_ATTEMPT', '0')} "
          f"({os.environ.get('TRAINSTEP_RESTART_REASON') or 'first'}), starting at step {step}", flush=True)
    loss = torch.tensor(0.0)
    if rank == 0 and REPORT_EVERY:
        report(step, loss.item())  # where this attempt starts
    while step < STEPS:
        stop = torch.tensor([1 if stop_requested else 0])
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item():
            if rank == 0:
                save(ckpt, model, opt, step)
                if REPORT_EVERY:
                    report(step, loss.item())  # where it stopped
            print(f"rank {rank}: stopping at step {step}, checkpoint saved", flush=True)
            dist.barrier()
            sys.exit(143)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
        loss.backward()
        opt.step()
        step += 1
        if rank == 0 and CKPT_EVERY and step % CKPT_EVERY == 0:
            save(ckpt, model, opt, step)
        if rank == 0 and REPORT_EVERY and step % REPORT_EVERY == 0:
            report(step, loss.item())
        time.sleep(STEP_DELAY)
    if rank == 0:
        path = os.environ.get("TRAINSTEP_TERMINATION_MESSAGE_PATH", "/dev/termination-log")
        with open(path, "w") as f:
            json.dump({"loss": loss.item(), "steps": step}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
