"""TF Serving's REST predict format: parsing a request and building the response (no I/O).

    Row format:      {"signature_name": s, "instances": ["a", "b"]}
                     or "instances": [{"inputs": "a", "outputs": "x"}, ...] (several inputs)
      -> {"predictions": [{"outputs": ..., "scores": ..., "truncated": ...}, ...]}
    Columnar format: {"signature_name": s, "inputs": ["a", "b"]}
                     or "inputs": {"inputs": [...], "outputs": [...]}
      -> {"outputs": {"outputs": [...], "scores": [...], "truncated": [...]}}

A signature with a single output gives its values directly ("predictions": [v, ...],
"outputs": [...]), as TF Serving does. Strings may be sent as {"b64": "..."}.

Target prefixes (the exporter's `prefix` signature): instances {"inputs": s, "prefix": p};
terminology constraints (`constrained`): {"inputs": s, "constraints": [p, ...]}, a list of
strings per instance (a [batch, C] input, padded with "" when called). A request without
signature_name whose instances (or columns) carry "prefix" or "constraints" goes to that
signature, and an instance there without it has none.

A multilingual export's target language (its export_info.json lists target_languages):
{"inputs": s, "target_language": "fr"} in any signature that does not take one itself
(columns too): the server puts its tag ("<2fr> ", replacing a tag s starts with) in front
of s before the call, so it combines with "prefix" and "constraints" and batches with
requests to the same signature; an instance without it (or with "") is sent as it is.

A language-token export (M2M-100, NLLB: its export_info.json lists language_tokens, {code:
token}) reads its source language from the token that leads each input:
{"inputs": s, "source_language": "en"} in any signature puts that token ("__en__ ") in front
of s, replacing a language token s starts with, as t2t-decoder's --source_language does; an
instance without it (or with "") is sent as it is, led by its own token.
"""

import base64
import binascii
import dataclasses
import json
import re

from t2t_keras.server.model import as_json_value
from t2t_keras.server.quoting import shown, shown_names


class BadRequest(Exception):
  """A request the server refuses; `status` is 400, or 413 for a size limit."""

  def __init__(self, message, status=400):
    super().__init__(message)
    self.status = status


@dataclasses.dataclass(frozen=True)
class Limits:
  """Per-request limits, each named by the t2t-serve flag of the same name.

  max_attention_instances and max_attention_chars bound the signatures whose calls are
  never merged (attention: its output grows with instances x layers x target x source).
  request_timeout_ms: from the request's headers to its answer (0: none).
  """
  max_instances: int = 256
  max_sentence_chars: int = 2000
  max_attention_instances: int = 8
  max_attention_chars: int = 400
  max_request_bytes: int = 1 << 20
  request_timeout_ms: int = 120_000


@dataclasses.dataclass(frozen=True)
class PredictRequest:
  """A parsed predict call: {input name: [bytes] * size}, and which format to answer in."""
  signature_name: str
  inputs: dict
  row_format: bool

  @property
  def size(self):
    return len(next(iter(self.inputs.values())))


_FIELDS = ("signature_name", "instances", "inputs")
# The input that asks a multilingual model for a target language: the server tags the
# instance's "inputs" with it, as data/languages.py's with_tag (the server imports nothing
# of t2t_keras), unless the signature takes it itself (the export's `target_language`).
TARGET_LANGUAGE = "target_language"
# The input that gives a language-token model's source language: the server leads the
# instance's "inputs" with its token, as data/languages.py's frame_with_tokens.
SOURCE_LANGUAGE = "source_language"
# Inputs an instance may leave out, with the value it then has.
OPTIONAL_INPUTS = {"prefix": "", "constraints": [], TARGET_LANGUAGE: "", SOURCE_LANGUAGE: ""}
# The signature an input names when the request gives none.
STEERING_INPUTS = {"prefix": "prefix", "constraints": "constrained"}
_LEADING_TAG = re.compile(r"^\s*<2([a-z]{2,3}(?:_[A-Za-z]{2,4})?)>(?:\s+|$)")


