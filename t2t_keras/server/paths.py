"""TF Serving's REST paths: which model, version and verb a request names, or why none.

    parse("POST", "models/m/versions/07:predict", "m", [7, 6])
    # -> Target(verb="predict", version=7)   (version None: the path names none)

Written from TF Serving's `http_rest_api_util.cc` (ParseModelInfo) and
`http_rest_api_handler.cc` (ProcessRequest): paths under /v1/ match case-insensitively;
predict takes POST, status and metadata take GET; anything else under /v1/ (a wrong
method, a verb such as :PREDICT or :foo, /versions/abc) is 400 "Malformed request:
METHOD PATH". Versions are decimal digits read as a number (/versions/07 is version 7).
An unknown model or version is 404 ("Servable not found for request: ..."), an unknown
label 400. t2t-serve differs where TF Serving has nothing to say: paths outside /v1/ get
a JSON 404 (TF Serving: libevent's HTML page), and :classify / :regress name what is
served (TF Serving: the model's own error).
"""

import dataclasses
import re

from t2t_keras.server.quoting import shown

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")
_PREDICT = re.compile(r"models/(?P<name>[^/:]+)(?:/versions/(?P<version>\d+)|"
                      r"/labels/(?P<label>[^/:]+))?:(?P<verb>classify|regress|predict)",
                      re.IGNORECASE | re.ASCII)
_STATUS = re.compile(r"models(?:/(?P<name>[^/:]+))?(?:/versions/(?P<version>\d+)|"
                     r"/labels/(?P<label>[^/:]+))?(?:/(?P<verb>metadata))?",
                     re.IGNORECASE | re.ASCII)
_INT64_MAX = 2**63 - 1


class PathError(Exception):
  """A path TF Serving would refuse; `status` is its HTTP code."""

  def __init__(self, status, message):
    super().__init__(message)
    self.status = status


@dataclasses.dataclass(frozen=True)
class Target:
  verb: str  # "predict", "metadata" or "status"
  version: int  # the version the path names, None for none (the newest)


def parse(method, rest, model_name, served):
  """The Target of `METHOD /v1/<rest>` for a server of `model_name` in versions `served`
  (newest first); PathError (400 or 404) as TF Serving answers."""
  malformed = PathError(400, f"Malformed request: {shown(method)} /v1/{shown(rest)}")
  match = (_PREDICT if method == "POST" else _STATUS).fullmatch(rest)
  if method not in ("GET", "POST") or not match:
    raise malformed
  name, version, label, verb = match.group("name", "version", "label", "verb")
  if method == "POST" and verb != "predict":
    if verb in ("classify", "regress"):
      raise PathError(400, f"{verb} is not served: t2t-serve answers predict, metadata "
                           f"and status requests")
    raise malformed  # a verb in other case: TF Serving compares it exactly
  if method == "GET" and verb not in (None, "metadata"):
    raise malformed
  if not name:
    raise PathError(400, "Missing model name in request.")
  # By length first: int() refuses a string of over 4,300 digits (a ValueError, a 500).
  if version is not None and (len(version.lstrip("0")) > 19 or int(version) > _INT64_MAX):
    raise PathError(400, f"Failed to convert version: {shown(version)} to numeric.")
  if name != model_name:
    spec = f"Specific({shown(name)}, {int(version)})" if version else f"Latest({shown(name)})"
    raise PathError(404, f"Servable not found for request: {spec}; this server serves "
                         f"{model_name!r}")
  numbers = ", ".join(map(str, served))
  if label is not None:
    raise PathError(400, f"Unrecognized servable version label: {shown(label)} (t2t-serve serves "
                         f"versions {numbers} and no labels)")
  if version is not None and int(version) not in served:
    raise PathError(404, f"Servable not found for request: Specific({shown(name)}, "
                         f"{int(version)}); served versions: {numbers}")
  kind = {"predict": "predict", "metadata": "metadata", None: "status"}[verb]
  return Target(kind, None if version is None else int(version))
