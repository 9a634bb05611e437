"""Sequence-level knowledge distillation (Kim & Rush, 2016): a teacher translates the
training sources, its outputs are filtered and become a student's training targets.

    teacher.translate_file(teacher, "train.en", "work")     # resumable; translations + scores
    filtering.filter_pairs("train.en", ..., "filtered", min_score=-1.5, max_ratio=2.0)
    distilled_data.generate("t2t_data/distilled", train=..., dev=..., test=...,
                            vocab_from=teacher)             # translate_parallel_text's data
    cost.model_cost("runs/student")                         # multiply-adds per output token

`python -m t2t_keras.distill STEP` runs each from a shell; recipes/distill.sh chains them
with t2t-trainer, t2t-avg-all and the exports (docs/recipes.md, "Distillation").
Importing this package loads no TensorFlow.
"""
