"""A language-token model's target language (M2M-100 and NLLB imported from Hugging Face's
layout): the SavedModel's `target_language` signature forces the language's token as the
output's first piece, as t2t-decoder's --target_language does, and t2t-serve serves it;
each input carries its source language's token (`__en__ words`).

The model is `hf_m2m100_fixture.py`'s random M2M-100, whose imported run's greedy outputs
equal a float64 reference written from transformers' source
(importing/test_hf_m2m100_import.py); here the export and the server give those outputs.
"""

import json
import os

import pytest
import tensorflow as tf
from serve_process import MODEL, Server, call, headless_chromium, predict

import hf_m2m100_fixture as fixture
import marian_fixture
from t2t_keras import bin as t2t_bin
from t2t_keras import runs
from t2t_keras.bin import exporter as exporter_bin
from t2t_keras.bin import t2t_import as import_bin
from t2t_keras.decoding import translate
from t2t_keras.decoding.settings import parse_decode_hparams

pytestmark = pytest.mark.heavy

DECODE = "beam_size=1,extra_length=6,batch_size=4,jit=false"
ENGLISH = marian_fixture.corpus(4, seed=7)[0]
ASKED = ["de", "fr", "de", "fr"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """(the imported run, its export's version 7)."""
  root = tmp_path_factory.mktemp("m2m100")
  fixture.write_hf_dir(str(root / "hf"), seed=1, sharpness=3)
  assert t2t_bin.run_in_process(import_bin, [
      "t2t-import", "--from=hf", f"--hf_dir={root / 'hf'}", f"--output_dir={root / 'run'}"]) == 0
  assert t2t_bin.run_in_process(exporter_bin, [
      "t2t-exporter", f"--output_dir={root / 'run'}", f"--export_dir={root / 'export'}",
      "--export_version=7", f"--decode_hparams={DECODE}"]) == 0
  return runs.load(str(root / "run")), str(root / "export")


@pytest.fixture(scope="module")
def expected(exported):
  """translate_lines' outputs, each line led by __en__, the asked language's token a prefix."""
  run = exported[0]
  nbest = translate.translate_lines(
      run.model, run.vocab, [f"__en__ {line}" for line in ENGLISH],
      parse_decode_hparams(DECODE), prefixes=[f"__{code}__" for code in ASKED])
  return [hyps[0].text for hyps in nbest]


def test_the_signature_forces_the_language_token(exported, expected):
  loaded = tf.saved_model.load(os.path.join(exported[1], "7"))
  with open(os.path.join(exported[1], "7", "assets", "export_info.json")) as f:
    info = json.load(f)
  assert info["target_languages"] == ["de", "en", "fr"]
  assert info["language_tokens"] == {"de": "__de__", "en": "__en__", "fr": "__fr__"}
  out = loaded.signatures["target_language"](
      inputs=tf.constant([f"__en__ {line}" for line in ENGLISH]),
      target_language=tf.constant(ASKED))
  texts = [t.decode() for t in out["outputs"].numpy()]
  assert texts == expected and len(set(texts)) > 1
  assert not any("__" in t for t in texts)  # the language tokens left out of the text
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"unknown target language; this model knows de, en, fr"):
    loaded.signatures["target_language"](inputs=tf.constant(["__en__ nine"]),
                                         target_language=tf.constant(["xx"]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"each input starts with the token of its source language"):
    loaded.signatures["target_language"](inputs=tf.constant(["nine"]),
                                         target_language=tf.constant(["de"]))


@pytest.fixture(scope="module")
def server(exported, tmp_path_factory):
  yield from Server.for_module(exported[1], tmp_path_factory, f"--model_name={MODEL}")


def test_t2t_serve_answers_as_the_signature(server, expected):
  status, body = predict(server.url, {
      "signature_name": "target_language",
      "instances": [{"inputs": f"__en__ {line}", "target_language": code}
                    for line, code in zip(ENGLISH, ASKED)]})
  assert status == 200, body
  assert [p["outputs"] for p in body["predictions"]] == expected
  # The source language's code instead of its token: the server puts the token in front,
  # replacing one a line starts with (here another language's).
  status, body = predict(server.url, {
      "signature_name": "target_language",
      "instances": [{"inputs": line if i % 2 else f"__fr__ {line}", "source_language": "en",
                     "target_language": code}
                    for i, (line, code) in enumerate(zip(ENGLISH, ASKED))]})
  assert status == 200, body
  assert [p["outputs"] for p in body["predictions"]] == expected
  status, body = predict(server.url, {"signature_name": "target_language", "instances": [
      {"inputs": "nine", "source_language": "xx", "target_language": "de"}]})
  assert status == 400 and body["error"] == ("instance 0: unknown source language 'xx'; "
                                             "this model knows de, en, fr"), body
  status, body = predict(server.url, {"instances": [{"inputs": "__en__ nine",
                                                     "target_language": "de"}]})
  assert status == 400 and "takes no target_language for this model" in body["error"], body
  assert "send it to the 'target_language' signature" in body["error"], body


def test_metadata_lists_the_language_tokens(server):
  status, body = call(server.url, f"/v1/models/{MODEL}/metadata")
  assert status == 200, body
  assert body["metadata"]["target_languages"] == ["de", "en", "fr"]
  assert body["metadata"]["language_tokens"] == {"de": "__de__", "en": "__en__", "fr": "__fr__"}


def test_web_page_sends_lines_to_the_target_language_signature(server, expected):
  """Both selectors list the model's languages, the source's set to English; each line is
  sent with that source_language (the server leads it with `__en__`, replacing a token the
  line starts with) to the `target_language` signature, into the chosen language; a target
  prefix with it is refused on the page, in words."""
  driver = headless_chromium()
  from selenium.webdriver.common.by import By  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel
  from selenium.common.exceptions import StaleElementReferenceException
  from selenium.webdriver.support.ui import Select, WebDriverWait  # pylint: disable=import-outside-toplevel
  try:
    driver.get(server.url + "/")
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "language").is_displayed())
    select = Select(driver.find_element(By.ID, "language"))
    assert [o.get_attribute("value") for o in select.options] == ["de", "en", "fr"]
    assert driver.find_element(By.ID, "token_hint").is_displayed()
    source_select = Select(driver.find_element(By.ID, "source_language"))
    assert [o.get_attribute("value") for o in source_select.options] == ["de", "en", "fr"]
    assert source_select.first_selected_option.get_attribute("value") == "en"
    for i in (0, 1):  # ASKED: de, fr; the second line led by a wrong token
      select.select_by_value(ASKED[i])
      source = driver.find_element(By.ID, "source")
      source.clear()
      source.send_keys(ENGLISH[i] if i == 0 else f"__de__ {ENGLISH[i]}")
      driver.find_element(By.ID, "translate").click()
      WebDriverWait(driver, 60, ignored_exceptions=(StaleElementReferenceException,)).until(
          lambda d, i=i: f"into {ASKED[i]} in " in d.find_element(By.ID, "latency").text)
      assert driver.find_element(By.ID, "error").text == ""
      assert driver.find_element(By.ID, "translation").text == expected[i]
    driver.find_element(By.ID, "prefix").send_keys("Ein")
    driver.find_element(By.ID, "translate").click()
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "error").text != "")
    assert "target prefixes and terms are not offered" in driver.find_element(By.ID, "error").text
  finally:
    driver.quit()
