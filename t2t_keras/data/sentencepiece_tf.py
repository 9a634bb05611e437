"""A sentencepiece model in TF ops, safe beside others in one SavedModel.

    tok = sentencepiece_tokenizer(proto, tf.string)   # tensorflow_text's tokenizer
    tok.tokenize(tf.constant(["Hello world"]))        # ragged [1, (pieces)]
"""

import hashlib

import tensorflow_text as tf_text


def sentencepiece_tokenizer(proto, out_type):
  """tensorflow_text's SentencepieceTokenizer of the serialized model `proto`, named by
  its content. Its model resource is found by the op's name (with none given, every
  tokenizer's is "SentencepieceOp"), so restored from one SavedModel, two tokenizers of
  different models would both use the first one created (tensorflow/text#1304); one name
  per model keeps them apart."""
  return tf_text.SentencepieceTokenizer(
      model=proto, out_type=out_type,
      name=f"sentencepiece_{hashlib.sha256(proto).hexdigest()[:16]}")
