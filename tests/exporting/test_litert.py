"""LiteRT export: the search inside model.tflite decodes as our TensorFlow search does.

The models are built, not trained (`random_runs.random_run`: weights from a seeded NumPy
generator, the same on every CPU, outputs that vary with the input and end at varied
lengths), so each verdict is a rule that holds for any model rather than a rate measured
on one CPU. The LiteRT graph is our own search (`decoding/search.py`) lowered to LiteRT's
builtin ops and run by LiteRT's kernels (XNNPACK's matmuls), so the same ids are expected
wherever no decision was a near-tie: TOL = 1e-4 on scores, as test_ctranslate2.py argues
(float32 log-softmax over logits below about 30, at most 60 steps). Where the ids differ,
both searches must have found hypotheses scoring within TOL of each other.
"""

import json
import os
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("ai_edge_litert",
                    reason="ai-edge-litert is not installed (pip install 't2t-keras[litert]')")

from binaries import run_binary  # noqa: E402
from conftest import TINY_SENTENCES, make_two_checkpoint_run  # noqa: E402
import random_runs  # noqa: E402
from t2t_keras import runs  # noqa: E402
from t2t_keras.bin import decoder as decoder_bin  # noqa: E402
from t2t_keras.bin import exporter as exporter_bin  # noqa: E402
from t2t_keras.decoding import translate  # noqa: E402
from t2t_keras.decoding.settings import parse_decode_hparams  # noqa: E402
from t2t_keras.errors import InputError  # noqa: E402
from t2t_keras.exporting import litert, litert_translate  # noqa: E402
from t2t_keras.ids import EOS_ID, PAD_ID  # noqa: E402

pytestmark = pytest.mark.heavy  # conversions and searches: the full suite only

TOL = 1e-4
INPUTS = 200
SCRIPT = litert_translate.__file__
# name: (the model of random_runs.NUMBERS_MODELS, decode hparams): test_ctranslate2.py's models
# (their gains make outputs vary and end).
MODELS = {
    "beam": ("post_norm_sinusoids", "beam_size=4,alpha=0.6"),
    "greedy": ("pre_norm_learned_small_heads", "beam_size=1"),
}


@pytest.fixture(scope="module")
def dev_inputs():
  return random_runs.dev_inputs(INPUTS)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """{name: (run_dir, litert_dir float32)} of MODELS (the session's shared runs,
  random_runs.shared_models, converted into a directory of this module's); the beam model
  also in float16 and int8 ({name}_float16, {name}_int8)."""
  shared = random_runs.shared_models(tmp_path_factory)
  base = tmp_path_factory.mktemp("litert")
  out = {}
  for name, (model, decode) in MODELS.items():
    out[name] = shared[model], litert.convert_run(shared[model], str(base / name),
                                                  decode_hparams=decode, log=None)
  run_dir = out["beam"][0]
  for quantization in ("float16", "int8"):
    out[f"beam_{quantization}"] = run_dir, litert.convert_run(
        run_dir, str(base / f"beam_{quantization}"), quantization=quantization,
        decode_hparams=MODELS["beam"][-1], log=None)
  return out


class Comparison:
  """Our search (t2t-decoder's path: translate_lines, `ours` [(best ids, score)] from
  random_runs.shared_decodings) against the LiteRT model's on the same inputs: `same`
  [(index, |score difference|)] where the best ids are equal, `differ` [(index, our score,
  its score)] elsewhere."""

  def __init__(self, run_dir, litert_dir, inputs, ours):
    run = runs.load(run_dir)
    self.translator = litert_translate.LiteRTTranslator(litert_dir)
    sources = [[run.vocab.id_to_piece(i) for i in run.vocab.encode(s)] for s in inputs]
    self.theirs = self.translator.translate_pieces(sources)
    self.same, self.differ = [], []
    for i, ((ids, score), t) in enumerate(zip(ours, self.theirs)):
      if list(ids) == [run.vocab.piece_to_id(p) for p in t[0][0]]:
        self.same.append((i, abs(score - t[0][1])))
      else:
        self.differ.append((i, score, t[0][1]))


