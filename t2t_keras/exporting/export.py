"""Checkpoint -> SavedModel that translates raw strings (t2t-exporter).

    path = export_model("runs/tiny")                       # runs/tiny/export/<step>
    path = export_model("runs/base", checkpoint_path="runs/base/averaged/ckpt-100000",
                        decode_hparams="beam_size=4,alpha=0.6,extra_length=50")

    # anywhere with tensorflow and tensorflow-text (no t2t_keras):
    import tensorflow as tf, tensorflow_text  # tensorflow_text registers the tokenizer ops
    m = tf.saved_model.load(path)
    m.signatures["serving_default"](inputs=tf.constant(["one hundred"]))
    # -> {"outputs": string [batch], "scores": float32 [batch], "truncated": bool [batch]}
    m.signatures["nbest"](inputs=...)   # -> outputs string [batch, beam], scores [batch, beam],
                                        #    truncated [batch]
    m.signatures["attention"](inputs=..., outputs=...)  # the encoder-decoder attention of a
                                        # given translation (t2t-serve's web page draws it)
    m.signatures["sample"](inputs=..., seed=tf.constant(7))  # one sampled translation each
                                        # (sampling_temp / _keep_top_k / _keep_top_p of the
                                        # decode hparams), as serving_default's outputs
    m.signatures["prefix"](inputs=..., prefix=tf.constant(["Ein Mann", ""]))  # each output
                                        # starts with its target prefix ("": none), as
                                        # serving_default's outputs
    m.signatures["target_language"](inputs=..., target_language=tf.constant(["fr", "de"]))
                                        # a multilingual model's (its vocabulary has <2xx>
                                        # tags): each input in its row's language, as
                                        # serving_default's outputs

Everything happens in the graph: UTF-8 repair (invalid bytes become U+FFFD),
sentencepiece tokenization (tensorflow_text), truncation to the training
max_length (reported: `truncated` is true for such an input), EOS, length-sorted batches of at most `batch_size` padded to
`length_bucket` multiples (few XLA programs), beam search with the decode
hparams, detokenization, and the problem's post-processing where it has one
(parsing: well-formed trees over the input words, `exporting/tree_ops.py`). The
problem's `decode_defaults` (parsing: beam 21, alpha 0.3, input + 300) apply
before the given decode hparams. Empty inputs (no tokens) give "" with score 0.

Layout (TF Serving's versioned directories, written to a temporary directory
and renamed, so a server polling export_dir never sees a partial version):

    export_dir/<version>/saved_model.pb, variables/,
        assets/vocab.model         the run's vocabulary (sentencepiece, or tensor2tensor's
                                   subwords); the graph's tokenizer holds it too (an op
                                   attribute, or constants and a lookup table)
        assets/export_info.json    checkpoint, hparams and decode hparams used (and a
                                   multilingual model's target_languages)
"""

import json
import os
import re
import shutil
import time

import tensorflow as tf

from t2t_keras import __version__, fileio, runs
from t2t_keras.data import languages, vocabulary
from t2t_keras.decoding import lexical
from t2t_keras.decoding import search as search_lib
from t2t_keras.decoding.attention_maps import teacher_forced_attention
from t2t_keras.decoding.search_common import NEG_INF, output_limit, position_cap, prefix_width
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.decoding.sharding import shard_search_fn
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID, PAD_ID

MAX_PHRASES, MAX_PHRASE_PIECES = 8, 16  # the constrained signature's static limits
# data/languages.py's leading tag in RE2: its `\s` is Python's str.isspace(), listed here.
_SPACE = (r"[\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}"
          r"\x{202f}\x{205f}\x{3000}]")
_LEADING_TAG = rf"^{_SPACE}*(?:<2{languages.CODE}>(?:{_SPACE}+|$))?"


def _next_power_of_two(n):
  """The smallest power of two >= n (int32 scalar tensor, n >= 1), in exact integers."""
  powers = tf.bitwise.left_shift(1, tf.range(31))
  return tf.reduce_min(tf.where(powers >= n, powers, powers[-1]))


