"""A small elastic DistributedDataParallel training for trainstep's tests.

Run under torchrun (python3 -m torch.distributed.run) with nothing but the
env trainstep renders for an elastic PyTorch job (PET_NNODES=min:max,
PET_RDZV_ENDPOINT, PET_RDZV_BACKEND, ...): the agents form the world by
c10d rendezvous and set RANK and WORLD_SIZE for this process. Every time
the world changes (a node joins or leaves) torchrun restarts this script;
it resumes from the checkpoint rank 0 keeps every 10 steps in $CKPT_DIR.
Each step sleeps STEP_SECONDS, so the training lasts long enough for the
world to change while it runs. Every rank writes {"loss", "steps",
"world"} to the termination message path at the end, so whichever pod
ends first reports the metrics.

COLLECTIVE_TIMEOUT (seconds) bounds every collective call: a peer whose
machine died sends nothing, not even a reset, and without a bound the
survivors would wait in their all-reduce for torch's default of 30
minutes instead of failing, so that their agents re-form the world
without it. FINAL_WORLD makes the ranks of a smaller world train on past
STEPS: the training ends only in a world of at least that many ranks.
"""
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(os.environ.get("STEPS", "2000"))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "0.02"))
COLLECTIVE_TIMEOUT = os.environ.get("COLLECTIVE_TIMEOUT")
FINAL_WORLD = int(os.environ.get("FINAL_WORLD", "0"))


def main():
    if COLLECTIVE_TIMEOUT:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(COLLECTIVE_TIMEOUT)))
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"rank {rank}: world size {world} (agent restart {restart})", flush=True)
    ckpt = os.path.join(os.environ["CKPT_DIR"], "checkpoint.pt")
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
        print(f"rank {rank}: resuming at step {start} with world size {world}", flush=True)
    loss, step = None, start
    while step < STEPS or world < FINAL_WORLD:
        step += 1
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
        loss.backward()
        opt.step()
        time.sleep(STEP_SECONDS)
        if rank == 0 and step % 10 == 0:
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
        if rank == 0 and step % 100 == 0:
            print(f"step {step} loss {loss.item():.6f} world size {world}", flush=True)
    if loss is None:  # resumed at the end: the checkpoint's loss
        with torch.no_grad():
            loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
    total = torch.tensor([loss.item()])
    dist.all_reduce(total)
    path = os.environ.get("TRAINSTEP_TERMINATION_MESSAGE_PATH", "/dev/termination-log")
    with open(path, "w") as f:
        json.dump({"loss": total.item() / world, "steps": step, "world": world}, f)
    print(f"rank {rank}: done at step {step} with world size {world}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