def signature_name(request):
  """The signature a parsed body asks for: its signature_name; without one (or with "", as
  TF Serving reads it), "prefix" or "constrained" where its instances or columns carry a
  "prefix" or "constraints" input, else serving_default."""
  if request.get("signature_name"):
    return request["signature_name"]
  instances, columns = request.get("instances"), request.get("inputs")
  for key, name in STEERING_INPUTS.items():
    if isinstance(instances, list) and any(isinstance(i, dict) and key in i
                                           for i in instances):
      return name
    if isinstance(columns, dict) and key in columns:
      return name
  return "serving_default"


def parse_body(body):
  """Request bytes -> the JSON object; BadRequest for invalid JSON or a non-object."""
  try:
    request = json.loads(body)
  except RecursionError:
    raise BadRequest("request body nests JSON arrays or objects too deeply") from None
  except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError; a 5,000-digit number
    raise BadRequest(f"request body is not valid JSON: {str(e).split(';')[0]}") from None
  if not isinstance(request, dict):
    raise BadRequest(f"request body must be a JSON object, got {type(request).__name__}")
  unknown = sorted(set(request) - set(_FIELDS))
  if unknown:
    raise BadRequest(f"unknown field '{shown(unknown[0])}': a predict request has "
                     f"'signature_name' and one of 'instances' or 'inputs'")
  if ("instances" in request) == ("inputs" in request):
    raise BadRequest("a predict request needs exactly one of 'instances' (row format) or "
                     "'inputs' (columnar format)")
  name = request.get("signature_name", "serving_default")
  if not isinstance(name, str):
    raise BadRequest(f"'signature_name' must be a string, got {type(name).__name__}")
  return request


def parse_predict(request, input_names, limits, list_inputs=(), mergeable=True,
                  target_languages=(), language_tokens=None):
  """A JSON object from `parse_body` -> PredictRequest; BadRequest naming what is wrong.

  Args:
    request: the parsed body.
    input_names: the signature's input names (sorted).
    limits: Limits.
    list_inputs: the inputs that take a list of strings per instance ([batch, C]).
    mergeable: False for a signature whose calls are never merged (attention): it is held
      to limits.max_attention_instances and max_attention_chars.
    target_languages: the export's target languages (() for a bilingual one); a
      "target_language" the signature does not take becomes a tag in front of "inputs".
    language_tokens: {code: token} of an export whose languages are tokens
      (export_info.json's language_tokens: M2M-100, NLLB), else None or {}. Its target
      language is its output's first token, which only its own `target_language`
      signature takes (a "target_language" elsewhere is a BadRequest); a
      "source_language" puts that language's token in front of "inputs".
  """
  if not mergeable:
    limits = dataclasses.replace(
        limits, max_instances=min(limits.max_instances, limits.max_attention_instances),
        max_sentence_chars=min(limits.max_sentence_chars, limits.max_attention_chars))
    flags = ("--max_attention_instances", "--max_attention_chars")
  else:
    flags = ("--max_instances", "--max_sentence_chars")
  name = signature_name(request)
  tagging = TARGET_LANGUAGE not in input_names and _carries(request, TARGET_LANGUAGE)
  framing = _carries(request, SOURCE_LANGUAGE)
  if tagging and language_tokens:
    raise BadRequest(f"{name!r} takes no target_language for this model, which starts its "
                     "output with the target language's token: send it to the "
                     "'target_language' signature")
  if tagging:
    input_names = sorted(input_names + [TARGET_LANGUAGE])
  if framing:
    input_names = sorted(input_names + [SOURCE_LANGUAGE])
  if "instances" in request:
    inputs = _rows(request["instances"], input_names)
  else:
    inputs = _columns(request["inputs"], input_names)
  size = len(inputs[input_names[0]])
  if size == 0:
    raise BadRequest("no instances: send at least one sentence")
  if size > limits.max_instances:
    raise BadRequest(f"{size} instances, over the limit of {limits.max_instances} sentences "
                     f"per request to {name!r} ({flags[0]})", status=413)
  encoded = {k: [_strings(v, i, k, limits, flags[1]) if k in list_inputs
                 else _string(v, i, k, limits, flags[1])
                 for i, v in enumerate(values)] for k, values in inputs.items()}
  if tagging:
    _tag_inputs(encoded, target_languages)
  if framing:
    _frame_sources(encoded, language_tokens or {})
  return PredictRequest(name, encoded, "instances" in request)