def _sampling_search(model, search_settings, constraint, signature):
  """The `sample` signature's search: one over the whole batch (the seed is a second
  input, which sharding lacks), with the decode hparams' sampling_* settings."""
  options = search_lib.SearchOptions.from_settings(
      search_settings.replace(sampling_method="random", beam_size=1))

  def sample(ids, seed):
    seeded = options.replace(sampling=options.sampling._replace(seed=seed))
    return search_lib.search(model, ids, seeded, constraint)

  return tf.function(sample, jit_compile=bool(search_settings.jit), autograph=False,
                     input_signature=signature + [tf.TensorSpec([], tf.int32)])


def tag_in_graph(inputs, target_language, known):
  """`languages.with_tag` in TF ops: strings [n], language codes [n] -> each input with its
  language's tag in front ("<2fr> ..."; a leading tag already there is replaced, invalid
  UTF-8 becomes U+FFFD). InvalidArgumentError where the sizes differ or a language is not
  one of `known` (the message lists them, the unknown ones follow it)."""
  inputs, target_language = tf.reshape(inputs, [-1]), tf.reshape(target_language, [-1])
  same = tf.debugging.assert_equal(
      tf.size(target_language), tf.size(inputs),
      message="'target_language' needs one language per input")
  with tf.control_dependencies([same]):
    valid = tf.reduce_any(tf.equal(target_language[:, None], tf.constant(list(known))[None]),
                          axis=1)
  check = tf.debugging.Assert(tf.reduce_all(valid), [
      f"unknown target language; this model knows {', '.join(known)}",
      tf.boolean_mask(target_language, tf.logical_not(valid))])
  text = tf.strings.unicode_transcode(inputs, "UTF-8", "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)
  rest = tf.strings.regex_replace(tf.strings.regex_replace(text, _LEADING_TAG, ""),
                                  f"{_SPACE}+$", "")
  tags = "<2" + target_language + ">"
  with tf.control_dependencies([check]):
    return tf.where(tf.equal(rest, ""), tags, tags + " " + rest)


def tokens_in_graph(inputs, target_language, tokens):
  """`languages.frame_with_tokens`'s prefixes in TF ops: strings [n], language codes [n] ->
  each code's token [n] ({code: token} `tokens`). InvalidArgumentError where the sizes
  differ, a code is unknown (the message lists the known ones) or an input does not start
  with a source language's token."""
  inputs, target_language = tf.reshape(inputs, [-1]), tf.reshape(target_language, [-1])
  codes = sorted(tokens)
  same = tf.debugging.assert_equal(
      tf.size(target_language), tf.size(inputs),
      message="'target_language' needs one language per input")
  with tf.control_dependencies([same]):
    match = tf.equal(target_language[:, None], tf.constant(codes)[None])
  valid = tf.reduce_any(match, axis=1)
  known = tf.strings.regex_full_match(
      inputs, "(" + "|".join(re.escape(tokens[c]) for c in codes) + ")( .*)?")
  checks = [tf.debugging.Assert(tf.reduce_all(valid), [
                f"unknown target language; this model knows {', '.join(codes)}",
                tf.boolean_mask(target_language, tf.logical_not(valid))]),
            tf.debugging.Assert(tf.reduce_all(known), [
                "each input starts with the token of its source language (one of "
                f"{', '.join(tokens[c] for c in codes)}); these do not:",
                tf.boolean_mask(inputs, tf.logical_not(known))])]
  with tf.control_dependencies(checks):
    return tf.gather(tf.constant([tokens[c] for c in codes]),
                     tf.argmax(tf.cast(match, tf.int32), axis=1))


class ServingModule(tf.Module):
  """A tf.Module with the model's variables, its tokenizer and translate functions.

  `translate`, `nbest`, `sample`, `prefix`, `constrained`, `target_language` and
  `attention` are the SavedModel's signatures (SIGNATURES below); they only use
  TensorFlow and TF Text ops.
  """

  def __init__(self, model, vocab_path, settings, postprocess=None,
               constraint=None, max_positions=None, max_phrases=MAX_PHRASES,
               max_phrase_pieces=MAX_PHRASE_PIECES):
    """`settings`: a `DecodeSettings` (its search and batching are baked into the graph;
    batching.max_input_size, the input limit, resolved: `spec.DecodingSpec.for_run`);
    `postprocess`: see below; `constraint`: the problem's output constraint for the
    search (`decoding/constraints.py`), or None; `max_positions`: the most target
    positions the model has (learned positions), or None; `max_phrases`,
    `max_phrase_pieces`: the `constrained` signature's most phrases per sentence and
    pieces per phrase (static: the search's candidates are counted when it is built)."""
    super().__init__(name="translator")
    # A problem's output post-processing in TF ops, (outputs [n], inputs [n]) -> [n]
    # (parsing: trees from linearized outputs); None: outputs as decoded.
    self.postprocess = postprocess
    search_settings = settings.search
    # The Keras model is held outside tracking (a Keras 3 Model as a SavedModel
    # child traces a default serving function from its build shapes, which
    # fails for dict inputs); its variables are tracked here instead, so the
    # SavedModel holds them and the functions' captures resolve to them.
    self.__dict__["_model"] = model
    self.model_variables = list(model.variables)
    vocab = vocabulary.load(vocab_path)
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
    self.vocab_asset = tf.saved_model.Asset(vocab_path)
    self.info_asset = None
    self.beam_size = int(search_settings.beam_size)
    self.max_input_length = int(settings.batching.max_input_size)
    if self.max_input_length < 2:
      raise ValueError("settings.batching.max_input_size must be resolved to the input "
                       f"limit (>= 2), got {self.max_input_length}")
    self.max_positions = max_positions
    self.batch_size = max(1, int(settings.batching.batch_size))
    self.length_bucket = max(1, int(settings.batching.length_bucket))
    self.extra_length = int(search_settings.extra_length)
    self.max_decode_length = int(search_settings.max_decode_length or 0)

    signature = self._build_searches(model, search_settings, constraint)
    self.max_phrases, self.max_phrase_pieces = int(max_phrases), int(max_phrase_pieces)
    # No constrained signature where the problem constrains outputs itself (parsing) or
    # the export samples.
    self.takes_constraints = constraint is None and search_settings.sampling_method == "argmax"
    self._constrained_search = None
    if self.takes_constraints:
      self._constrained_search = self._lexical_search(model, search_settings, signature)
    else:  # no `constrained` function at all: saving would trace it
      self.constrained = None

  def _build_searches(self, model, search_settings, constraint):
    """The beam (or greedy) search, its prefix variant and sampling, each a sharded
    tf.function over int32 ids [batch, length]; returns their input signature."""
    search = search_lib.from_settings(model, search_settings, constraint)
    signature = [tf.TensorSpec([None, None], tf.int32)]
    # The batch as concurrent searches over its slices (decoding/sharding.py),
    # their number decided where the model is exported.
    self._search = shard_search_fn(
        tf.function(search, jit_compile=bool(search_settings.jit), autograph=False,
                    input_signature=signature), search_settings.search_shards, signature)
    # The same search with target prefixes, int32 [batch, P] 0-padded, a second input.
    self._prefix_search = shard_search_fn(
        tf.function(lambda ids, prefix: search(ids, prefix=prefix),
                    jit_compile=bool(search_settings.jit), autograph=False,
                    input_signature=signature * 2), search_settings.search_shards,
        signature * 2)
    self._sample_search = _sampling_search(model, search_settings, constraint, signature)
    return signature

  def _lexical_search(self, model, search_settings, signature):
    """Terminology constraints' search (decoding/lexical.py), sharded: the sources, each
    sentence's phrase pieces [rows, C, T] and their lengths [rows, C]; KMP's failure
    links are computed in the graph."""
    phrase_signature = signature + [
        tf.TensorSpec([None, self.max_phrases, self.max_phrase_pieces], tf.int32),
        tf.TensorSpec([None, self.max_phrases], tf.int32)]
    constrained = search_lib.constrained_from_settings(model, search_settings)

    def lexical_search(ids, tokens, lengths):
      return constrained(ids, tokens, lengths, lexical.failure_links(tokens, lengths))

    return shard_search_fn(
        tf.function(lexical_search, jit_compile=bool(search_settings.jit), autograph=False,
                    input_signature=phrase_signature), search_settings.search_shards,
        phrase_signature)

  # --- pieces of the graph -------------------------------------------------

  def _with_eos(self, inputs, limit, tokenizer=None):
    """strings [n] -> (ragged ids [n, (len)] with EOS, at most `limit` ids; bool [n] cut),
    tokenized as source text (or by `tokenizer`)."""
    text = tf.strings.unicode_transcode(inputs, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)
    tokens = (tokenizer or self.tokenizer).tokenize(text)
    cut = tokens.row_lengths() > limit - 1
    tokens = tokens[:, :limit - 1]  # room for EOS
    eos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(inputs)[0], 1], EOS_ID))
    return tf.concat([tokens, eos], axis=1), cut

  def _source_ids(self, inputs):
    """strings [n] -> (ragged ids [n, (len)] with EOS, bool [n] non-empty, bool [n] truncated)."""
    sources, truncated = self._with_eos(inputs, self.max_input_length)
    return sources, sources.row_lengths() > 1, truncated

  def _detokenize(self, ids, beam):
    """ids int32 [n, beam, len] (beam_search output) -> strings [n, beam].

    As `SubwordVocabulary.decode`: stop at the first EOS, drop PAD.
    """
    before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1), 0)
    keep = tf.logical_and(before_eos, tf.not_equal(ids, PAD_ID))
    length = tf.shape(ids)[-1]
    flat = tf.ragged.boolean_mask(tf.reshape(ids, [-1, length]), tf.reshape(keep, [-1, length]))
    return tf.reshape(self.tokenizer.detokenize(flat), [-1, beam])

  def _translate_sources(self, sources, search, beam, prefixes=None, row_inputs=()):
    """Ragged ids [n, (len)] (n > 0) -> (strings [n, beam], scores [n, beam], met bool [n])
    of `search` (int32 [rows, width] -> ids [rows, beam, len], scores [rows, beam] and,
    for a constrained search, met [rows]; met is all true for the others).

    Longest first, in chunks of at most batch_size rows (rounded up to a power
    of two, padded by repeating the last row), each padded to a multiple of
    length_bucket tokens, as `translate.translate_ids` batches. `prefixes`: ragged
    target ids [n, (P)], given to `search` as a second input, int32 [rows, P] 0-padded,
    with the sources widened where needed so that the output buffer holds them
    (`translate.source_width`). `row_inputs`: dense tensors [n, ...] given to `search`
    after the sources, a chunk's rows each (the constrained search's phrases).
    """
    n = sources.nrows(out_type=tf.int32)
    lengths = tf.cast(sources.row_lengths(), tf.int32)
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    sources = tf.gather(sources, order)
    lengths = tf.gather(lengths, order)
    row_inputs = tuple(tf.gather(x, order) for x in row_inputs)
    if prefixes is not None:
      prefixes = tf.gather(prefixes, order)
      prefix_lengths = tf.cast(prefixes.row_lengths(), tf.int32)
    rows = tf.minimum(_next_power_of_two(n), self.batch_size)
    chunks = (n + rows - 1) // rows

    def body(c, texts, scores, mets):
      index = tf.minimum(c * rows + tf.range(rows), n - 1)  # spare rows repeat the last
      width = tf.reduce_max(tf.gather(lengths, index))
      extra = tuple(tf.gather(x, index) for x in row_inputs)
      if prefixes is not None:
        longest = tf.reduce_max(tf.gather(prefix_lengths, index))
        width = self._check_prefix_fits(longest, width)
        prefix_width = (tf.maximum(longest, 1) + self.length_bucket - 1) // \
            self.length_bucket * self.length_bucket
        extra = (tf.gather(prefixes, index).to_tensor(
            default_value=PAD_ID, shape=tf.stack([rows, prefix_width])),)
      width = (width + self.length_bucket - 1) // self.length_bucket * self.length_bucket
      batch = tf.gather(sources, index).to_tensor(default_value=PAD_ID,
                                                  shape=tf.stack([rows, width]))
      out = search(batch, *extra)
      met = out[2] if len(out) > 2 else tf.ones([rows], tf.bool)
      return (c + 1, texts.write(c, self._detokenize(out[0], beam)), scores.write(c, out[1]),
              mets.write(c, met))

    _, texts, scores, mets = tf.while_loop(
        lambda c, *_: c < chunks, body,
        (tf.constant(0), tf.TensorArray(tf.string, size=chunks, element_shape=[None, beam]),
         tf.TensorArray(tf.float32, size=chunks, element_shape=[None, beam]),
         tf.TensorArray(tf.bool, size=chunks, element_shape=[None])),
        parallel_iterations=1)
    texts = tf.reshape(texts.stack(), [-1, beam])[:n]
    scores = tf.reshape(scores.stack(), [-1, beam])[:n]
    mets = tf.reshape(mets.stack(), [-1])[:n]
    unsort = tf.math.invert_permutation(order)
    return tf.gather(texts, unsort), tf.gather(scores, unsort), tf.gather(mets, unsort)

  def _check_prefix_fits(self, longest, width):
    """The source width (int32 scalar) whose output buffer holds `longest` prefix ids, as
    `translate.source_width`; InvalidArgumentError where a fixed limit cannot."""
    width = prefix_width(width, longest, self.extra_length, self.max_decode_length)
    limit = output_limit(width, self.extra_length, self.max_decode_length, self.max_positions)
    check = tf.debugging.assert_less_equal(
        longest, limit, message="a target prefix is longer than the output limit "
                                "(max_decode_length, or the model's max_positions)")
    with tf.control_dependencies([check]):
      return tf.identity(width)

  def _nbest(self, inputs, search=None, beam=None, prefixes=None, phrases=None):
    """strings [batch] -> (strings [batch, beam], scores [batch, beam], truncated [batch],
    met [batch]), by beam search (default) or another `search` giving `beam` outputs a
    sentence; `prefixes`: target text [batch] with which each output starts ("": none);
    `phrases`: target phrases [batch, C] each output must hold ("": none), for
    the constrained search (met: whether the outputs hold them; true for the others)."""
    inputs = tf.reshape(inputs, [-1])
    sources, nonempty, truncated = self._source_ids(inputs)
    kept = tf.cast(tf.where(nonempty)[:, 0], tf.int32)
    n = tf.size(kept)
    search, beam = search or self._search, beam or self.beam_size
    if prefixes is not None:
      prefixes = tf.reshape(prefixes, [-1])
      same = tf.debugging.assert_equal(
          tf.size(prefixes), tf.size(inputs),
          message="'prefix' needs one target prefix per input ('' for none)")
      with tf.control_dependencies([same]):
        prefixes = self._tokenize(prefixes)
      prefixes = tf.gather(prefixes, kept)
    row_inputs, no_phrases = (), tf.ones_like(nonempty)
    if phrases is not None:
      tokens, lengths = self._phrase_pieces(phrases, tf.size(inputs))
      row_inputs = (tf.gather(tokens, kept), tf.gather(lengths, kept))
      no_phrases = tf.reduce_all(tf.equal(lengths, 0), axis=1)

    def translate():
      return self._translate_sources(tf.gather(sources, kept), search, beam, prefixes,
                                     row_inputs)

    def nothing():
      return (tf.zeros([0, beam], tf.string), tf.zeros([0, beam], tf.float32),
              tf.zeros([0], tf.bool))

    texts, scores, met = tf.cond(n > 0, translate, nothing)
    # Back to the input rows; empty inputs get "" (score 0, NEG_INF for beams > 1),
    # met where they had no phrases.
    slot = tf.where(nonempty, tf.cumsum(tf.cast(nonempty, tf.int32)) - 1, n)
    empty_scores = tf.concat([tf.zeros([1, 1]), tf.fill([1, beam - 1], NEG_INF)], axis=1)
    texts = tf.gather(tf.concat([texts, tf.fill([1, beam], "")], 0), slot)
    scores = tf.gather(tf.concat([scores, empty_scores], 0), slot)
    met = tf.where(nonempty, tf.gather(tf.concat([met, [True]], 0), slot), no_phrases)
    if self.postprocess is not None:
      texts = tf.reshape(self.postprocess(tf.reshape(texts, [-1]), tf.repeat(inputs, beam)),
                         [-1, beam])
    return texts, scores, truncated, met

  def _tokenize(self, texts):
    """Target text strings [n] -> ragged pieces [n, (len)], invalid UTF-8 replaced by U+FFFD."""
    return self.target_tokenizer.tokenize(tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD))

  def _phrase_pieces(self, phrases, batch):
    """Phrases string [batch, C_in] ("": none) -> (pieces int32 [batch, max_phrases,
    max_phrase_pieces], lengths int32 [batch, max_phrases]); InvalidArgumentError for a
    batch size other than the inputs', more phrases or longer ones than those limits."""
    c_in = tf.shape(phrases)[1]
    checks = [
        tf.debugging.assert_equal(tf.shape(phrases)[0], batch, message=(
            "'constraints' needs one list of phrases per input")),
        tf.debugging.assert_less_equal(c_in, self.max_phrases, message=(
            f"more terminology constraints for a sentence than the limit set at export, "
            f"{self.max_phrases}"))]
    with tf.control_dependencies(checks):
      pieces = self._tokenize(tf.reshape(phrases, [-1]))
    lengths = tf.cast(pieces.row_lengths(), tf.int32)
    fits = tf.debugging.assert_less_equal(
        tf.reduce_max(tf.concat([lengths, [0]], 0)), self.max_phrase_pieces, message=(
            f"a terminology constraint longer than the limit set at export, "
            f"{self.max_phrase_pieces} pieces"))
    with tf.control_dependencies([fits]):
      tokens = pieces.to_tensor(PAD_ID, shape=tf.stack([tf.size(lengths),
                                                        self.max_phrase_pieces]))
    pad = [[0, 0], [0, self.max_phrases - c_in]]
    tokens = tf.pad(tf.reshape(tokens, [batch, c_in, self.max_phrase_pieces]), pad + [[0, 0]])
    return tokens, tf.pad(tf.reshape(lengths, [batch, c_in]), pad)

  def _pieces(self, ids, valid, tokenizer=None):
    """ids int32 [n, len], bool [n, len] -> the sentencepiece pieces of the target side (or
    of `tokenizer`'s ids), "" where not valid."""
    return tf.where(valid, (tokenizer or self.tokenizer).id_to_string(ids), "")

  # --- signatures -----------------------------------------------------------

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


