"""A multilingual export's target language: the SavedModel's `target_language` signature,
t2t-serve's "target_language" instances and the web page's language selector, on a tiny
random model whose vocabulary holds the tags <2de> and <2fr>."""

import json
import os
import threading

import numpy as np
import pytest
import tensorflow as tf
from binaries import run_binary
from conftest import TINY_SENTENCES
from serve_process import DECODE, MODEL, Server, call, exported_tiny_run, headless_chromium, predict
from test_server import tf_serving_rows

from t2t_keras import runs
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import exporter as exporter_bin
from t2t_keras.data import languages
from t2t_keras.data.languages import with_tag
from t2t_keras.decoding import translate
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.exporting import export, language_ops
from t2t_keras.server import rest

LANGUAGES = ("de", "fr")
LINES = ["one hundred and five", "twenty-three", "<2de> nine", "", "  seven thousand  "]
ASKED = ["fr", "de", "fr", "de", "fr"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  return exported_tiny_run(tmp_path_factory, user_defined_symbols=["<2de>", "<2fr>"])


@pytest.fixture(scope="module")
def loaded(run_dir):
  return tf.saved_model.load(os.path.join(run_dir, "export", "7"))


@pytest.fixture(scope="module")
def server(run_dir, tmp_path_factory):
  yield from Server.for_module(run_dir, tmp_path_factory, "--batch_timeout_ms=50")


def _tagged(lines, asked):
  return [with_tag(line, language, LANGUAGES) for line, language in zip(lines, asked)]


def _rows(loaded, signature, **inputs):
  return tf_serving_rows(loaded.signatures[signature](
      **{k: tf.constant(v, tf.string) for k, v in inputs.items()}))


# --- the tag, in the graph and in the server -------------------------------------------

EDGES = ["nine", "  nine  ", "<2de> nine", "<2de>nine", "\u00a0<2de>\u3000nine\u2028", "",
         "   ", "<2de>", "<2xx> nine", "<2pt_BR> x", "nine <2de>", "\t<2fr>\n", "a\nb",
         "<2de>  <2fr> x", "\x1c nine \x85"]


def test_the_tag_is_put_in_front_as_with_tag_does():
  """The export's tag_in_graph and the server's rest.with_tag give languages.with_tag's
  string: a leading tag replaced, the ends' whitespace (Python's, Unicode's too) dropped."""
  want = [with_tag(line, "fr", LANGUAGES) for line in EDGES]
  got = language_ops.tag_in_graph(tf.constant(EDGES), tf.constant(["fr"] * len(EDGES)),
                                  LANGUAGES)
  assert [t.decode() for t in got.numpy()] == want
  assert [rest.with_tag(line.encode(), "fr").decode() for line in EDGES] == want
  # Bytes that are not UTF-8 stay as they are in the server (the graph makes them U+FFFD).
  assert rest.with_tag(b" <2de> \xff x ", "de") == b"<2de> \xff x"
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="unknown target language; this model knows de, fr"):
    language_ops.tag_in_graph(tf.constant(["a", "b"]), tf.constant(["fr", "es"]), LANGUAGES)
  with pytest.raises(tf.errors.InvalidArgumentError, match="one language per input"):
    language_ops.tag_in_graph(tf.constant(["a", "b"]), tf.constant(["fr"]), LANGUAGES)


LIMITS = rest.Limits(max_sentence_chars=20)