def _carries(request, key):
  """Whether a parsed body's instances (or columns) carry input `key`."""
  instances, columns = request.get("instances"), request.get("inputs")
  if isinstance(instances, list):
    return any(isinstance(i, dict) and key in i for i in instances)
  return isinstance(columns, dict) and key in columns


def _asked(inputs, key):
  """Takes `key` out of parsed `inputs`; yields (row, language) of each row that asks for
  one (a row with "" asks for none)."""
  for i, language in enumerate(inputs.pop(key)):
    if language:
      yield i, language.decode("utf-8", errors="replace")


def _tag_inputs(inputs, languages):
  """Takes "target_language" out of parsed `inputs` and puts each row's tag in front of
  its "inputs" (a row with "" is left as it is); BadRequest naming the instance for a
  language the model does not know, or for any language asked of a bilingual model."""
  for i, language in _asked(inputs, TARGET_LANGUAGE):
    if not languages:
      raise BadRequest(f"instance {i}: target language '{shown(language)}' asked of a model with "
                       f"one target language (its export lists no target_languages)")
    if language not in languages:
      raise BadRequest(f"instance {i}: unknown target language '{shown(language)}'; this model "
                       f"knows {', '.join(languages)}")
    if "inputs" in inputs:
      inputs["inputs"][i] = with_tag(inputs["inputs"][i], language)


def _frame_sources(inputs, tokens):
  """Takes "source_language" out of parsed `inputs` and leads each row's "inputs" with that
  language's token (a code of `tokens`, or a token itself), replacing a language token the
  row starts with (a row with "" is left as it is); BadRequest naming the instance for an
  unknown language, or for any language asked of a model without language tokens."""
  known = set(tokens.values())
  for i, language in _asked(inputs, SOURCE_LANGUAGE):
    if not tokens:
      raise BadRequest(f"instance {i}: source language '{shown(language)}' asked of a model "
                       "without language tokens (its export lists no language_tokens): "
                       "send the text alone")
    token = tokens.get(language, language if language in known else None)
    if token is None:
      raise BadRequest(f"instance {i}: unknown source language '{shown(language)}'; this model "
                       f"knows {', '.join(sorted(tokens))}")
    if "inputs" in inputs:
      line = inputs["inputs"][i].decode("utf-8", errors="surrogateescape").strip()
      first, _, rest = line.partition(" ")
      framed = f"{token} {rest if first in known else line}".rstrip()
      inputs["inputs"][i] = framed.encode("utf-8", errors="surrogateescape")


def with_tag(data, language):
  """UTF-8 bytes -> the same text with "<2language>" in front (a leading tag replaced,
  the ends' whitespace dropped), as data/languages.py's with_tag; other bytes kept."""
  line = data.decode("utf-8", errors="surrogateescape")
  m = _LEADING_TAG.match(line)
  rest = line[m.end():] if m else line.lstrip()
  text = f"<2{language}> {rest}".rstrip() if rest else f"<2{language}>"
  return text.encode("utf-8", errors="surrogateescape")