def checkpoint_step(path):
  """The step in a checkpoint prefix ".../ckpt-1234" (None when the name has none)."""
  match = re.search(r"-(\d+)$", os.path.basename(path or ""))
  return int(match.group(1)) if match else None


def export_model(output_dir, export_dir=None, checkpoint_path=None, decode_hparams="",
                 max_input_length=None, version=None, overwrite=False, log=print):
  """Exports a training run's checkpoint as a versioned SavedModel.

  Load the run, resolve the decoding and the input limit, save the ServingModule
  to a temporary directory beside the target, then move it into place.

  Args:
    output_dir: the trainer's output_dir (hparams.json, run.json, vocab.model, ckpts);
      several, comma-separated, export one ensemble (`models/ensemble.py`; needs
      export_dir; the version defaults to the Unix time).
    export_dir: parent of the versioned directories (default output_dir/export).
    checkpoint_path: a checkpoint prefix (e.g. t2t-avg-all's), one per run for an
      ensemble (comma-separated); default the latest.
    decode_hparams: t2t's --decode_hparams overrides (string, `settings.parse_decode_hparams`)
      or a `DecodeSettings`: its search (beam_size, alpha, extra_length, max_decode_length,
      stop_early, jit, search_shards, sampling_*) and batching (batch_size: rows per beam
      search, length_bucket).
    max_input_length: inputs are truncated to this many ids, EOS included
      (default: the training hparams' max_length; longer pairs never trained).
    version: the version directory's number (default: the checkpoint's step,
      else the Unix time).
    overwrite: replace an existing export_dir/<version> (else FileExistsError).
    log: progress messages (None: silent).
  Returns:
    The path of the new export_dir/<version>.
  """
  log = log or (lambda *_: None)
  ensemble = runs.is_ensemble(output_dir)
  if ensemble and not export_dir:
    raise InputError(f"--output_dir={output_dir} names an ensemble: give --export_dir")
  model, vocab, hparams, info, ckpt = runs.load(output_dir, checkpoint_path)
  decoding = DecodingSpec.for_run(info.get("problem"), decode_hparams, hparams,
                                  max_input_length)
  settings = decoding.settings
  export_dir = export_dir or os.path.join(output_dir, "export")
  version, final = _version_dir(export_dir, version, None if ensemble else ckpt, overwrite)
  # Saved beside the target where that is a local disk (then renamed into place at once),
  # else in a local temporary directory, then copied up.
  tmp = fileio.private_temporary_dir(None if fileio.is_remote(export_dir) else export_dir,
                                     f".tmp-{int(version)}-")
  try:
    translator = ServingModule(model, info["vocab_path"], settings,
                               postprocess=decoding.hooks.serving_postprocess(),
                               constraint=decoding.constraint(vocab),
                               max_positions=position_cap(hparams))
    export_info = _export_info(translator, ckpt, version, info, settings, hparams)
    _save(translator, export_info, tmp)
    _move_into_place(tmp, final, export_dir, version)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  log(f"exported {ckpt} to {final}")
  return final


