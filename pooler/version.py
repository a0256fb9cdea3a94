"""pooler's version, in one leaf module: the stages read it here, not from the package's public API.

``pooler/__init__.py`` names every stage, so a stage that imported the package for its version
would depend on all of them (the import contracts in pyproject.toml refuse that).
"""

__version__ = "0.1.0"