@pytest.fixture(scope="module")
def comparisons(built, dev_inputs, tmp_path_factory):
  """{name: Comparison} over the first INPUTS of the dev sources random_runs.shared_decodings
  translated."""
  return {name: Comparison(*built[name], dev_inputs, random_runs.shared_decodings(
      tmp_path_factory, model, decode)[:INPUTS]) for name, (model, decode) in MODELS.items()}


@pytest.mark.parametrize("name", ["beam", "greedy", "beam_float16", "beam_int8"])
def test_the_model_holds_builtin_ops_only(built, name):
  """A device runtime loads only LiteRT's builtin ops: no custom or Flex op; the search is
  in the graph (a WHILE loop; beam search's TOPK_V2)."""
  with open(os.path.join(built[name][1], litert.MODEL_FILE), "rb") as f:
    ops = litert.operators(f.read())
  assert ops and all(builtin for _, builtin in ops), [op for op, b in ops if not b]
  names = {op for op, _ in ops}
  assert "WHILE" in names
  assert ("TOPK_V2" in names) == name.startswith("beam")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_float32_decodes_as_our_search(comparisons, name):
  """The same ids and scores within TOL, except where both searches found hypotheses of
  equal score (a near-tie decided either way)."""
  c = comparisons[name]
  assert len(c.same) + len(c.differ) == INPUTS
  assert all(d <= TOL for _, d in c.same), max(d for _, d in c.same)
  assert all(abs(ours - theirs) <= TOL for _, ours, theirs in c.differ), c.differ
  assert len(c.same) >= INPUTS // 2, (len(c.same), c.differ[:5])  # not all ties


def test_a_new_translators_first_search_equals_its_later_ones(tmp_path):
  """A new interpreter's first search with LiteRT's default delegate (XNNPACK) could
  compute wrong values: about half the first calls of this greedy model chose other
  outputs than its every later call and than the builtin kernels (found by
  benchmarks/kill_loop.py; `LiteRTTranslator` now runs a throwaway search at load).
  Twelve new translators, the heap moved between them: each one's first translations
  equal the later ones'."""
  run_dir = make_two_checkpoint_run(tmp_path, num_encoder_layers=1, num_decoder_layers=1)
  model_dir = litert.convert_run(run_dir, decode_hparams="beam_size=1", log=None)
  firsts, held, translator = [], [], None
  for n in range(12):
    held.append([np.full(n * 53 + 11, n, np.uint8) for _ in range(n % 7 + 1)])
    translator = None  # its memory for the next one's buffers
    translator = litert_translate.LiteRTTranslator(model_dir, num_threads=1)
    firsts.append(translator.translate(TINY_SENTENCES[:1]))
  later = translator.translate(TINY_SENTENCES[:1])
  assert [n for n, first in enumerate(firsts) if first != later] == [], later


def test_the_models_vary_and_end(comparisons):
  """The comparison means something (test_ctranslate2.py's bounds, over 200 inputs): many
  distinct outputs, most ending well before the limit (input + 50), at varied lengths."""
  for c in comparisons.values():
    lengths = [len(hyps[0][0]) for hyps in c.theirs]
    assert len({tuple(hyps[0][0]) for hyps in c.theirs}) >= 15, lengths
    assert np.mean([n < 40 for n in lengths]) >= 0.7, lengths
    assert len(set(lengths)) >= 5, lengths


def _tensor_types(path):
  """{LiteRT tensor type name: count} of a model file's main graph's constant tensors."""
  from tensorflow.lite.python import schema_py_generated as schema
  with open(path, "rb") as f:
    model = schema.Model.GetRootAsModel(f.read(), 0)
  names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
  counts = {}
  for g in range(model.SubgraphsLength()):
    graph = model.Subgraphs(g)
    for t in range(graph.TensorsLength()):
      tensor = graph.Tensors(t)
      if model.Buffers(tensor.Buffer()).DataLength():
        kind = names[tensor.Type()]
        counts[kind] = counts.get(kind, 0) + 1
  return counts


