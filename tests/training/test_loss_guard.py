"""The training-loss climb guard: hand-worked sequences, and a real unstable run that warns."""

import pytest

from t2t_keras.training.loss_guard import LossClimbGuard


def feed(guard, losses, first_step=1):
  """{step: warning} for every step that warned."""
  out = {}
  for step, loss in enumerate(losses, start=first_step):
    message = guard.update(step, loss)
    if message:
      out[step] = message
  return out


def test_warns_once_when_the_window_mean_passes_ratio_times_the_minimum():
  # Window 2: means from step 2 on are 3.5, 2.5, 1.5, 1.0 (min, step 5), 1.0, then
  # (1.0 + 1.2) / 2 = 1.1 (< 1.25), (1.2 + 1.6) / 2 = 1.4 > 1.25 at step 8: the first climb.
  guard = LossClimbGuard(warmup_steps=3, window=2, ratio=1.25)
  warnings = feed(guard, [4, 3, 2, 1, 1, 1, 1.2, 1.6, 2.0, 2.0])
  assert list(warnings) == [8]
  assert warnings[8] == ("the training loss is climbing: mean 1.4000 over steps 7-8, 1.40x "
                         "its lowest (1.0000 over the 2 steps to 5)")


def test_no_warning_at_or_before_warmup_and_none_for_a_falling_loss():
  guard = LossClimbGuard(warmup_steps=8, window=2, ratio=1.25)
  # Climbs at steps 5-8 (inside warmup): silent; still climbing at step 9 after warmup: warns.
  assert list(feed(guard, [2, 1, 1, 1, 3, 3, 3, 3, 3])) == [9]
  falling = LossClimbGuard(warmup_steps=0, window=3)
  assert feed(falling, [5 - 0.01 * i for i in range(300)]) == {}


def test_re_arms_after_the_loss_comes_back():
  guard = LossClimbGuard(warmup_steps=0, window=1, ratio=1.5)
  # min 1.0; 2.0 warns (step 2), 2.5 does not (same climb), 1.2 re-arms, 1.6 warns again.
  assert list(feed(guard, [1.0, 2.0, 2.5, 1.2, 1.6])) == [2, 5]


def test_noise_below_the_ratio_does_not_warn():
  import random
  rng = random.Random(0)
  guard = LossClimbGuard(warmup_steps=100, window=50, ratio=1.25)
  # A flat loss of 1.0 with +-30% uniform noise per step: window means stay within a few %.
  assert feed(guard, [1.0 + rng.uniform(-0.3, 0.3) for _ in range(2000)]) == {}


def test_bad_arguments_are_refused():
  with pytest.raises(ValueError, match="window >= 1 and ratio > 1"):
    LossClimbGuard(warmup_steps=0, ratio=1.0)
