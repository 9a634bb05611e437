"""t2t-data-service: a tf.data service dispatcher and worker for `t2t-trainer --data_service_address`.

    t2t-data-service --port=5050                          # a dispatcher and a worker
    t2t-data-service --dispatcher_address=HOST:5050 --port=5051   # one more worker

Workers make the training batches (reading --data_dir's files themselves, so every
worker must reach them: shared or `gs://` storage) and send them to the trainers; see
t2t_keras/data/service.py. Runs until killed.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import flags

from t2t_keras.data import service

_define = t2t_keras.bin.define_flag
_define("integer", "port", 5050, "The dispatcher's port; with --dispatcher_address, the "
        "worker's (0: any free port).", lower_bound=0)
_define("string", "dispatcher_address", None,
        "HOST:PORT of a running dispatcher: start only a worker for it.")
NAME = "t2t-data-service"
FLAGS = flags.FLAGS


def main(argv):
  del argv
  servers, addresses = service.serve(FLAGS.port, FLAGS.dispatcher_address)
  roles = ["dispatcher", "worker"][-len(servers):]
  print(f"{NAME}: " + ", ".join(f"{role} {address}" for role, address in zip(roles, addresses)),
        flush=True)
  servers[-1].join()
  return 0


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