def test_quantized_models_hold_quantized_weights_and_well_formed_outputs(built, dev_inputs):
  """float16: float16 weights; int8: int8 weights; both decode every input to hypotheses
  that end with EOS (then PAD) within the length limit, no PAD before, scores in best-first
  order (slots without a hypothesis score -1e7, as the SavedModel's)."""
  assert "FLOAT16" not in _tensor_types(os.path.join(built["beam"][1], litert.MODEL_FILE))
  assert _tensor_types(os.path.join(built["beam_float16"][1], litert.MODEL_FILE)).get("FLOAT16")
  assert _tensor_types(os.path.join(built["beam_int8"][1], litert.MODEL_FILE)).get("INT8")
  run = runs.load(built["beam"][0])
  for name in ("beam_float16", "beam_int8"):
    translator = litert_translate.LiteRTTranslator(built[name][1])
    assert translator.info["quantization"] == name.split("_")[1]
    for text in dev_inputs[:50]:
      source = run.vocab.encode(text) + [EOS_ID]
      ids, scores = translator.search_ids(np.array([source], np.int32))
      limit = len(source) + 50
      assert scores[0, 0] > -1e6  # the best slot holds a hypothesis
      for hyp, score in zip(ids[0], scores[0]):
        if score < -1e6:  # an empty slot (-1e7)
          continue
        hyp = list(hyp)
        end = hyp.index(EOS_ID) if EOS_ID in hyp else len(hyp)
        assert end <= limit and PAD_ID not in hyp[:end] and not any(hyp[end + 1:]), hyp
      assert np.all(np.diff(scores[0]) <= 0), scores


def test_an_input_over_the_limit_is_cut_and_said(built):
  """As the SavedModel: an input longer than max_input_length (40 here, EOS included) is
  cut to it; the translator counts it and the script says so on stderr."""
  _, litert_dir = built["beam"]
  translator = litert_translate.LiteRTTranslator(litert_dir)
  long = " ".join(["one hundred and twenty-three thousand"] * 12)
  pieces = translator.source_sp.encode(long, out_type=str)
  assert len(pieces) > 39
  (cut,) = translator.translate_pieces([pieces[:39]])
  (whole,) = translator.translate_pieces([pieces])
  assert translator.truncated == 1 and whole == cut
  result = subprocess.run([sys.executable, SCRIPT, litert_dir, long, "nine"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert ("1 input(s) longer than the model's input limit of 40 pieces (EOS included) were "
          "cut to it") in result.stderr
  assert len(result.stdout.splitlines()) == 2


def test_the_script_runs_without_tensorflow_or_this_package(built, dev_inputs):
  """litert_translate.py needs ai-edge-litert, sentencepiece and numpy (and ct2_translate.py
  beside it): TensorFlow and t2t_keras are made unimportable."""
  _, litert_dir = built["greedy"]
  lines = dev_inputs[:5]
  expected = litert_translate.LiteRTTranslator(litert_dir).translate(lines)
  site = sysconfig.get_paths()["purelib"]
  code = (f"import sys, runpy; sys.path.append({site!r})\n"
          "sys.modules['tensorflow'] = sys.modules['t2t_keras'] = None\n"
          f"sys.argv = [{SCRIPT!r}] + sys.argv[1:]\n"
          f"runpy.run_path({SCRIPT!r}, run_name='__main__')\n")
  result = subprocess.run([sys.executable, "-I", "-S", "-c", code, litert_dir, *lines],
                          capture_output=True, text=True, cwd="/", timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  printed = [line.split("\t") for line in result.stdout.splitlines()]
  assert [t for _, t in printed] == [t for t, _ in expected]
  np.testing.assert_allclose([float(s) for s, _ in printed], [s for _, s in expected],
                             atol=1e-4)


def test_an_op_litert_lacks_is_named_in_one_line(tmp_path):
  """The converter's failure names the op and where it is made, in one line."""

  class WithSvd(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32, name="x")])
    def f(self, x):
      return {"y": tf.linalg.svd(x)[0]}

  module = WithSvd()
  tf.saved_model.save(module, str(tmp_path), signatures={"f": module.f})
  with pytest.raises(litert.UnsupportedError) as raised:
    litert.convert_saved_model(str(tmp_path), ["f"])
  message = str(raised.value)
  assert message.startswith("LiteRT's builtin ops cannot express tf.Svd (node ") and (
      "\n" not in message), message
  assert message.endswith("): the model or the search uses an op LiteRT lacks"), message


def test_an_op_made_in_several_places_is_named_once_with_their_count(tmp_path):
  """Three tf.Svd nodes: the op once, how many places and the first (the parsing
  constraint's 17 tf.Roll nodes, before they became slices, made a line of 17 names)."""

  class ThreeSvds(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32, name="x")])
    def f(self, x):
      return {"y": sum(tf.linalg.svd(x * float(k))[0] for k in (1, 2, 3))}

  module = ThreeSvds()
  tf.saved_model.save(module, str(tmp_path), signatures={"f": module.f})
  with pytest.raises(litert.UnsupportedError) as raised:
    litert.convert_saved_model(str(tmp_path), ["f"])
  message = str(raised.value)
  assert message.startswith("LiteRT's builtin ops cannot express tf.Svd (3 places, the "
                            "first node ") and message.count("tf.Svd") == 1, message