SIGNATURES = {
    "serving_default": "inputs string [batch] -> outputs string [batch], "
                       "scores float32 [batch], truncated bool [batch]",
    "nbest": "inputs string [batch] -> outputs string [batch, beam], "
             "scores float32 [batch, beam], truncated bool [batch]",
    "attention": "inputs string [batch], outputs string [batch] -> "
                 "source_pieces string [batch, S], target_pieces string [batch, T], "
                 "weights float32 [batch, layers, T, S]",
    "sample": "inputs string [batch], seed int32 [] -> outputs string [batch], "
              "scores float32 [batch], truncated bool [batch]",
    "prefix": "inputs string [batch], prefix string [batch] -> outputs string [batch] "
              "(each starting with its prefix), scores float32 [batch], truncated bool [batch]",
    "constrained": "inputs string [batch], constraints string [batch, C] ('' pads) -> "
                   "outputs string [batch] (each holding its row's phrases), scores float32 "
                   "[batch], truncated bool [batch], met bool [batch]",
    "target_language": "inputs string [batch], target_language string [batch] -> outputs "
                       "string [batch] (each in its row's language), scores float32 [batch], "
                       "truncated bool [batch]"}


def _has_signature(translator, name):
  """Whether the translator's export has signature `name`: `constrained` where it takes
  constraints, `target_language` where its vocabulary has target-language tags."""
  if name == "constrained":
    return translator.takes_constraints
  if name == "target_language":
    return bool(translator.target_languages)
  return True


