"""The SavedModel's module: the model's variables, its tokenizers, the searches its
`DecodingSpec` builds and the signatures (`export.SIGNATURES`), over `ServingGraph`'s
batching. Only TensorFlow and TF Text ops: the export serves without t2t_keras.
"""

import tensorflow as tf

from t2t_keras.data import languages, vocabulary
from t2t_keras.decoding.attention_maps import teacher_forced_attention
from t2t_keras.exporting.language_ops import tag_in_graph, tokens_in_graph
from t2t_keras.exporting.serving_graph import ServingGraph
from t2t_keras.ids import PAD_ID

MAX_PHRASES, MAX_PHRASE_PIECES = 8, 16  # the constrained signature's static limits


class ServingModule(ServingGraph):
  """A tf.Module with the model's variables, its tokenizer and translate functions.

  `translate`, `nbest`, `sample`, `prefix`, `constrained`, `target_language` and
  `attention` are the SavedModel's signatures (`export.SIGNATURES`); they only use
  TensorFlow and TF Text ops.
  """

  def __init__(self, model, vocab_path, decoding, limits, max_phrases=MAX_PHRASES,
               max_phrase_pieces=MAX_PHRASE_PIECES):
    """`decoding`: the run's `DecodingSpec` (its settings' search and batching are baked
    into the graph, its input limit resolved: `DecodingSpec.for_run`; its problem's
    output constraint goes into the searches, its `serving_preprocess` before them and
    its `serving_postprocess` after them);
    `limits`: its `limits(train_hparams)`, the input and output lengths; `max_phrases`, `max_phrase_pieces`: the `constrained` signature's most phrases
    per sentence and pieces per phrase (static: the search's candidates are counted when
    it is built)."""
    super().__init__(name="translator")
    settings = decoding.settings
    # A problem's source pre-processing in TF ops, inputs [n] -> [n] (a folding problem's
    # case fold), and its output post-processing, (outputs [n], inputs [n]) -> [n]
    # (parsing: trees from linearized outputs; the case restored); None: as given.
    self.preprocess = decoding.hooks.serving_preprocess()
    self.postprocess = decoding.hooks.serving_postprocess()
    # The Keras model is held outside tracking (a Keras 3 Model as a SavedModel
    # child traces a default serving function from its build shapes, which
    # fails for dict inputs); its variables are tracked here instead, so the
    # SavedModel holds them and the functions' captures resolve to them.
    self.__dict__["_model"] = model
    self.model_variables = list(model.variables)
    vocab = vocabulary.load(vocab_path)
    self._set_vocabulary(vocab)
    self.vocab_asset = tf.saved_model.Asset(vocab_path)
    self.info_asset = None
    self.beam_size = int(settings.search.beam_size)
    self.__dict__["limits"] = dict(limits)
    self.max_input_length = limits["max_input_length"]
    if self.max_input_length < 2:
      raise ValueError("the input limit must be resolved (>= 2): DecodingSpec.for_run with "
                       f"the run's hparams; got {self.max_input_length}")
    self.max_positions = limits["max_positions"] or None
    self.extra_length, self.max_decode_length = limits["extra_length"], limits["max_decode_length"]
    self.batch_size = max(1, int(settings.batching.batch_size))
    self.length_bucket = max(1, int(settings.batching.length_bucket))
    self.max_phrases, self.max_phrase_pieces = int(max_phrases), int(max_phrase_pieces)
    # The searches, each asked of the spec (decoding/builder.py): the beam (or greedy)
    # search, with target prefixes, sampling, and terminology constraints.
    self._search = decoding.search_fn(model, vocab)
    self._prefix_search = decoding.search_fn(model, vocab, "prefix")
    self._sample_search = decoding.search_fn(model, vocab, "seed")
    # No constrained signature where the problem constrains outputs itself (parsing) or
    # the export samples.
    self.takes_constraints = (decoding.constraint(vocab) is None
                              and settings.search.sampling_method == "argmax")
    self._constrained_search = None
    if self.takes_constraints:
      self._constrained_search = decoding.search_fn(
          model, vocab, "phrases", (self.max_phrases, self.max_phrase_pieces))
    else:  # no `constrained` function at all: saving would trace it
      self.constrained = None

  def _set_vocabulary(self, vocab):
    """The tokenizers of `vocab` and its target languages."""
    self.tokenizer = vocab.tf_tokenizer()  # source text in, target text out
    target = vocabulary.target_side(vocab)  # target text in (prefixes, phrases, attention)
    self.target_tokenizer = self.tokenizer if target is vocab else target.tf_tokenizer()
    # Source ids -> pieces: the tokenizer's own ids out are the target side's, which are
    # not the source side's where a pair's sides have ids of their own.
    self.source_tokenizer = (vocab.source.tf_tokenizer() if getattr(vocab, "separate", False)
                             else self.tokenizer)
    # A language-token model's (M2M-100, NLLB: {code: token}, the token a forced first
    # target piece), else the `<2xx>` tags' codes; (): one target language.
    self.__dict__["language_tokens"] = languages.language_tokens(vocab)
    self.target_languages = tuple(sorted(self.language_tokens)) or languages.languages_of(vocab)
    if not self.target_languages:  # no `target_language` function: saving would trace it
      self.target_language = None

  @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
  def translate(self, inputs):
    """strings [batch] -> {"outputs": best translation [batch], "scores": [batch],
    "truncated": bool [batch], true where the input lost pieces past max_input_length}."""
    texts, scores, truncated, _ = self._nbest(inputs)
    return {"outputs": texts[:, 0], "scores": scores[:, 0], "truncated": truncated}

  @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
  def nbest(self, inputs):
    """strings [batch] -> {"outputs": [batch, beam], "scores": [batch, beam],
    "truncated": [batch]}, best first. Beams that found no hypothesis are "" with score -1e7.
    """
    texts, scores, truncated, _ = self._nbest(inputs)
    return {"outputs": texts, "scores": scores, "truncated": truncated}

  @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="inputs"),
                                tf.TensorSpec([], tf.int32, name="seed")])
  def sample(self, inputs, seed):
    """strings [batch], int32 seed -> {"outputs": one sampled translation [batch],
    "scores": its log prob / length penalty [batch], "truncated": [batch]}.

    The decode hparams' sampling_temp, sampling_keep_top_k and sampling_keep_top_p;
    a sentence's sample is a function of the seed and the sentence (decoding/sampling.py).
    """
    texts, scores, truncated, _ = self._nbest(
        inputs, lambda batch: self._sample_search(batch, seed), 1)
    return {"outputs": texts[:, 0], "scores": scores[:, 0], "truncated": truncated}

  @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="inputs"),
                                tf.TensorSpec([None], tf.string, name="prefix")])
  def prefix(self, inputs, prefix):
    """strings [batch], target prefixes [batch] ("": none) -> serving_default's outputs,
    each output starting with its prefix (tokenized alone, as `vocab.encode(prefix)`).

    The score is the model's log prob of the whole output, prefix included, / length
    penalty. A sentence's output limit grows to its prefix's length + 1 (the sources are
    padded wider where the buffer needs it); a prefix longer than a fixed limit
    (max_decode_length, learned positions) fails the call with InvalidArgumentError.
    An empty input gives "" whatever its prefix.
    """
    texts, scores, truncated, _ = self._nbest(inputs, self._prefix_search, prefixes=prefix)
    return {"outputs": texts[:, 0], "scores": scores[:, 0], "truncated": truncated}

  @tf.function(autograph=False, input_signature=[
      tf.TensorSpec([None], tf.string, name="inputs"),
      tf.TensorSpec([None, None], tf.string, name="constraints")])
  def constrained(self, inputs, constraints):
    """strings [batch], target phrases [batch, C] ("" pads a shorter list) ->
    serving_default's outputs, each holding every phrase of its row (terminology
    constraints: decoding/lexical.py), and met bool [batch]: false where the best output
    found does not hold them all (they did not fit the output limit). At most
    max_phrases phrases of max_phrase_pieces pieces each (export_info.json), else the
    call fails with InvalidArgumentError."""
    texts, scores, truncated, met = self._nbest(inputs, self._constrained_search,
                                                phrases=constraints)
    return {"outputs": texts[:, 0], "scores": scores[:, 0], "truncated": truncated,
            "met": met}

  @tf.function(autograph=False, input_signature=[
      tf.TensorSpec([None], tf.string, name="inputs"),
      tf.TensorSpec([None], tf.string, name="target_language")])
  def target_language(self, inputs, target_language):
    """strings [batch], language codes [batch] -> serving_default's outputs, each input
    translated into its row's language: its tag put in front (`tag_in_graph`, as
    `languages.with_tag`; a tag the input has is replaced); for a language-token model
    (M2M-100, NLLB: export_info.json's language_tokens) the language's token forced as the
    output's first piece (`prefix`'s search), each input led by its source language's
    token (`__en__ Hello`). A multilingual export's only (export_info.json's
    target_languages); another language, or an input without its source token, fails the
    call with InvalidArgumentError listing them. An empty input is translated from its
    tag alone."""
    if self.language_tokens:
      texts, scores, truncated, _ = self._nbest(
          inputs, self._prefix_search,
          prefixes=tokens_in_graph(inputs, target_language, self.language_tokens))
      return {"outputs": texts[:, 0], "scores": scores[:, 0], "truncated": truncated}
    texts, scores, truncated, _ = self._nbest(
        tag_in_graph(inputs, target_language, self.target_languages))
    return {"outputs": texts[:, 0], "scores": scores[:, 0], "truncated": truncated}

  @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="inputs"),
                                tf.TensorSpec([None], tf.string, name="outputs")])
  def attention(self, inputs, outputs):
    """Teacher-forced encoder-decoder attention of given (input, output) pairs.

    Returns {"source_pieces": string [batch, S], "target_pieces": string [batch, T],
    "weights": float32 [batch, layers, T, S]}, the heads' mean per decoder layer; each
    side ends with EOS ("</s>"), padding is "" with weight 0. The output is
    tokenized as given (for parsing: the post-processed tree's pieces).
    """
    sources, _, _ = self._source_ids(tf.reshape(inputs, [-1]))
    targets, _ = self._with_eos(tf.reshape(outputs, [-1]),
                                self.max_positions or 2 ** 31 - 1, self.target_tokenizer)
    src = sources.to_tensor(PAD_ID)
    tgt = targets.to_tensor(PAD_ID)
    src_valid = tf.sequence_mask(sources.row_lengths(), tf.shape(src)[1])
    tgt_valid = tf.sequence_mask(targets.row_lengths(), tf.shape(tgt)[1])
    layers = teacher_forced_attention(self._model, src, tgt)
    weights = tf.stack([tf.reduce_mean(tf.cast(w, tf.float32), axis=1) for w in layers], 1)
    valid = tf.logical_and(tgt_valid[:, None, :, None], src_valid[:, None, None, :])
    return {"source_pieces": self._pieces(src, src_valid, self.source_tokenizer),
            "target_pieces": self._pieces(tgt, tgt_valid),
            "weights": tf.where(valid, weights, 0.0)}