def test_exporter_and_decoder_binaries(built, comparisons, dev_inputs, tmp_path, capsys):
  """t2t-exporter --format=litert, then t2t-decoder --engine=litert: the lines of
  --engine=tensorflow but at the comparison's near-ties; other decode hparams are refused
  with the ones the model holds."""
  run_dir, _ = built["beam"]
  litert_dir = tmp_path / "litert"
  code, out, err = run_binary(capsys, exporter_bin, f"--output_dir={run_dir}",
                              "--format=litert", f"--export_dir={litert_dir}",
                              "--decode_hparams=beam_size=4,alpha=0.6")
  assert code == 0, err
  assert out.strip().endswith(str(litert_dir))
  info = json.loads((litert_dir / litert.INFO_FILE).read_text())
  assert (info["beam_size"], info["alpha"], info["quantization"], info["max_input_length"]) == (
      4, 0.6, "float32", 40)
  from t2t_keras import __version__  # pylint: disable=import-outside-toplevel
  assert (info["eos_id"], info["pad_id"], info["t2t_keras_version"], info["constrained"]) == (
      EOS_ID, PAD_ID, __version__, False)
  source = tmp_path / "in.txt"
  source.write_text("\n".join(dev_inputs[:60]) + "\n")
  lines = {}
  for engine in ("tensorflow", "litert"):
    output = tmp_path / f"{engine}.txt"
    code, out, err = run_binary(capsys, decoder_bin, f"--output_dir={run_dir}",
                                f"--engine={engine}", f"--litert_model_dir={litert_dir}",
                                f"--decode_from_file={source}", f"--decode_to_file={output}",
                                "--decode_hparams=beam_size=4,alpha=0.6,jit=false")
    assert code == 0, err
    lines[engine] = output.read_text().splitlines()
  assert "decoding with LiteRT" in out
  differ = {i for i, *_ in comparisons["beam"].differ}
  assert len(lines["litert"]) == 60
  assert all(a == b for i, (a, b) in enumerate(zip(lines["tensorflow"], lines["litert"]))
             if i not in differ)
  code, _, err = run_binary(capsys, decoder_bin, f"--output_dir={run_dir}", "--engine=litert",
                            f"--litert_model_dir={litert_dir}", f"--decode_from_file={source}",
                            "--decode_hparams=beam_size=6")
  assert code != 0 and len(err.strip().splitlines()) == 1, err
  assert "converted with beam_size=4, and the decoding asks for beam_size=6" in err
  prefix_file = tmp_path / "prefix.txt"
  prefix_file.write_text("drei\n" * 60)
  code, _, err = run_binary(capsys, decoder_bin, f"--output_dir={run_dir}", "--engine=litert",
                            f"--litert_model_dir={litert_dir}", f"--decode_from_file={source}",
                            f"--decode_prefix_file={prefix_file}",
                            "--decode_hparams=beam_size=4,alpha=0.6")
  assert code != 0 and len(err.strip().splitlines()) == 1, err
  assert "takes no target prefixes" in err


