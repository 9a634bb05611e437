# Sourced: creates .venv with the pinned stack and the package (editable) once, then activates it.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import t2t_keras" 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -c requirements.lock -e '.[test]'
fi
source .venv/bin/activate