def _export_info(translator, ckpt, version, info, settings, hparams):
  """assets/export_info.json's content: checkpoint, version, problem, limits, the decode
  hparams and hparams, the signatures this export has, a multilingual model's target
  languages, and the t2t-keras versions that exported it and that last wrote its run."""
  export_info = {
      "checkpoint_path": ",".join(fileio.abspath(c) for c in ckpt.split(",")),
      "version": int(version),
      "t2t_keras_version": __version__,
      "run_t2t_keras_version": info.get("t2t_keras_version"),
      "problem": info.get("problem"), "vocab_size": info.get("vocab_size"),
      "max_input_length": translator.max_input_length,
      "decode_hparams": settings.values(), "hparams": hparams.values(),
      "signatures": {k: v for k, v in SIGNATURES.items() if _has_signature(translator, k)},
      "constraint_limits": {"max_phrases": translator.max_phrases,
                            "max_phrase_pieces": translator.max_phrase_pieces}}
  if translator.target_languages:
    export_info["target_languages"] = list(translator.target_languages)
  if translator.language_tokens:
    export_info["language_tokens"] = dict(sorted(translator.language_tokens.items()))
  return export_info


def _version_dir(export_dir, version, checkpoint, overwrite):
  """(version, export_dir/<version>): the version given, else the checkpoint's step, else
  the Unix time; FileExistsError for an existing one without `overwrite`."""
  if version is None:
    version = checkpoint_step(checkpoint) if checkpoint else None
    if version is None:
      version = int(time.time())
  final = os.path.join(export_dir, str(int(version)))
  _remove_killed_exports(export_dir, version)
  if fileio.exists(final) and not overwrite:
    raise FileExistsError(f"{final} exists: pass overwrite=True (--overwrite) or another "
                          f"version (--export_version)")
  fileio.makedirs(export_dir)
  return version, final