@pytest.mark.parametrize("args, message", [
    (["--format=litert", "--quantization=int8_float16"],
     "--format=litert takes one of none, float32, float16, int8"),
    (["--format=litert", "--decode_hparams=sampling_method=random"],
     "--format=litert holds beam and greedy search"),
    (["--format=litert", "--export_version=3"], "--export_version is for SavedModels"),
])
def test_the_exporter_refuses_what_litert_cannot_hold(built, tmp_path, capsys, args, message):
  run_dir, _ = built["beam"]
  code, _, err = run_binary(capsys, exporter_bin, f"--output_dir={run_dir}",
                            f"--export_dir={tmp_path / 'x'}", *args)
  assert code != 0 and message in err and len(err.strip().splitlines()) == 1, err


def test_the_decoder_without_a_converted_model(built, tmp_path, capsys):
  run_dir, _ = built["greedy"]
  source = tmp_path / "in.txt"
  source.write_text("one\n")
  code, _, err = run_binary(capsys, decoder_bin, f"--output_dir={run_dir}", "--engine=litert",
                            f"--litert_model_dir={tmp_path}", f"--decode_from_file={source}")
  assert code != 0 and f"no LiteRT model in {tmp_path}: convert the run first" in err


def test_load_translator_refuses_sampling(built):
  run_dir, litert_dir = built["greedy"]
  settings = parse_decode_hparams("beam_size=1,sampling_method=random")
  with pytest.raises(InputError, match="--engine=litert runs the beam or greedy search"):
    litert.load_translator(run_dir, settings.search, None, litert_dir)
  # The length penalty is built into the model too (litert_info.json), GNMT's here.
  with open(os.path.join(litert_dir, litert.INFO_FILE)) as f:
    info = json.load(f)
  assert info["length_penalty_kind"] == "gnmt"
  settings = parse_decode_hparams(f"beam_size=1,alpha={info['alpha']},length_penalty_kind=length")
  with pytest.raises(InputError, match="converted with length_penalty_kind=gnmt, and the "
                                       "decoding asks for length_penalty_kind=length"):
    litert.load_translator(run_dir, settings.search, None, litert_dir)


def test_a_multilingual_run_takes_its_target_language(tmp_path):
  """A run whose vocabulary has `<2xx>` tags: litert_info.json lists its languages, and
  translate(target_language=) puts the tag in front as the decoder's --target_language
  does: our search's outputs and scores (within TOL)."""
  from conftest import TINY_SENTENCES, make_tiny_run  # pylint: disable=import-outside-toplevel
  run_dir = make_tiny_run(tmp_path, max_length=40, user_defined_symbols=("<2de>", "<2fr>"))
  decode = "beam_size=2,alpha=0.6,extra_length=5"
  translator = litert_translate.LiteRTTranslator(
      litert.convert_run(run_dir, decode_hparams=decode, log=None))
  assert translator.info["target_languages"] == ["de", "fr"]
  run = runs.load(run_dir)
  ours = translate.translate_lines(run.model, run.vocab,
                                   [f"<2fr> {s}" for s in TINY_SENTENCES],
                                   parse_decode_hparams(decode + ",jit=false"))
  theirs = translator.translate(TINY_SENTENCES, target_language="fr")
  assert all(abs(o[0].score - t[1]) <= TOL for o, t in zip(ours, theirs))
  assert sum(o[0].text == t[0] for o, t in zip(ours, theirs)) >= len(TINY_SENTENCES) - 1
  with pytest.raises(ValueError, match="unknown target language 'cs'; this model knows de, fr"):
    translator.translate(TINY_SENTENCES, target_language="cs")
