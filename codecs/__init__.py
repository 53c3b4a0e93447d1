"""msgspec Structs, the module-level Decoders/Encoders, and YAML config loading.

Imported as ``teams_runtime.codecs`` only: the explicit package list in ``pyproject.toml``
keeps this folder from ever shadowing the standard library's ``codecs``.
"""
