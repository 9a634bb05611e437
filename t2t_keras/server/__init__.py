"""t2t-serve's library: TF Serving's REST API over an exported SavedModel.

    model.py     the SavedModel: finding the version, signatures, metadata, calls
    rest.py      TF Serving's predict request and response formats (pure functions)
    batching.py  dynamic batching: concurrent requests merged into one signature call
    app.py       the Starlette application: routes, limits, access log, web page
    page.html    the web page at /

This package imports TensorFlow, TensorFlow Text, Starlette and NumPy only,
nothing of the training code (tests/package/test_house.py holds the wall), so a server
image needs no more than those and this directory.
"""
