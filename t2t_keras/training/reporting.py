"""What the training loop reports to: the log, TensorBoard, metrics.jsonl and the curves PNG.

    reporter = Reporter(output_dir, chief=True, log=print, start_step=0)
    reporter.progress(step, loss, lr, tokens_per_second, eta_seconds, input_wait)
    reporter.evaluation(step, metrics, bleu_sentences)
    png = reporter.close()        # flushes TensorBoard, plots the curves (chief only)

    window = ProgressWindow(trainer)   # the steps since the last progress line
    window.add(loss, tokens); window.report(reporter, step, train_steps, learning_rate)
"""

import os
import time

import tensorflow as tf

from t2t_keras.training import curves


def format_time(seconds):
  seconds = int(max(seconds, 0))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Reporter:
  """Progress and dev metrics of one run, to every place they go.

  Args:
    output_dir: TensorBoard events go to output_dir/train, the history to
      output_dir/metrics.jsonl, the curves to output_dir/learning_curves.png.
    chief: only the chief writes files (other workers: the log call only).
    log: a print-like function.
    start_step: the step the run starts (or resumes) at; later history is kept.
  """

  def __init__(self, output_dir, *, chief, log, start_step):
    self.output_dir, self.chief, self.log = output_dir, chief, log
    self.writer = (tf.summary.create_file_writer(os.path.join(output_dir, "train")) if chief
                   else tf.summary.create_noop_writer())
    # One writer of metrics.jsonl: the chief (the other workers' records would repeat it).
    self.history = (curves.History(os.path.join(output_dir, curves.HISTORY_FILE), start_step)
                    if chief else curves.NoHistory())

  def progress(self, step, loss, lr, tokens_per_second, eta_seconds, input_wait):
    """input_wait: the share of the window's wall time the loop spent waiting for the
    input pipeline's next batch (the accelerator idles for it: each step is synchronous)."""
    self.log(f"step {step:>7d}  loss {loss:.4f}  lr {lr:.3e}  "
             f"{tokens_per_second:,.0f} tgt tok/s  ETA {format_time(eta_seconds)}  "
             f"input wait {100 * input_wait:.1f}%")
    with self.writer.as_default(step=step):
      tf.summary.scalar("loss", loss)
      tf.summary.scalar("learning_rate", lr)
      tf.summary.scalar("target_tokens_per_second", tokens_per_second)
      tf.summary.scalar("input_wait", input_wait)
    self.history.add(step, loss=loss, lr=lr, tokens_per_second=tokens_per_second,
                     input_wait=input_wait, time=time.time())

  def evaluation(self, step, metrics, bleu_sentences):
    self.log(f"step {step:>7d}  dev loss {metrics['dev_loss']:.4f}  "
             f"ppl {metrics['dev_perplexity']:.2f}  acc {metrics['dev_accuracy']:.4f}"
             + (f"  BLEU {metrics['dev_bleu']:.2f} (char {metrics['dev_char_bleu']:.2f}, "
                f"greedy, {bleu_sentences} sentences)" if "dev_bleu" in metrics else "")
             + _per_language(metrics))
    with self.writer.as_default(step=step):
      for k, v in metrics.items():
        tf.summary.scalar(k, v)
    self.history.add(step, time=time.time(), **metrics)

  def flush(self):
    self.writer.flush()

  def close(self):
    """Flushes TensorBoard; returns the learning-curves PNG path (chief) or None."""
    self.flush()
    return curves.plot(self.history.path, self.output_dir) if self.chief else None


class ProgressWindow:
  """Loss, target tokens, steps and input wait since the last progress line, and when it
  started (after an evaluation: when the evaluation ended).

  Args:
    loop: what the steps run in; its `input_wait` is the seconds it has waited for
      input so far (the Trainer's).
  """

  def __init__(self, loop):
    self.loop = loop
    self.loss = self.tokens = 0.0
    self.steps = 0
    self.restart()

  def restart(self):
    self.start, self.input_wait = time.time(), self.loop.input_wait

  def add(self, loss, tokens):
    self.loss += loss
    self.tokens += tokens
    self.steps += 1

  def report(self, reporter, step, train_steps, learning_rate):
    """One progress record (mean loss, tokens/s, ETA, input wait) to `reporter`; starts a
    new window."""
    seconds = max(time.time() - self.start, 1e-9)
    reporter.progress(step, self.loss / self.steps, learning_rate, self.tokens / seconds,
                      (train_steps - step) * seconds / self.steps,
                      min(1.0, (self.loop.input_wait - self.input_wait) / seconds))
    self.__init__(self.loop)


def _per_language(metrics):
  """"  de: loss 2.10 BLEU 31.2 | fr: ..." for a multilingual run's metrics, else ""."""
  languages = sorted(k[len("dev_loss_"):] for k in metrics if k.startswith("dev_loss_"))
  parts = [f"{x}: loss {metrics[f'dev_loss_{x}']:.4f}"
           + (f" BLEU {metrics[f'dev_bleu_{x}']:.2f}" if f"dev_bleu_{x}" in metrics else "")
           for x in languages]
  return ("  [" + " | ".join(parts) + "; BLEU above is their mean]") if parts else ""
