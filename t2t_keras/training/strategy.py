"""Choosing a tf.distribute strategy: one device, MirroredStrategy, or multi-worker from TF_CONFIG."""

import json
import os

import tensorflow as tf


def make_strategy(worker_gpu=None, devices=None):
  """The strategy a run uses.

  - TF_CONFIG naming more than one worker: MultiWorkerMirroredStrategy.
  - `devices` (e.g. ["/cpu:0", "/cpu:1"] over logical CPU devices): MirroredStrategy on them.
  - `worker_gpu` > 1 (default: all visible GPUs): MirroredStrategy over that many GPUs.
  - one GPU: OneDeviceStrategy on it; no GPU: the default strategy (CPU).
  """
  cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
  if len(cluster.get("worker", [])) + len(cluster.get("chief", [])) > 1:
    return tf.distribute.MultiWorkerMirroredStrategy()
  if devices:
    return tf.distribute.MirroredStrategy(devices)
  gpus = tf.config.list_logical_devices("GPU")
  n = len(gpus) if worker_gpu is None else min(worker_gpu, len(gpus))
  if worker_gpu and worker_gpu > len(gpus):
    raise ValueError(f"--worker_gpu={worker_gpu} but only {len(gpus)} GPUs are visible")
  if n > 1:
    return tf.distribute.MirroredStrategy([g.name for g in gpus[:n]])
  if n == 1:
    return tf.distribute.OneDeviceStrategy(gpus[0].name)
  return tf.distribute.get_strategy()


def is_chief(strategy):
  """True on the worker that writes checkpoints and logs (always on one machine)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  return resolver.task_type == "chief" or (
      resolver.task_type == "worker" and resolver.task_id == 0
      and "chief" not in resolver.cluster_spec().as_dict())
