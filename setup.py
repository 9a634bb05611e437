"""t2t-keras: the Transformer of "Attention Is All You Need" on TensorFlow 2 and Keras 3."""

import ast
import os
import re

import setuptools

HERE = os.path.dirname(os.path.abspath(__file__))

# The source tree keeps built-in problems and hparams sets at the top level
# (problems/, hparams/); they install under the t2t_keras namespace so that no
# generic top-level name lands in site-packages. Every package below these three
# directories is found, not listed, and so is every file in them that is not Python.
ROOTS = {"t2t_keras": "t2t_keras", "t2t_keras.problems": "problems",
         "t2t_keras.hparams": "hparams"}

NOT_DATA = (".py", ".pyc", ".pyo", "~", ".swp", ".orig", ".rej", ".bak")


def find_layout():
  """(package_dir, packages, package_data) of every package under ROOTS' directories.

  A directory is a package when it holds an __init__.py; its other files are its
  package data, but for Python sources, compiled files, hidden files and editors' or
  patches' leftovers (NOT_DATA). A package is its most specific root's: a link
  t2t_keras/problems -> ../problems is found once, as problems/.
  """
  package_dir, packages, package_data = dict(ROOTS), [], {}
  for root, directory in ROOTS.items():
    below = setuptools.find_packages(os.path.join(HERE, directory))
    for name in [root] + [f"{root}.{p}" for p in below]:
      if max((r for r in ROOTS if name == r or name.startswith(r + ".")), key=len) != root:
        continue
      packages.append(name)
      path = os.path.join(HERE, directory, *name.split(".")[root.count(".") + 1:])
      data = sorted(f for f in os.listdir(path) if os.path.isfile(os.path.join(path, f))
                    and not f.startswith(".") and not f.endswith(NOT_DATA))
      if data:
        package_data[name] = data
  return package_dir, packages, package_data


def read(*parts):
  with open(os.path.join(HERE, *parts), encoding="utf-8") as f:
    return f.read()


def binaries():
  """t2t_keras/launcher.py's BINARIES (module of t2t_keras.bin -> console script): each
  script's entry point is the launcher's function of its module's name."""
  for node in ast.parse(read("t2t_keras", "launcher.py")).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "BINARIES":
      return ast.literal_eval(node.value)
  raise ValueError("t2t_keras/launcher.py defines no BINARIES")


def version():
  """t2t_keras/__init__.py's __version__, the one place the version is written."""
  match = re.search(r'^__version__ = "([^"]+)"$', read("t2t_keras", "__init__.py"), re.M)
  if not match:
    raise ValueError('t2t_keras/__init__.py has no line __version__ = "<version>"')
  return match.group(1)


PACKAGE_DIR, PACKAGES, PACKAGE_DATA = find_layout()

setuptools.setup(
    name="t2t-keras",
    version=version(),
    description=__doc__.strip(),
    long_description=read("README.md"),
    long_description_content_type="text/markdown",
    license_expression="Apache-2.0",
    license_files=["LICENSE"],
    python_requires=">=3.10",
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Science/Research",
        "Intended Audience :: Developers",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Topic :: Text Processing :: Linguistic",
    ],
    package_dir=PACKAGE_DIR,
    packages=PACKAGES,
    package_data=PACKAGE_DATA,
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "keras>=3.15,<4",
        "tensorflow-text>=2.21,<2.22",
        "tensorflow-datasets>=4.9",
        "sacrebleu>=2.4",
        "sacremoses>=0.1",
        "absl-py>=2.1",
        "tensorboard>=2.21,<2.22",
        "sentencepiece>=0.2",
        "num2words>=0.5.13",
        "matplotlib>=3.8",
        "nltk>=3.9",  # Penn Treebank .mrg reading (parsing problem)
        "starlette>=1.0",  # t2t-serve's HTTP routing (ASGI)
        "uvicorn>=0.30",  # t2t-serve's HTTP server
        "prometheus-client>=0.20",  # t2t-serve's /monitoring/prometheus/metrics
        "pyyaml>=6",  # Marian's model.yml, vocab.yml and decoder.yml (t2t-import --from=marian)
        "safetensors>=0.4",  # Hugging Face's model.safetensors, NumPy API (t2t-import --from=hf)
        "h5py>=3.10",  # Hugging Face's tf_model.h5 (t2t-import --from=hf)
    ],
    # selenium drives Debian's chromium in the web page's browser test; setuptools and
    # build make the wheel and sdist that tests/package/test_packaging.py reads and installs
    # hypothesis generates the requests and inputs of the fuzz tests (tests/server/test_fuzz_*)
    # ctranslate2: t2t-exporter --format=ctranslate2 and t2t-decoder --engine=ctranslate2
    extras_require={"test": ["pytest>=8", "pytest-xdist>=3", "selenium>=4.20",
                             "setuptools>=77", "build>=1.2", "hypothesis>=6.100"],
                    "ctranslate2": ["ctranslate2>=4.5,<5"],
                    # LiteRT's runtime (t2t-exporter --format=litert, litert_translate.py);
                    # TensorFlow converts, but its own tf.lite interpreter is deprecated.
                    "litert": ["ai-edge-litert>=2.3,<3"]},
    entry_points={
        "console_scripts": [
            f"{name}=t2t_keras.launcher:{module}" for module, name in binaries().items()
        ],
    },
)