@pytest.mark.parametrize("body, names, inputs", [
    ({"instances": [{"inputs": "nine", "target_language": "fr"}, "two",
                    {"inputs": "<2fr> six", "target_language": "de"},
                    {"inputs": "one", "target_language": ""}]},
     ["inputs"], {"inputs": [b"<2fr> nine", b"two", b"<2de> six", b"one"]}),
    ({"inputs": {"inputs": ["nine", "two"], "prefix": ["neun", ""],
                 "target_language": ["de", "fr"]}},
     ["inputs", "prefix"], {"inputs": [b"<2de> nine", b"<2fr> two"],
                            "prefix": [b"neun", b""]}),
    ({"instances": [{"inputs": {"b64": "bmluZQ=="}, "target_language": {"b64": "ZnI="}}]},
     ["inputs"], {"inputs": [b"<2fr> nine"]}),
    # The signature that takes the language itself gets it as it is.
    ({"signature_name": "target_language",
      "instances": [{"inputs": "nine", "target_language": "fr"}]},
     ["inputs", "target_language"], {"inputs": [b"nine"], "target_language": [b"fr"]}),
    # A sentence at the character limit: the tag does not count.
    ({"instances": [{"inputs": "x" * 20, "target_language": "de"}]},
     ["inputs"], {"inputs": [b"<2de> " + b"x" * 20]}),
], ids=["rows", "columns", "b64", "signature", "limit"])
def test_parse_predict_tags_the_inputs(body, names, inputs):
  assert rest.parse_predict(body, names, LIMITS, target_languages=LANGUAGES).inputs == inputs


@pytest.mark.parametrize("body, languages, message", [
    ({"instances": ["two", {"inputs": "nine", "target_language": "es"}]}, LANGUAGES,
     "instance 1: unknown target language 'es'; this model knows de, fr"),
    ({"instances": [{"inputs": "nine", "target_language": 7}]}, LANGUAGES,
     "instance 0 input 'target_language': expected a string or {\"b64\": ...}, got int"),
    ({"inputs": {"inputs": ["nine"], "target_language": ["fr"]}}, (),
     "instance 0: target language 'fr' asked of a model with one target language (its "
     "export lists no target_languages)"),
    ({"instances": [{"inputs": "nine", "target_language": "fr", "x": "y"}]}, LANGUAGES,
     "instance 0 has inputs ['inputs', 'target_language', 'x']; the signature takes "
     "['inputs', 'target_language']"),
], ids=["unknown", "not-a-string", "bilingual", "extra-input"])
def test_parse_predict_refuses_bad_languages(body, languages, message):
  with pytest.raises(rest.BadRequest) as e:
    rest.parse_predict(body, ["inputs"], LIMITS, target_languages=languages)
  assert str(e.value) == message and e.value.status == 400


# A language-token model's codes and tokens (M2M-100's `__fr__`, NLLB's `fra_Latn` as it is).
TOKENS = {"de": "__de__", "en": "__en__", "fra_Latn": "fra_Latn"}
SOURCES = ["nine", "  __de__ neun ", "fra_Latn neuf", "__en__", "two words", "__xx__ nine"]


@pytest.mark.parametrize("language", ["en", "__en__", "fra_Latn"])
def test_source_language_frames_the_inputs_as_the_decoder(language):
  """Each row led by the language's token (a leading language token replaced), as
  t2t-decoder's --source_language frames a file (`languages.frame_with_tokens`)."""
  body = {"signature_name": "target_language",
          "instances": [{"inputs": s, "source_language": language, "target_language": "de"}
                        for s in SOURCES]}
  parsed = rest.parse_predict(body, ["inputs", "target_language"], LIMITS,
                              target_languages=tuple(TOKENS), language_tokens=TOKENS)
  framed, _ = languages.frame_with_tokens(SOURCES, None, language, "de", TOKENS, "lines")
  assert parsed.inputs == {"inputs": [f.encode() for f in framed],
                           "target_language": [b"de"] * len(SOURCES)}
  assert framed[0] == f"{TOKENS.get(language, language)} nine"  # not a no-op
  columns = {"inputs": {"inputs": SOURCES, "source_language": [language] * len(SOURCES)}}
  assert rest.parse_predict(columns, ["inputs"], LIMITS,
                            language_tokens=TOKENS).inputs["inputs"] == parsed.inputs["inputs"]


def test_an_instance_without_a_source_language_is_sent_as_it_is():
  body = {"instances": [{"inputs": "__de__ neun", "source_language": ""},
                        "__de__ zwei", {"inputs": "nine", "source_language": "en"}]}
  assert rest.parse_predict(body, ["inputs"], LIMITS, language_tokens=TOKENS).inputs == {
      "inputs": [b"__de__ neun", b"__de__ zwei", b"__en__ nine"]}


