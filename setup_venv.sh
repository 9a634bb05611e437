# Sourced: creates .venv with the pinned stack and the package (editable), again whenever
# the package's definition changes (setup.py, pyproject.toml, requirements.lock, the version
# and the console scripts' list in t2t_keras/; a stamp in .venv records them), then
# activates it.
T2T_VENV_STAMP=$(cat setup.py pyproject.toml requirements.lock t2t_keras/__init__.py \
    t2t_keras/launcher.py | sha256sum | cut -c1-16)
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.t2t_stamp 2>/dev/null)" != "$T2T_VENV_STAMP" ] \
    || ! .venv/bin/python -c "import t2t_keras" 2>/dev/null; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -c requirements.lock -e '.[test,ctranslate2,litert]'
  echo "$T2T_VENV_STAMP" > .venv/.t2t_stamp
fi
# tensor2tensor's text_encoder, the reference tests/data/test_t2t_subwords.py compares against:
# --no-deps --target keeps it (and its t2t-* console scripts) out of the venv's packages.
[ -d .venv/t2t_reference/tensor2tensor ] || .venv/bin/pip install -q --no-deps \
    --target .venv/t2t_reference tensor2tensor==1.15.7 \
  || echo "setup_venv.sh: warning: tensor2tensor's reference not installed; its comparisons skip" >&2
# transformers 4.57 (the last release with TensorFlow models) and tf-keras, the second
# reference of tests/importing/test_hf_marian_import.py (TFMarianMTModel, MarianTokenizer): the same
# --no-deps --target keeps them out of the venv's packages.
[ -d .venv/hf_reference/transformers ] || .venv/bin/pip install -q --no-deps \
    --target .venv/hf_reference transformers==4.57.1 tf-keras==2.21.0 tokenizers==0.22.1 \
    huggingface_hub==0.36.2 filelock==4.3.1 safetensors==0.8.0 \
  || echo "setup_venv.sh: warning: transformers' reference not installed; its comparisons skip" >&2
source .venv/bin/activate
