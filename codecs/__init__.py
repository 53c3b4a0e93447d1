"""msgspec Structs, their module-level Decoders/Encoders, and the shape of the config file.

Imported as ``teams_runtime.codecs`` only: the explicit package list in ``pyproject.toml``
keeps this folder from ever shadowing the standard library's ``codecs``.
"""
