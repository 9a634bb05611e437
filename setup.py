"""t2t-keras: the Transformer of "Attention Is All You Need" on TensorFlow 2 and Keras 3."""

import setuptools

# The source tree keeps built-in problems and hparams sets at the top level
# (problems/, hparams/); they install under the t2t_keras namespace so that no
# generic top-level name lands in site-packages.
PACKAGE_DIR = {
    "t2t_keras": "t2t_keras",
    "t2t_keras.problems": "problems",
    "t2t_keras.hparams": "hparams",
}

SUBPACKAGES = ["layers", "models", "data", "training", "decoding", "metrics",
               "serving", "server", "tuning", "bin"]

BINARIES = {
    "t2t-datagen": "datagen",
    "t2t-trainer": "trainer",
    "t2t-decoder": "decoder",
    "t2t-exporter": "exporter",
    "t2t-avg-all": "avg_all",
    "t2t-bleu": "bleu",
    "t2t-evalb": "evalb",
    "t2t-param-table": "param_table",
    "t2t-sweep": "sweep",
    "t2t-serve": "serve",
    "t2t-data-service": "data_service",
    "t2t-import": "t2t_import",
}

setuptools.setup(
    name="t2t-keras",
    version="0.1.0",
    description=__doc__,
    python_requires=">=3.10",
    package_dir=PACKAGE_DIR,
    packages=list(PACKAGE_DIR) + [f"t2t_keras.{p}" for p in SUBPACKAGES],
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
    ],
    package_data={"t2t_keras.server": ["page.html"]},
    # selenium drives Debian's chromium in the web page's browser test
    # ctranslate2: t2t-exporter --format=ctranslate2 and t2t-decoder --engine=ctranslate2
    extras_require={"test": ["pytest>=8", "pytest-xdist>=3", "selenium>=4.20"],
                    "ctranslate2": ["ctranslate2>=4.5,<5"]},
    entry_points={
        "console_scripts": [
            f"{name}=t2t_keras.bin.{module}:run" for name, module in BINARIES.items()
        ],
    },
)
