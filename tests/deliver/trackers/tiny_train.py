"""A tiny CPU "training" (a line fitted by SGD, plain Python) that logs to the trackers a user's script
would: W&B (offline), MLflow (any tracking URI given) and TensorBoard (tensorboard's own event writer, with
the hparams plugin's session records as torch's SummaryWriter writes them). It ties
its runs to the launch the way the README tells users to: the `rgt_run_id` config key / MLflow tag
and an event folder named by the run id. With --hang it stops after its steps, flushed, prints READY
and waits to be killed. It prints its final metrics as JSON."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time


class TbWriter:
    """TensorBoard event files through tensorboard's own writer (no TensorFlow, no torch)."""

    def __init__(self, log_dir: str) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.events = EventFileWriter(log_dir)

    def add_summary(self, summary: object, step: int = 0) -> None:
        from tensorboard.compat.proto import event_pb2

        self.events.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        from tensorboard.compat.proto import summary_pb2

        self.add_summary(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]), step)

    def flush(self) -> None:
        self.events.flush()

    def close(self) -> None:
        self.events.close()


def session(field: str, hparams: dict[str, object] | None = None) -> object:
    """The hparams plugin's session start (with the config) or end (success) record."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    if field == "session_start_info":
        info = plugin_data_pb2.SessionStartInfo()
        for k, v in (hparams or {}).items():
            if isinstance(v, bool):
                info.hparams[k].bool_value = v
            elif isinstance(v, int | float):
                info.hparams[k].number_value = float(v)
            else:
                info.hparams[k].string_value = str(v)
        data = plugin_data_pb2.HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, session_start_info=info)
        tag = metadata.SESSION_START_INFO_TAG
    else:
        end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))
        data = plugin_data_pb2.HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, session_end_info=end)
        tag = metadata.SESSION_END_INFO_TAG
    plugin = summary_pb2.SummaryMetadata.PluginData(plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString())
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=summary_pb2.SummaryMetadata(
        plugin_data=plugin))])


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--wandb", action="store_true")
    p.add_argument("--mlflow", action="append", default=[], help="tracking URI (repeatable)")
    p.add_argument("--tb", help="TensorBoard root: events go to <root>/<RGT_RUN_ID or --tb-name>")
    p.add_argument("--tb-name", default=None)
    p.add_argument("--hang", action="store_true")
    return p.parse_args()


def fit(steps: int, lr: float, seed: int, batch: int) -> list[dict[str, float]]:
    rng = random.Random(seed)
    w = b = 0.0
    out = []
    for _ in range(steps):
        xs = [rng.uniform(-1, 1) for _ in range(batch)]
        grads = [(w * x + b - (3 * x + 1), x) for x in xs]
        w -= lr * 2 * sum(e * x for e, x in grads) / batch
        b -= lr * 2 * sum(e for e, _ in grads) / batch
        out.append({"loss": sum(e * e for e, _ in grads) / batch, "w": w})
    return out


def main() -> None:
    args = parse()
    run_id = os.environ.get("RGT_RUN_ID")
    config = {"lr": args.lr, "seed": args.seed, "batch": args.batch, "model": {"kind": "line", "width": 1}}
    loggers = []
    if args.wandb:
        import wandb

        run = wandb.init(project="tiny", name=f"tiny-{args.seed}", config={**config, "rgt_run_id": run_id})
        loggers.append(lambda i, m: run.log(m, step=i))
    mlflow_runs = []
    for uri in args.mlflow:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("tiny") or client.get_experiment(client.create_experiment("tiny"))
        mr = client.create_run(exp.experiment_id, run_name=f"tiny-{args.seed}",
                               tags={"rgt_run_id": run_id} if run_id else None)
        for k, v in (("lr", args.lr), ("seed", args.seed), ("batch", args.batch)):
            client.log_param(mr.info.run_id, k, v)
        mlflow_runs.append((client, mr.info.run_id))
        loggers.append(lambda i, m, c=client, r=mr.info.run_id: [c.log_metric(r, k, v, step=i) for k, v in m.items()])
    writer = None
    if args.tb:
        writer = TbWriter(os.path.join(args.tb, args.tb_name or run_id or "untitled"))
        writer.add_summary(session("session_start_info", config | {"model": "line"}))
        loggers.append(lambda i, m: [writer.add_scalar(k, v, i) for k, v in m.items()])

    history = fit(args.steps, args.lr, args.seed, args.batch)
    for i, metrics in enumerate(history):
        for log in loggers:
            log(i, metrics)
    print(json.dumps(history[-1]), flush=True)
    if args.hang:
        if writer is not None:
            writer.flush()
        print("READY", flush=True)
        time.sleep(600)
        sys.exit(1)
    for client, rid in mlflow_runs:
        client.set_terminated(rid, "FINISHED")
    if writer is not None:
        writer.add_summary(session("session_end_info"))
        writer.close()
    if args.wandb:
        run.finish()


if __name__ == "__main__":
    main()
