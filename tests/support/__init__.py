"""What the tests share that is not a fixture: fake servers and models, reference readings,
strategies, scripts run as processes, and where things are (``paths``).

A folder of its own, so that running one of these as a script (``python fake_model.py``)
never puts a test folder named like a standard module (``tests/codecs``) on ``sys.path``.
"""
