"""Warns when the training loss climbs after warmup: the sign of a recipe on the edge of stability.

    guard = LossClimbGuard(warmup_steps=400)
    for step, loss in ...:
      message = guard.update(step, loss)   # None, or one warning (once per climb)

The windowed loss is the mean of the last `window` steps' losses. Its running
minimum is kept from the first full window on (warmup included: a post-norm
Transformer at too high a peak often reaches its lowest loss during warmup and
climbs as the learning rate peaks). After warmup, a windowed loss more than
`ratio` times that minimum is a climb; the guard reports it once and re-arms
when the windowed loss falls back within `ratio` of the minimum.
"""

import collections


class LossClimbGuard:
  """Detects a climb of the windowed training loss above its running minimum.

  Args:
    warmup_steps: no warning at or before this step (the loss may still wobble
      while the learning rate rises).
    window: the number of steps one windowed loss averages.
    ratio: a windowed loss above ratio * minimum is a climb.
  """

  def __init__(self, warmup_steps, window=100, ratio=1.25):
    if window < 1 or ratio <= 1.0:
      raise ValueError(f"LossClimbGuard needs window >= 1 and ratio > 1, got {window}, {ratio}")
    self.warmup_steps = warmup_steps
    self.window = window
    self.ratio = ratio
    self._losses = collections.deque(maxlen=window)
    self.min_loss = float("inf")
    self.min_step = None
    self._warned = False

  def update(self, step, loss):
    """Adds step's loss; returns a warning string when a climb starts, else None."""
    self._losses.append(loss)
    if len(self._losses) < self.window:
      return None
    mean = sum(self._losses) / self.window
    if mean < self.min_loss:
      self.min_loss, self.min_step = mean, step
    climbing = mean > self.ratio * self.min_loss
    if not climbing:
      self._warned = False
      return None
    if step <= self.warmup_steps or self._warned:
      return None
    self._warned = True
    return (f"the training loss is climbing: mean {mean:.4f} over steps {step - self.window + 1}"
            f"-{step}, {mean / self.min_loss:.2f}x its lowest ({self.min_loss:.4f} over the "
            f"{self.window} steps to {self.min_step})")