def _rows(instances, input_names):
  """Row format -> {input name: [values]}."""
  if not isinstance(instances, list):
    raise BadRequest(f"'instances' must be a list, got {type(instances).__name__}")
  inputs = {k: [] for k in input_names}
  for i, instance in enumerate(instances):
    if isinstance(instance, dict) and "b64" not in instance:
      instance = dict({k: v for k, v in OPTIONAL_INPUTS.items() if k in input_names},
                      **instance)
      missing = [k for k in input_names if k not in instance]
      extra = sorted(set(instance) - set(input_names))
      if missing or extra:
        raise BadRequest(f"instance {i} has inputs {shown_names(instance)}; the signature takes "
                         f"{input_names}")
      for k in input_names:
        inputs[k].append(instance[k])
    elif len(set(input_names) - set(OPTIONAL_INPUTS)) == 1:
      for k in input_names:
        inputs[k].append(instance if k not in OPTIONAL_INPUTS else OPTIONAL_INPUTS[k])
    else:
      raise BadRequest(f"instance {i} must be an object with the inputs {input_names}")
  return inputs


def _columns(columns, input_names):
  """Columnar format -> {input name: [values]}."""
  if isinstance(columns, dict) and "b64" not in columns:
    if sorted(columns) != input_names:
      raise BadRequest(f"'inputs' has {shown_names(columns)}; the signature takes {input_names}")
  elif len(input_names) == 1:
    columns = {input_names[0]: columns}
  else:
    raise BadRequest(f"'inputs' must be an object with the inputs {input_names}")
  for k, values in columns.items():
    if not isinstance(values, list):
      raise BadRequest(f"input {k!r} must be a list of strings (one per sentence), got "
                       f"{type(values).__name__}")
  sizes = {len(v) for v in columns.values()}
  if len(sizes) > 1:
    raise BadRequest(f"the inputs have different lengths: "
                     f"{ {k: len(v) for k, v in columns.items()} }")
  return columns


def _strings(value, index, input_name, limits, flag):
  """One instance's list of strings -> a list of UTF-8 bytes; BadRequest naming the instance
  for anything else."""
  if not isinstance(value, list):
    raise BadRequest(f"instance {index} input {input_name!r}: expected a list of strings, "
                     f"got {type(value).__name__}")
  return [_string(v, index, input_name, limits, flag) for v in value]


def _string(value, index, input_name, limits, flag="--max_sentence_chars"):
  """One instance's value -> UTF-8 bytes; BadRequest for a non-string, bad base64, a lone
  surrogate or too many characters."""
  where = f"instance {index}" + (f" input {input_name!r}" if input_name != "inputs" else "")
  if isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str):
    try:
      data = base64.b64decode(value["b64"], validate=True)
    except (binascii.Error, ValueError) as e:  # ValueError: a character beyond ASCII
      raise BadRequest(f"{where}: invalid base64 ({shown(str(e))})") from None
    chars = len(data.decode("utf-8", errors="replace"))
  elif isinstance(value, str):
    try:
      data = value.encode("utf-8")
    except UnicodeEncodeError as e:
      raise BadRequest(f"{where} is not valid Unicode text: a lone surrogate at character "
                       f"{e.start}") from None
    chars = len(value)
  else:
    raise BadRequest(f"{where}: expected a string or {{\"b64\": ...}}, got "
                     f"{type(value).__name__}")
  if chars > limits.max_sentence_chars:
    raise BadRequest(f"{where} has {chars} characters, over the limit of "
                     f"{limits.max_sentence_chars} per sentence ({flag})")
  return data


def predict_response(outputs, output_names, row_format):
  """{output name: np.ndarray [batch, ...]} -> TF Serving's JSON response object."""
  if row_format:
    rows = len(outputs[output_names[0]])
    if len(output_names) == 1:
      return {"predictions": as_json_value(outputs[output_names[0]])}
    return {"predictions": [{k: as_json_value(outputs[k][i]) for k in output_names}
                            for i in range(rows)]}
  if len(output_names) == 1:
    return {"outputs": as_json_value(outputs[output_names[0]])}
  return {"outputs": {k: as_json_value(outputs[k]) for k in output_names}}