def _remove_killed_exports(export_dir, version):
  """Removes the temporary directories of this version that a killed export left (its
  `.tmp-<version>-*` save, an overwrite's `.old-<version>-*`): the next run of the same
  command cleans up after it (`fileio.remove_dead_temporaries`)."""
  local = not fileio.is_remote(export_dir)
  fileio.remove_dead_temporaries(export_dir if local else None, f".tmp-{int(version)}-")
  if local:
    fileio.remove_dead_temporaries(export_dir, f".old-{int(version)}-")


def _save(translator, export_info, directory):
  """tf.saved_model.save of the translator's signatures, export_info.json in assets/."""
  info_path = os.path.join(directory, "export_info.json")  # saved into assets/, then removed
  with open(info_path, "w") as f:
    json.dump(export_info, f, indent=2, default=str)
  translator.info_asset = tf.saved_model.Asset(info_path)
  # The tf.functions themselves, not their concrete functions: save traces them in its
  # own context (a function traced outside it is traced again inside, twice the time).
  signatures = {"serving_default": translator.translate, "nbest": translator.nbest,
                "attention": translator.attention, "sample": translator.sample,
                "prefix": translator.prefix}
  for name in ("constrained", "target_language"):
    if _has_signature(translator, name):
      signatures[name] = getattr(translator, name)
  # Without gradient functions: a served model is never differentiated. The package's
  # layers put no custom-gradient op in these graphs (they take custom gradients only when
  # training; a test reads the SavedModel for one), so a load has none to warn about; a
  # user's layer that does is saved too, with a warning at load instead of a failed save.
  tf.saved_model.save(translator, directory, signatures=signatures,
                      options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
  os.remove(info_path)
  os.chmod(directory, 0o755)  # mkdtemp makes it 0700


def _move_into_place(tmp, final, export_dir, version):
  """Renames the local directory tmp to final; an existing final is moved aside first,
  then removed. A remote final (an object store has no directory rename) is replaced by
  a copy of tmp, file by file."""
  if fileio.is_remote(final):
    fileio.rmtree(final)
    fileio.upload_tree(tmp, final)
    shutil.rmtree(tmp, ignore_errors=True)
  elif os.path.exists(final):
    old = fileio.private_temporary_dir(export_dir, f".old-{int(version)}-")
    os.rename(final, os.path.join(old, "v"))
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
  else:
    os.rename(tmp, final)