@pytest.mark.parametrize("body, tokens, message", [
    ({"instances": ["two", {"inputs": "nine", "source_language": "es"}]}, TOKENS,
     "instance 1: unknown source language 'es'; this model knows de, en, fra_Latn"),
    ({"instances": [{"inputs": "nine", "source_language": "en"}]}, None,
     "instance 0: source language 'en' asked of a model without language tokens (its export "
     "lists no language_tokens): send the text alone"),
    ({"instances": [{"inputs": "nine", "source_language": ["en"]}]}, TOKENS,
     "instance 0 input 'source_language': expected a string or {\"b64\": ...}, got list"),
], ids=["unknown", "no-tokens", "not-a-string"])
def test_parse_predict_refuses_bad_source_languages(body, tokens, message):
  with pytest.raises(rest.BadRequest) as e:
    rest.parse_predict(body, ["inputs"], LIMITS, language_tokens=tokens)
  assert str(e.value) == message and e.value.status == 400


# --- the SavedModel ---------------------------------------------------------------------

@pytest.mark.heavy
def test_export_records_the_languages_and_the_signature(run_dir, loaded):
  with open(os.path.join(run_dir, "export", "7", "assets", "export_info.json")) as f:
    info = json.load(f)
  assert info["target_languages"] == ["de", "fr"]
  assert info["signatures"]["target_language"] == export.SIGNATURES["target_language"]
  function = loaded.signatures["target_language"]
  assert sorted(function.structured_input_signature[1]) == ["inputs", "target_language"]
  assert sorted(function.structured_outputs) == ["outputs", "scores", "truncated"]


@pytest.mark.heavy
def test_signature_translates_each_line_into_its_language(run_dir, loaded):
  """The `target_language` signature's outputs are translate_lines' (t2t-decoder's) on the
  tagged lines, and serving_default's on them; a line's two languages differ somewhere."""
  run = runs.load(run_dir)
  tagged = _tagged(LINES, ASKED)
  expected = translate.translate_lines(run.model, run.vocab, tagged,
                                       parse_decode_hparams(DECODE))
  got = loaded.signatures["target_language"](inputs=tf.constant(LINES),
                                             target_language=tf.constant(ASKED))
  texts = [t.decode() for t in got["outputs"].numpy()]
  assert texts == [h[0].text for h in expected]
  np.testing.assert_allclose(got["scores"].numpy(), [h[0].score for h in expected], rtol=1e-4)
  assert _rows(loaded, "target_language", inputs=LINES, target_language=ASKED) == _rows(
      loaded, "serving_default", inputs=tagged)
  other = _rows(loaded, "target_language", inputs=LINES,
                target_language=["de" if a == "fr" else "fr" for a in ASKED])
  assert [r["outputs"] for r in other] != texts, "the languages would not be told apart"


@pytest.mark.heavy
def test_signature_refuses_an_unknown_language(loaded):
  function = loaded.signatures["target_language"]
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="unknown target language; this model knows de, fr"):
    function(inputs=tf.constant(["nine", "two"]), target_language=tf.constant(["de", "es"]))
  with pytest.raises(tf.errors.InvalidArgumentError, match="one language per input"):
    function(inputs=tf.constant(["nine", "two"]), target_language=tf.constant(["de"]))


@pytest.mark.heavy
def test_the_standalone_script_takes_a_target_language(run_dir, loaded):
  """translate_saved_model.py --target_language=fr: the signature's outputs into French."""
  import runpy  # pylint: disable=import-outside-toplevel
  script = runpy.run_path(os.path.join(os.path.dirname(export.__file__),
                                       "translate_saved_model.py"))
  got = script["translate"](os.path.join(run_dir, "export"), LINES, target_language="fr")
  expected = _rows(loaded, "target_language", inputs=LINES, target_language=["fr"] * len(LINES))
  assert [text for text, _ in got] == [r["outputs"] for r in expected]
  with pytest.raises(SystemExit, match="do not combine"):
    script["translate"](os.path.join(run_dir, "export"), LINES, nbest=True,
                        target_language="fr")


