# Sourced: creates .venv with the pinned stack and the package (editable), again whenever
# setup.py or requirements.lock change (a stamp in .venv records them), then activates it.
T2T_VENV_STAMP=$(cat setup.py requirements.lock | sha256sum | cut -c1-16)
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.t2t_stamp 2>/dev/null)" != "$T2T_VENV_STAMP" ] \
    || ! .venv/bin/python -c "import t2t_keras" 2>/dev/null; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -c requirements.lock -e '.[test,ctranslate2]'
  echo "$T2T_VENV_STAMP" > .venv/.t2t_stamp
fi
source .venv/bin/activate
