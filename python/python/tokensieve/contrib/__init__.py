"""Integrations with other libraries."""


def __getattr__(name: str):
    import importlib

    if name == "hf":
        return importlib.import_module(".hf", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