# --- t2t-serve --------------------------------------------------------------------------

@pytest.mark.heavy
def test_instances_are_tagged_then_answered_as_their_signature(server, loaded):
  """A mixed batch (languages, none, a line with its own tag) is serving_default's answer
  to the tagged lines and the target_language signature's; with prefixes, the prefix
  signature's; columns and the signature itself alike."""
  instances = [{"inputs": line, "target_language": language}
               for line, language in zip(LINES, ASKED)] + ["nine"]
  want = _rows(loaded, "serving_default", inputs=_tagged(LINES, ASKED) + ["nine"])
  assert want[:-1] == _rows(loaded, "target_language", inputs=LINES, target_language=ASKED)
  assert predict(server.url, {"instances": instances}) == (200, {"predictions": want})
  assert predict(server.url, {"signature_name": "target_language",
                              "instances": instances[:-1]}) == (200, {"predictions": want[:-1]})
  status, body = predict(server.url, {"inputs": {"inputs": LINES, "target_language": ASKED}})
  assert status == 200 and body["outputs"] == {k: [r[k] for r in want[:-1]] for k in want[0]}
  # With a target prefix on one line: the prefix signature on the tagged lines.
  prefixes = ["neun und", "", ""]
  status, body = predict(server.url, {"instances": [
      {"inputs": LINES[0], "target_language": "fr", "prefix": prefixes[0]},
      {"inputs": LINES[1], "target_language": "de"}, LINES[2]]})
  steered = _rows(loaded, "prefix", inputs=_tagged(LINES[:2], ["fr", "de"]) + [LINES[2]],
                  prefix=prefixes)
  assert status == 200 and body["predictions"] == steered
  assert steered[0]["outputs"].startswith("neun und")
  # n-best and attention: the page's calls.
  status, body = predict(server.url, {"signature_name": "nbest", "instances": [
      {"inputs": LINES[0], "target_language": "fr"}]})
  assert status == 200 and body["predictions"] == _rows(loaded, "nbest",
                                                        inputs=_tagged(LINES[:1], ["fr"]))
  status, body = predict(server.url, {"signature_name": "attention", "instances": [
      {"inputs": LINES[0], "outputs": "neun", "target_language": "fr"}]})
  assert status == 200 and body["predictions"][0]["source_pieces"][:2] == ["▁", "<2fr>"]


@pytest.mark.heavy
def test_different_languages_share_a_model_call(server):
  """Concurrent requests in different languages are batched as one signature's (the tag is
  in their text), each answered as alone."""
  alone = {language: predict(server.url, {"instances": [
      {"inputs": "nine", "target_language": language}]})[1] for language in LANGUAGES}
  before = call(server.url, "/healthz")[1]["batches"]
  results = [None] * 16

  def client(i):
    results[i] = predict(server.url, {"instances": [
        {"inputs": "nine", "target_language": LANGUAGES[i % 2]}]})

  threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  batches = call(server.url, "/healthz")[1]["batches"] - before
  assert 1 <= batches <= 8, f"16 concurrent requests took {batches} model calls"
  for i, (status, body) in enumerate(results):
    got, want = body["predictions"][0], alone[LANGUAGES[i % 2]]["predictions"][0]
    assert status == 200 and got["outputs"] == want["outputs"]
    np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-4)


@pytest.mark.heavy
def test_bad_languages_get_400_naming_the_instance(server):
  cases = [({"instances": ["nine", {"inputs": "two", "target_language": "es"}]},
            "instance 1: unknown target language 'es'; this model knows de, fr"),
           ({"instances": [{"inputs": "two", "target_language": ["fr"]}]},
            "instance 0 input 'target_language': expected a string"),
           ({"signature_name": "target_language",
             "instances": [{"inputs": "two", "target_language": "es"}]},
            "unknown target language; this model knows de, fr")]
  for body, message in cases:
    status, answer = predict(server.url, body)
    assert status == 400 and message in answer["error"], (body, answer)
  assert call(server.url, "/healthz")[0] == 200


@pytest.mark.heavy
def test_metadata_lists_the_languages(server):
  status, body = call(server.url, f"/v1/models/{MODEL}/metadata")
  assert status == 200 and body["metadata"]["target_languages"] == ["de", "fr"]
  defs = body["metadata"]["signature_def"]["signature_def"]
  assert sorted(defs["target_language"]["inputs"]) == ["inputs", "target_language"]


@pytest.mark.heavy
def test_web_page_translates_into_the_chosen_language(server, loaded):
  """The selector lists the model's languages; each choice's translation is the n-best
  signature's on the tagged line, and the attention's source starts with the tag."""
  driver = headless_chromium()
  from selenium.webdriver.common.by import By  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel
  from selenium.common.exceptions import StaleElementReferenceException
  # pylint: disable-next=import-outside-toplevel
  from selenium.webdriver.support.ui import Select, WebDriverWait

  def answered(language):
    def done(d):
      heads = [h.text for h in d.find_elements(By.CSS_SELECTOR, "#attention thead th")]
      return (f"into {language} in " in d.find_element(By.ID, "latency").text
              and f"<2{language}>" in heads)
    return done

  try:
    driver.get(server.url + "/")
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "language").is_displayed())
    select = Select(driver.find_element(By.ID, "language"))
    assert [o.get_attribute("value") for o in select.options] == list(LANGUAGES)
    sentence = TINY_SENTENCES[0]
    driver.find_element(By.ID, "source").send_keys(sentence)
    for language in ("fr", "de"):
      select.select_by_value(language)
      driver.find_element(By.ID, "translate").click()
      # The page re-renders its tables as the answer comes: an element read mid-render is
      # stale, and the wait reads again.
      WebDriverWait(driver, 60, ignored_exceptions=(StaleElementReferenceException,)).until(
          answered(language))
      want = _rows(loaded, "nbest", inputs=_tagged([sentence], [language]))[0]
      assert driver.find_element(By.ID, "error").text == ""
      assert driver.find_element(By.ID, "translation").text == want["outputs"][0]
      rows = driver.find_elements(By.CSS_SELECTOR, "#nbest tbody tr")
      assert [r.find_elements(By.TAG_NAME, "td")[2].text for r in rows] == want["outputs"]
  finally:
    driver.quit()


@pytest.mark.heavy
def test_the_decoder_binary_takes_the_target_language_as_the_signature(run_dir, loaded,
                                                                      tmp_path, capsys):
  """t2t-decoder --target_language=L writes the `target_language` signature's outputs for
  L (the same-answer test's multilingual part; test_server.py has the rest); with
  --engine=ctranslate2 the tag reaches CTranslate2 too: its outputs change with L."""
  source = tmp_path / "in.txt"
  source.write_text("".join(f"{line}\n" for line in LINES), encoding="utf-8")
  code, _, err = run_binary(capsys, exporter_bin, f"--output_dir={run_dir}",
                            "--format=ctranslate2", f"--export_dir={tmp_path / 'ct2'}",
                            f"--decode_hparams={DECODE}")
  assert code == 0, err
  ct2 = {}
  for language in LANGUAGES:
    outputs = {}
    for engine in ("tensorflow", "ctranslate2"):
      out = tmp_path / f"{engine}.{language}"
      code, _, err = run_binary(capsys, decoder_bin, f"--output_dir={run_dir}",
                                f"--decode_from_file={source}", f"--decode_to_file={out}",
                                f"--decode_hparams={DECODE}", f"--target_language={language}",
                                f"--engine={engine}", f"--ct2_model_dir={tmp_path / 'ct2'}")
      assert code == 0, err
      outputs[engine] = out.read_text(encoding="utf-8").splitlines()
    want = _rows(loaded, "target_language", inputs=LINES, target_language=[language] * 5)
    assert outputs["tensorflow"] == [row["outputs"] for row in want]
    ct2[language] = outputs["ctranslate2"]
    assert len(ct2[language]) == len(LINES)
  assert ct2["de"] != ct2["fr"]
